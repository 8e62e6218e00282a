"""Message ids and transaction ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.history.schema import format_msg_id, format_txn_id
from harness.wire import proto
from harness.wire.ids import MessageId, TxnId

i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_text_form_matches_the_history_contract() -> None:
    assert str(MessageId(12, 3)) == format_msg_id(12, 3) == "12:3:-1"
    assert str(MessageId(12, 3, 4, partition=2)) == format_msg_id(12, 3, 4) == "12:3:4"
    assert str(TxnId(3, 17)) == format_txn_id(3, 17) == "3:17"


def test_parse() -> None:
    assert MessageId.parse("12:3:-1") == MessageId(12, 3)
    assert MessageId.parse("12:3:4", partition=1) == MessageId(12, 3, 4, 1)
    assert TxnId.parse("3:17") == TxnId(3, 17)
    for bad in ("12:3", "a:b:c", ""):
        with pytest.raises(ValueError, match="message id"):
            MessageId.parse(bad)
    for bad in ("3", "3:x", "-1:2"):
        with pytest.raises(ValueError, match="transaction id"):
            TxnId.parse(bad)


def test_log_order() -> None:
    ids = [MessageId(2, 0), MessageId(1, 5, 1), MessageId(1, 5), MessageId(1, 5, 0),
           MessageId.EARLIEST, MessageId.LATEST, MessageId(1, 4, 9)]
    assert sorted(ids) == [MessageId.EARLIEST, MessageId(1, 4, 9), MessageId(1, 5),
                           MessageId(1, 5, 0), MessageId(1, 5, 1), MessageId(2, 0), MessageId.LATEST]


def test_batch_size_takes_no_part_in_equality() -> None:
    assert MessageId(1, 2, 0, batch_size=5) == MessageId(1, 2, 0)
    assert hash(MessageId(1, 2, 0, batch_size=5)) == hash(MessageId(1, 2, 0))
    assert MessageId(1, 2, 3).entry() == MessageId(1, 2)
    assert MessageId(1, 2, 3).is_batched and not MessageId(1, 2).is_batched


def test_earliest_and_latest_use_twos_complement_on_the_wire() -> None:
    data = MessageId.EARLIEST.to_proto()
    assert data.ledgerId == 2**64 - 1 and data.entryId == 2**64 - 1
    assert not data.HasField("partition") and not data.HasField("batch_index")
    assert MessageId.from_proto(proto.MessageIdData.FromString(data.SerializeToString())) == MessageId.EARLIEST
    assert MessageId.from_proto(MessageId.LATEST.to_proto()) == MessageId.LATEST


@given(i64, i64, st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1), st.integers(0, 1000))
def test_proto_round_trip(ledger: int, entry: int, batch: int, partition: int, size: int) -> None:
    original = MessageId(ledger, entry, batch, partition, size)
    back = MessageId.from_proto(proto.MessageIdData.FromString(original.to_proto().SerializeToString()))
    assert back == original and back.batch_size == size


@given(i64, i64, i64, i64)
def test_order_is_lexicographic_on_ledger_then_entry(l1: int, e1: int, l2: int, e2: int) -> None:
    assert (MessageId(l1, e1) < MessageId(l2, e2)) == ((l1, e1) < (l2, e2))


def test_txn_id_fields_presence_not_value() -> None:
    body = proto.CommandSend(producer_id=1, sequence_id=1)
    assert TxnId.from_fields(body) is None
    TxnId(0, 0).fill(body)
    assert TxnId.from_fields(body) == TxnId(0, 0)
    metadata = proto.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1,
                                     txnid_most_bits=5, txnid_least_bits=6)
    assert TxnId.from_fields(metadata) == TxnId(5, 6)
