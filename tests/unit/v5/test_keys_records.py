"""The PIP-473 key layout and records: the exact keys Pulsar 5.0 writes, and round trips."""

from __future__ import annotations

import pytest

from embedded.broker.v5.txn import keys
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
    assert keys.txn_key(txn) == "3_17"
    assert keys.header(txn) == "/txn/id/3_17"
    assert keys.op_parent(txn) == "/txn/op/3_17"
    assert keys.segment_key(SEGMENT) == ENCODED
    assert keys.segment_events_parent(SEGMENT) == f"/txn/segment-events/{ENCODED}"
    assert keys.ack_index_key(SEGMENT, "sub:a/b") == f"{ENCODED}:sub%3Aa%2Fb"
    assert keys.subscription_events_parent(SEGMENT, "s") == f"/txn/subscription-events/{ENCODED}:s"
    assert keys.watermark(SEGMENT) == f"/txn/segment-state/watermark/{ENCODED}"
    assert keys.aborted(SEGMENT, txn) == f"/txn/segment-state/aborted/{ENCODED}:3_17"
    assert keys.aborted_index_key(SEGMENT, 12, 5) == f"{ENCODED}:{12:020d}:{5:020d}"
    assert keys.tc_sequence(2) == "/txn/tc-seq/2"
    assert keys.tc_leader(0) == "/txn/tc/leader/0"
    assert keys.deadline_key(1_700_000_000_000) == "00000001700000000000"
    assert keys.final_state_key("COMMITTED", 5) == "COMMITTED:00000000000000000005"


def test_keys_parse_back() -> None:
    txn = TxnId(12, 345)
    assert keys.txn_of_header(keys.header(txn)) == txn
    assert keys.txn_of_op(keys.op_parent(txn) + "-00000000000000000007") == txn
    assert keys.txn_of_aborted(keys.aborted(SEGMENT, txn)) == txn
    with pytest.raises(keys.KeyFormatError):
        keys.txn_of_op("/txn/op/nodash")
    with pytest.raises(keys.KeyFormatError):
        keys.parse_txn_key("3-17")
    with pytest.raises(keys.KeyFormatError):
        keys.long_key(-1)


def test_ranges_select_exactly_their_keys() -> None:
    low, high = keys.op_range(TxnId(1, 2))
    assert low <= "/txn/op/1_2-00000000000000000001" < high
    assert not low <= "/txn/op/1_20-00000000000000000001" < high   # 1_2 is a prefix of 1_20
    low, high = keys.exact_range("1_2")
    assert low <= "1_2" < high and not low <= "1_20" < high
    low, high = keys.aborted_index_range(SEGMENT)
    assert low <= keys.aborted_index_key(SEGMENT, 0, 0) < high
    assert low <= keys.aborted_index_key(SEGMENT, 10**19, 10**19) < high
    assert not low <= keys.aborted_index_key(SEGMENT + "0", 1, 1) < high
    parent = keys.segment_events_parent(SEGMENT)
    assert keys.is_sequence_key(parent, parent + "-00000000000000000003")
    assert not keys.is_sequence_key(parent, parent + "0-00000000000000000003")
    assert not keys.is_sequence_key(parent, parent + "-3")


def test_header_indexes_move_with_the_state() -> None:
    header = TxnHeader(TxnState.OPEN, timeout_ms=30_000, created_ms=1_000)
    assert header.index() == {keys.IDX_TXN_BY_DEADLINE: keys.long_key(31_000)}
    done = header.finalize(TxnState.ABORTED, 5_000)
    assert done.index() == {keys.IDX_TXN_BY_FINAL_STATE: "ABORTED:" + keys.long_key(5_000)}
    assert TxnHeader.from_json(done.to_json()) == done
    with pytest.raises(ValueError):
        header.finalize(TxnState.OPEN, 1)
    assert TxnState.for_action(TxnAction.COMMIT) is TxnState.COMMITTED


def test_op_records_and_their_indexes() -> None:
    txn = TxnId(0, 9)
    write = TxnOp.write(SEGMENT)
    assert (write.ledger_id, write.entry_id) == (0, 0)   # written before the append: position unknown
    assert write.index(txn) == {keys.IDX_OPS_BY_TXN: "0_9", keys.IDX_WRITES_BY_SEGMENT: ENCODED}
    ack = TxnOp.ack(SEGMENT, "sub", 4, 2, ack_set=(6,))
    assert ack.index(txn)[keys.IDX_ACKS_BY_SEGMENT_SUBSCRIPTION] == f"{ENCODED}:sub"
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
