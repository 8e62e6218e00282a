"""The coordinator's state machine: transitions, timeouts, low watermark and log replay."""

from __future__ import annotations

import pytest

from embedded.broker.position import Position
from embedded.broker.txn_api import TxnError
from embedded.broker.v4.batched_writer import LogPosition
from embedded.broker.v4.coordinator_state import CoordinatorState, EndDecision, TxnState
from embedded.broker.v4.records import TransactionMetadataOp as Op
from embedded.broker.v4.records import TxnStatus, txn_record
from harness.wire import ServerError, TxnAction, TxnId


def at(entry: int, index: int = -1, size: int = 0) -> LogPosition:
    return LogPosition(Position(1, entry), index, size)


def test_commit_path_and_illegal_transitions() -> None:
    state = CoordinatorState(2)
    txn = state.next_txn()
    assert txn == TxnId(2, 1)
    meta = state.opened(txn, 1000, 5000, at(0))
    assert state.add_partitions(meta, ["a", "b", "a"]) == ["a", "b"]
    meta2, decision = state.begin_end(txn, TxnAction.COMMIT)
    assert meta2 is meta and decision is EndDecision.START and meta.state is TxnState.COMMITTING
    assert state.begin_end(txn, TxnAction.COMMIT)[1] is EndDecision.JOIN
    with pytest.raises(TxnError) as err:
        state.begin_end(txn, TxnAction.ABORT)
    assert err.value.error is ServerError.InvalidTxnStatus
    with pytest.raises(TxnError) as err:
        state.check_open(txn, "add partitions to")
    assert err.value.error is ServerError.InvalidTxnStatus
    state.decision_logged(meta, at(1))
    assert state.finished(meta, at(2)) == [at(0), at(1), at(2)]
    assert meta.state is TxnState.COMMITTED
    with pytest.raises(TxnError) as err:   # a finished transaction is forgotten, as in Pulsar
        state.begin_end(txn, TxnAction.COMMIT)
    assert err.value.error is ServerError.TransactionNotFound


def test_timeout_claims_only_open_transactions_and_blocks_commit() -> None:
    state = CoordinatorState(0)
    a, b = state.next_txn(), state.next_txn()
    state.opened(a, 0, 100, at(0))
    state.opened(b, 0, 10_000, at(1))
    assert state.next_deadline_ms() == 100
    (expired,) = state.expired(100)
    assert expired.txn == a and state.time_out(expired) and not state.time_out(expired)
    assert expired.state is TxnState.TIME_OUT and expired.action is TxnAction.ABORT
    with pytest.raises(TxnError, match="timed out"):
        state.begin_end(a, TxnAction.COMMIT)
    assert state.begin_end(a, TxnAction.ABORT)[1] is EndDecision.JOIN
    state.decision_logged(expired, at(2))
    assert expired.state is TxnState.ABORTING
    assert state.low_watermark() == 0   # txn 1 is not finished yet
    state.finished(expired, at(3))
    assert state.low_watermark() == 1   # everything below 2 has ended


def test_replay_rebuilds_open_and_deciding_transactions_and_deletes_what_is_done() -> None:
    state = CoordinatorState(1)
    records = [
        txn_record(Op.NEW, 1, 1, now_ms=10, max_local_txn_id=1, timeout_ms=1000),
        txn_record(Op.NEW, 1, 2, now_ms=11, max_local_txn_id=2, timeout_ms=1000),
        txn_record(Op.ADD_PARTITION, 1, 1, now_ms=12, max_local_txn_id=2, partitions=["p1"]),
        txn_record(Op.ADD_SUBSCRIPTION, 1, 2, now_ms=12, max_local_txn_id=2, subscriptions=[("t", "s")]),
        txn_record(Op.UPDATE, 1, 1, now_ms=13, max_local_txn_id=2, new_status=TxnStatus.COMMITTING,
                   expected_status=TxnStatus.OPEN),
        txn_record(Op.NEW, 1, 3, now_ms=14, max_local_txn_id=3, timeout_ms=1000),
        txn_record(Op.UPDATE, 1, 3, now_ms=15, max_local_txn_id=3, new_status=TxnStatus.ABORTING),
        txn_record(Op.UPDATE, 1, 3, now_ms=16, max_local_txn_id=3, new_status=TxnStatus.ABORTED),
        txn_record(Op.ADD_PARTITION, 1, 9, now_ms=17, max_local_txn_id=5, partitions=["x"]),   # unknown txn
        txn_record(Op.UPDATE, 1, 2, now_ms=18, max_local_txn_id=5, new_status=TxnStatus.COMMITTED),  # illegal
    ]
    deleted: list[LogPosition] = []
    for i, record in enumerate(records):
        deleted.extend(state.replay(record, at(i)))
    assert sorted(state.txns) == [1, 2]
    assert state.txns[1].state is TxnState.COMMITTING and state.txns[1].partitions == ["p1"]
    assert state.txns[1].decision_logged and [m.txn.least for m in state.in_flight()] == [1]
    assert state.txns[2].state is TxnState.OPEN and state.txns[2].subscriptions == [("t", "s")]
    assert state.txns[2].deadline_ms == 11 + 1000
    assert set(deleted) == {at(5), at(6), at(7), at(8), at(9)}
    assert state.sequence == 5   # the highest id ever handed out, from max_local_txn_id
    assert state.next_txn() == TxnId(1, 6)
