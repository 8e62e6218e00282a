"""A reader reads a v4 topic to its end when the tail is transaction markers and aborted messages.

Found by the self-test (`txnbenchBugLedgerAckBeforeJournal` on `selftest-stores`): a
partition whose last entries were a commit marker, an aborted message and its abort marker
(218:277..280) had been read to its last dispatchable message (218:276) in the drain's
first read round, but a second round (another partition was still stuck) asked the broker
for the end again and waited for 218:276 to arrive once more, and a reader started at
218:276 waited for it too: both stalled, the drain was incomplete and the verdict unknown.
Pulsar's reader compares the broker's last message id with the last message it dequeued,
or, before any, with its start position (`ConsumerImpl.hasMessageAvailable`), so a reader
at the end has nothing more to read, whatever the entries after it are.

These tests pin both halves with real processes: the broker's GET_LAST_MESSAGE_ID steps
back over markers and aborted messages (also after a restart rebuilt the transaction
buffer from the log), and `Reader.read_to_end` ends at once for a partition it has read to
that id, in an earlier call or by starting there.
"""

from __future__ import annotations

import uuid

from harness.client import PulsarClient
from harness.client.admin import AdminClient
from harness.client.consumer import Message
from harness.client.reader import Reader
from harness.client.timers import Deadline
from harness.wire import MessageId
from tests.cluster.conftest import ClusterFactory, service_urls
from tests.cluster.test_v4_transactions import TXN_SETTINGS, payload, value_of
from tests.waiting import wait_until

READ_S = 10.0     # generous: each read below that works ends as soon as its messages arrived


def _values(messages: list[Message]) -> list[str]:
    return [value_of(m.data) for m in messages]


def _ends(reader: Reader) -> dict[str, MessageId]:
    """What the broker answers to GET_LAST_MESSAGE_ID for each partition of the reader."""
    deadline = Deadline.after(READ_S)
    return {child.topic: child.last_message_id(deadline) for child in reader.consumer.consumers}


def _write(client: PulsarClient, topic: str) -> tuple[MessageId, MessageId]:
    """Partition 1 ends with [committed message, its commit marker, aborted message, abort marker];
    partition 0 holds one plain message. Returns the ids of partition 1's committed message
    and partition 0's message."""
    p0 = client.create_producer(f"{topic}-partition-0")
    p1 = client.create_producer(f"{topic}-partition-1")
    p1.send(payload("plain"))
    committed = client.new_transaction(timeout_s=60)
    last_visible = p1.send(payload("committed"), txn=committed).message_id
    committed.commit()
    aborted = client.new_transaction(timeout_s=60)
    p1.send(payload("aborted"), txn=aborted)
    aborted.abort()
    other = p0.send(payload("p0-first")).message_id
    p0.close()
    p1.close()
    return last_visible, other


def _same_entry(a: MessageId, b: MessageId) -> bool:
    return (a.ledger_id, a.entry_id) == (b.ledger_id, b.entry_id)


def test_a_reader_at_the_end_of_a_partition_whose_tail_is_markers_and_aborted_messages_is_done(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=1, settings=TXN_SETTINGS)
    topic = f"persistent://public/default/tail-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(cluster.records["broker-0"].admin_url or "", timeout_s=10)
    admin.create_partitioned_topic(topic, 2)
    second = f"{topic}-partition-1"
    with PulsarClient(service_urls(cluster), txn_path="v4", operation_timeout_s=20) as client:
        last_visible, _ = _write(client, topic)
        ledger = admin.internal_stats(second)["ledgers"][-1]
        assert ledger["entries"] == 5 and ledger["ledgerId"] == last_visible.ledger_id   # 2 + marker + 2
        # the entries after the end are stored (getMessageById finds them): nothing there is lost,
        # so the drain's look-ahead rightly did not skip them; the reader must simply be done
        assert all(admin.stored_entry(second, ledger["ledgerId"], e).found for e in (2, 3, 4))
        reader = client.create_reader(topic)
        try:
            # the broker's end of partition 1 is the committed message, not the markers after it
            assert _same_entry(_ends(reader)[second], last_visible)
            assert sorted(_values(reader.read_to_end(READ_S))) == ["committed", "p0-first", "plain"]
            # the reader's cursor is in internalStats (as Pulsar lists non-durable cursors), past
            # the markers and the aborted message it read and did not deliver
            wait_until(lambda: admin.internal_stats(second)["cursors"][reader.subscription]["readPosition"]
                       == f"{last_visible.ledger_id}:5", 10, message="the reader's cursor past the tail")
            # a second call (the drain reads in rounds) does not wait for partition 1's end again:
            # it brings what was written since, on partition 0 only
            client.create_producer(f"{topic}-partition-0").send(payload("p0-second"))
            assert _values(reader.read_to_end(READ_S)) == ["p0-second"]
            assert reader.read_to_end(READ_S) == []
        finally:
            reader.close(2)
        # a reader started at the end of partition 1 (the drain reads on from the last entry it read)
        at_end = client.create_reader(second, start=MessageId(last_visible.ledger_id, last_visible.entry_id))
        try:
            assert at_end.read_to_end(READ_S) == []
        finally:
            at_end.close(2)

    # after a restart the ledger is closed and the transaction buffer rebuilt from the log:
    # the end is still the committed message, and a reader there is still done
    cluster.stop("broker-0")
    cluster.start("broker-0")
    with PulsarClient(service_urls(cluster), txn_path="v4", operation_timeout_s=20) as client:
        reader = client.create_reader(topic)
        try:
            assert _same_entry(_ends(reader)[second], last_visible)
            assert sorted(_values(reader.read_to_end(READ_S))) == ["committed", "p0-first", "p0-second", "plain"]
            assert reader.read_to_end(READ_S) == []
        finally:
            reader.close(2)
        at_end = client.create_reader(second, start=MessageId(last_visible.ledger_id, last_visible.entry_id))
        try:
            assert at_end.read_to_end(READ_S) == []
        finally:
            at_end.close(2)
