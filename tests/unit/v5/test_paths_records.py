"""The PIP-473 key layout and records: the exact keys Pulsar 5.0 writes, and round trips."""

from __future__ import annotations

import pytest

from embedded.broker.v5.txn import paths
from embedded.broker.v5.txn.records import (
    OpKind,
    RecordError,
    SegmentWatermark,
    TcLeader,
    TxnEvent,
    TxnHeader,
    TxnOp,
    TxnState,
)
from harness.wire import TxnAction, TxnId

SEGMENT = "segment://public/default/orders/0000-7fff-1"
ENCODED = "segment%3A%2F%2Fpublic%2Fdefault%2Forders%2F0000-7fff-1"


def test_keys_follow_txn_paths() -> None:
    txn = TxnId(3, 17)
    assert paths.txn_key(txn) == "3_17"
    assert paths.header(txn) == "/txn/id/3_17"
    assert paths.op_parent(txn) == "/txn/op/3_17"
    assert paths.segment_key(SEGMENT) == ENCODED
    assert paths.segment_events_parent(SEGMENT) == f"/txn/segment-events/{ENCODED}"
    assert paths.ack_index_key(SEGMENT, "sub:a/b") == f"{ENCODED}:sub%3Aa%2Fb"
    assert paths.subscription_events_parent(SEGMENT, "s") == f"/txn/subscription-events/{ENCODED}:s"
    assert paths.watermark(SEGMENT) == f"/txn/segment-state/watermark/{ENCODED}"
    assert paths.aborted(SEGMENT, txn) == f"/txn/segment-state/aborted/{ENCODED}:3_17"
    assert paths.aborted_index_key(SEGMENT, 12, 5) == f"{ENCODED}:{12:020d}:{5:020d}"
    assert paths.tc_sequence(2) == "/txn/tc-seq/2"
    assert paths.tc_leader(0) == "/txn/tc/leader/0"
    assert paths.deadline_key(1_700_000_000_000) == "00000001700000000000"
    assert paths.final_state_key("COMMITTED", 5) == "COMMITTED:00000000000000000005"


def test_keys_parse_back() -> None:
    txn = TxnId(12, 345)
    assert paths.txn_of_header(paths.header(txn)) == txn
    assert paths.txn_of_op(paths.op_parent(txn) + "-00000000000000000007") == txn
    assert paths.txn_of_aborted(paths.aborted(SEGMENT, txn)) == txn
    with pytest.raises(paths.KeyFormatError):
        paths.txn_of_op("/txn/op/nodash")
    with pytest.raises(paths.KeyFormatError):
        paths.parse_txn_key("3-17")
    with pytest.raises(paths.KeyFormatError):
        paths.long_key(-1)


def test_ranges_select_exactly_their_keys() -> None:
    low, high = paths.op_range(TxnId(1, 2))
    assert low <= "/txn/op/1_2-00000000000000000001" < high
    assert not low <= "/txn/op/1_20-00000000000000000001" < high   # 1_2 is a prefix of 1_20
    low, high = paths.exact_range("1_2")
    assert low <= "1_2" < high and not low <= "1_20" < high
    low, high = paths.aborted_index_range(SEGMENT)
    assert low <= paths.aborted_index_key(SEGMENT, 0, 0) < high
    assert low <= paths.aborted_index_key(SEGMENT, 10**19, 10**19) < high
    assert not low <= paths.aborted_index_key(SEGMENT + "0", 1, 1) < high
    parent = paths.segment_events_parent(SEGMENT)
    assert paths.is_sequence_key(parent, parent + "-00000000000000000003")
    assert not paths.is_sequence_key(parent, parent + "0-00000000000000000003")
    assert not paths.is_sequence_key(parent, parent + "-3")


def test_header_indexes_move_with_the_state() -> None:
    header = TxnHeader(TxnState.OPEN, timeout_ms=30_000, created_ms=1_000)
    assert header.index() == {paths.IDX_TXN_BY_DEADLINE: paths.long_key(31_000)}
    done = header.finalize(TxnState.ABORTED, 5_000)
    assert done.index() == {paths.IDX_TXN_BY_FINAL_STATE: "ABORTED:" + paths.long_key(5_000)}
    assert TxnHeader.from_json(done.to_json()) == done
    with pytest.raises(ValueError):
        header.finalize(TxnState.OPEN, 1)
    assert TxnState.for_action(TxnAction.COMMIT) is TxnState.COMMITTED


def test_op_records_and_their_indexes() -> None:
    txn = TxnId(0, 9)
    write = TxnOp.write(SEGMENT)
    assert (write.ledger_id, write.entry_id) == (0, 0)   # written before the append: position unknown
    assert write.index(txn) == {paths.IDX_OPS_BY_TXN: "0_9", paths.IDX_WRITES_BY_SEGMENT: ENCODED}
    ack = TxnOp.ack(SEGMENT, "sub", 4, 2, ack_set=(6,))
    assert ack.index(txn)[paths.IDX_ACKS_BY_SEGMENT_SUBSCRIPTION] == f"{ENCODED}:sub"
    assert TxnOp.from_json(ack.to_json()) == ack
    cumulative = TxnOp.ack(SEGMENT, "sub", 4, 3, cumulative=True)
    assert TxnOp.from_json(cumulative.to_json()).cumulative is True
    assert TxnOp.from_json(write.to_json()).kind is OpKind.WRITE


def test_events_and_small_records() -> None:
    event = TxnEvent(TxnId(1, 1), TxnState.COMMITTED)
    assert TxnEvent.from_json(event.to_json()) == event
    with pytest.raises(RecordError, match="no decision"):
        TxnEvent.from_json('{"txnId": "1_1", "decision": "OPEN"}')
    with pytest.raises(RecordError, match="not JSON"):
        TxnHeader.from_json("{")
    mark = SegmentWatermark(3, 4)
    assert SegmentWatermark.from_json(mark.to_json()) == mark
    leader = TcLeader("1", "pulsar://127.0.0.1:1", None, "http://127.0.0.1:2")
    assert TcLeader.from_json(leader.to_json()) == leader
