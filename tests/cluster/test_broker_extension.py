"""The transaction extension points, end to end, with a toy transaction path installed.

This module is also the toy path: the brokers import it by name
(`txnbenchTxnExtensions: ["tests.cluster.test_broker_extension"]`) and call `install`.
The toy is deliberately tiny (in-memory, one coordinator per broker) so the test
checks the broker's side of each contract, not a transaction design:

* coordinator commands reach the LEGACY coordinator, and END_TXN fans out
  END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION through `peers.request_owner`,
  across the `broker-0-broker-1` link when the topic lives on the other broker;
* the transaction buffer holds the read horizon while a transaction is open, and
  dispatchers wake up when it moves; aborted entries and markers are skipped;
* the pending-ack handle hides held positions, raises TransactionConflict, commits to
  the cursor and makes aborted acks deliverable again.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from typing import Any

import pulsar
import pytest

from embedded.broker.entry import EntryInfo
from embedded.broker.lookup_policy import choose_broker
from embedded.broker.position import Position
from embedded.broker.topic_name import TopicDomain, TopicName
from embedded.broker.txn_api import (
    BrokerContext,
    ChangeListeners,
    ClientChannel,
    CoordinatorKind,
    SubscriptionServices,
    TopicServices,
    TxnAck,
    TxnError,
    TxnRegistryApi,
)
from harness.wire import (
    Command,
    CommandType,
    MarkerType,
    MessageId,
    Payload,
    ServerError,
    SubType,
    TxnAction,
    TxnId,
    commands,
)
from tests.cluster.conftest import ClusterFactory, WireClient, lookup_until_connect, subscribe

MODULE = "tests.cluster.test_broker_extension"


# ---- the toy transaction path -------------------------------------------------------------------


class ToyBuffer:
    def __init__(self, topic: TopicServices) -> None:
        self.topic = topic
        self.open: dict[TxnId, Position] = {}
        self.aborted: set[TxnId] = set()
        self.ended: set[TxnId] = set()
        self.horizon = topic.ledger.last_confirmed
        self.listeners = ChangeListeners()

    async def recover(self) -> None:
        self.horizon = self.topic.ledger.last_confirmed

    async def append(self, txn: TxnId, data: bytes, info: EntryInfo) -> Position:
        if txn in self.ended:
            raise TxnError(ServerError.InvalidTxnStatus, f"{txn} has ended")
        return await self.topic.ledger.append(data, info)

    def on_entry_added(self, position: Position, info: EntryInfo) -> None:
        if info.txn is not None and not info.marker and info.txn not in self.ended:
            self.open.setdefault(info.txn, position)
        self._move(position)

    def _move(self, last: Position) -> None:
        if self.open:
            first = min(self.open.values())
            horizon = Position(first.ledger_id, first.entry_id - 1)
        else:
            horizon = last
        if horizon != self.horizon:
            self.horizon = horizon
            self.listeners.fire()

    def max_read_position(self) -> Position:
        return self.horizon

    def is_aborted(self, txn: TxnId, position: Position) -> bool:
        return txn in self.aborted

    def add_listener(self, listener: Any) -> None:
        self.listeners.add(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.remove(listener)

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        if txn in self.ended:
            return
        self.ended.add(txn)
        if action is TxnAction.ABORT:
            self.aborted.add(txn)
        self.open.pop(txn, None)
        marker = MarkerType.TXN_COMMIT if action is TxnAction.COMMIT else MarkerType.TXN_ABORT
        meta = commands.message_metadata("tc", 0, 0, txn=txn, marker_type=marker)
        entry = bytes(Payload.build(meta, b"").entry)
        await self.topic.ledger.append(entry, EntryInfo(1, txn, True))

    async def close(self) -> None:
        return None

    def stats(self) -> dict[str, Any]:
        return {"open": len(self.open), "aborted": len(self.aborted)}


class ToyPendingAck:
    def __init__(self, subscription: SubscriptionServices) -> None:
        self.subscription = subscription
        self.held: dict[Position, TxnId] = {}

    async def recover(self) -> None:
        return None

    async def individual_ack(self, txn: TxnId, acks: Sequence[TxnAck]) -> None:
        for ack in acks:
            holder = self.held.get(ack.position)
            if self.subscription.cursor.is_acked(ack.position) or (holder is not None and holder != txn):
                raise TxnError(ServerError.TransactionConflict, f"{ack.position} is already acknowledged or held")
        for ack in acks:
            self.held[ack.position] = txn

    async def cumulative_ack(self, txn: TxnId, ack: TxnAck) -> None:
        raise TxnError(ServerError.NotAllowedError, "the toy path has no cumulative transactional acks")

    def check_plain_ack(self, positions: Sequence[Position], cumulative: bool) -> None:
        return None

    def held_cumulatively(self, position: Position) -> bool:
        return False

    def is_pending(self, position: Position) -> bool:
        return position in self.held

    def pending_ack_set(self, position: Position) -> None:
        return None

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        mine = sorted(p for p, t in self.held.items() if t == txn)
        for position in mine:
            del self.held[position]
        if action is TxnAction.COMMIT:
            self.subscription.cursor.acknowledge([(p, None) for p in mine])
        else:
            self.subscription.redeliver(mine)
        self.subscription.wake()

    async def close(self) -> None:
        return None

    def stats(self) -> dict[str, Any]:
        return {"held": len(self.held)}


class ToyCoordinator:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.sequence = itertools.count(1)
        self.partitions: dict[TxnId, list[str]] = {}
        self.subscriptions: dict[TxnId, list[tuple[str, str]]] = {}

    async def tc_client_connect(self, tc_id: int) -> None:
        if tc_id >= 4:
            raise TxnError(ServerError.TransactionCoordinatorNotFound, f"no coordinator {tc_id}")

    async def new_txn(self, tc_id: int, timeout_ms: int) -> TxnId:
        return TxnId(tc_id, self.broker.broker_id * 1_000_000 + next(self.sequence))

    async def add_partitions(self, txn: TxnId, partitions: Sequence[str]) -> None:
        self.partitions.setdefault(txn, []).extend(partitions)

    async def add_subscriptions(self, txn: TxnId, subscriptions: Sequence[tuple[str, str]]) -> None:
        self.subscriptions.setdefault(txn, []).extend(subscriptions)

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None:
        for partition in self.partitions.pop(txn, []):
            def end_on_partition(rid: int, p: str = partition) -> Command:
                return commands.end_txn_on_partition(rid, txn, p, action)

            answer = await self.broker.peers.request_owner(TopicName.parse(partition), end_on_partition)
            if commands.error_of(answer):
                raise TxnError(ServerError.UnknownError, f"{partition}: {commands.error_of(answer)}")
        for topic, subscription in self.subscriptions.pop(txn, []):
            def end_on_subscription(rid: int, t: str = topic, s: str = subscription) -> Command:
                return commands.end_txn_on_subscription(rid, txn, t, s, action)

            answer = await self.broker.peers.request_owner(TopicName.parse(topic), end_on_subscription)
            if commands.error_of(answer):
                raise TxnError(ServerError.UnknownError, f"{topic}/{subscription}: {commands.error_of(answer)}")

    async def watch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        raise TxnError(ServerError.NotAllowedError, "the toy path has no scalable coordinator")

    async def unwatch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        return None


class ToyBufferProvider:
    def create(self, topic: TopicServices) -> ToyBuffer:
        return ToyBuffer(topic)


class ToyPendingAckProvider:
    def create(self, subscription: SubscriptionServices) -> ToyPendingAck:
        return ToyPendingAck(subscription)


def install(registry: TxnRegistryApi, broker: BrokerContext) -> None:
    registry.register_buffer_provider(TopicDomain.PERSISTENT, ToyBufferProvider())
    registry.register_pending_ack_provider(TopicDomain.PERSISTENT, ToyPendingAckProvider())
    registry.register_coordinator(CoordinatorKind.LEGACY, ToyCoordinator(broker))


# ---- the test -----------------------------------------------------------------------------------


def topic_owned_by(broker_id: int) -> str:
    for _ in range(1000):
        name = f"persistent://public/default/toy-{uuid.uuid4().hex[:8]}"
        if choose_broker(name, {0, 1}) == broker_id:
            return name
    raise AssertionError("no topic name hashes to that broker")


def send(wire: WireClient, sequence_id: int, value: str, txn: TxnId | None = None) -> MessageId:
    meta = commands.message_metadata("toy-producer", sequence_id, 1, txn=txn)
    wire.send(commands.send(7, sequence_id, meta, value.encode()))
    receipt = wire.wait(lambda c: c.type in (CommandType.SEND_RECEIPT, CommandType.SEND_ERROR)
                        and c.body.sequence_id == sequence_id)
    assert receipt.type is CommandType.SEND_RECEIPT, commands.describe(receipt)
    message_id = commands.message_id_of(receipt)
    assert message_id is not None
    return message_id


def txn_ok(answer: Any) -> Any:
    assert commands.error_of(answer) is None, commands.describe(answer)
    return answer


def test_toy_transaction_path_through_the_extension_points(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings={"transactionCoordinatorEnabled": True,
                                                   "txnbenchTxnExtensions": [MODULE]})
    topic = topic_owned_by(1)
    entry = cluster.records["broker-0"].service_url or ""
    owner_url = lookup_until_connect(entry, topic, 20)
    assert owner_url == cluster.records["broker-1"].service_url

    coordinator = WireClient(entry)   # broker-0 coordinates; the topic lives on broker-1
    txn_ok(coordinator.request(lambda r: commands.tc_client_connect_request(r, 0),
                               CommandType.TC_CLIENT_CONNECT_RESPONSE))
    refused = coordinator.request(lambda r: commands.tc_client_connect_request(r, 9),
                                  CommandType.TC_CLIENT_CONNECT_RESPONSE)
    assert commands.error_of(refused)[0] is ServerError.TransactionCoordinatorNotFound  # type: ignore[index]

    producer = WireClient(owner_url)
    txn_ok(producer.request(lambda r: commands.producer(topic, 7, r), CommandType.PRODUCER_SUCCESS))
    client = pulsar.Client(cluster.info().service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        reader = client.subscribe(topic, "plain", initial_position=pulsar.InitialPosition.Earliest)

        def new_txn() -> TxnId:
            answer = txn_ok(coordinator.request(lambda r: commands.new_txn(r, 0, timeout_ms=60_000),
                                                CommandType.NEW_TXN_RESPONSE))
            txn = commands.txn_of(answer)
            assert txn is not None
            txn_ok(coordinator.request(lambda r: commands.add_partition_to_txn(r, txn, [topic]),
                                       CommandType.ADD_PARTITION_TO_TXN_RESPONSE))
            return txn

        def end(txn: TxnId, action: TxnAction) -> None:
            txn_ok(coordinator.request(lambda r: commands.end_txn(r, txn, action), CommandType.END_TXN_RESPONSE))

        send(producer, 1, "a")
        first = new_txn()
        send(producer, 2, "b", first)
        send(producer, 3, "c")
        assert reader.receive(timeout_millis=5000).data() == b"a"
        with pytest.raises(pulsar.Timeout):   # the open transaction holds the horizon
            reader.receive(timeout_millis=500)
        end(first, TxnAction.COMMIT)   # END_TXN_ON_PARTITION crosses to broker-1
        assert [reader.receive(timeout_millis=5000).data() for _ in range(2)] == [b"b", b"c"]

        second = new_txn()
        send(producer, 4, "d", second)
        end(second, TxnAction.ABORT)
        send(producer, 5, "e")
        assert reader.receive(timeout_millis=5000).data() == b"e"   # aborted "d" and the markers are skipped
        with pytest.raises(pulsar.Timeout):
            reader.receive(timeout_millis=300)
    finally:
        client.close()

    consumer = subscribe(owner_url, topic, 20, subscription="txn-acks", sub_type=SubType.Failover)
    delivered = [MessageId.from_proto(consumer.wait(lambda c: c.type is CommandType.MESSAGE).body.message_id)
                 for _ in range(4)]   # a, b, c, e
    target = delivered[0]
    third, fourth = new_txn(), new_txn()
    for txn in (third, fourth):
        def add_subscription(r: int, t: TxnId = txn) -> Command:
            return commands.add_subscription_to_txn(r, t, [(topic, "txn-acks")])

        txn_ok(coordinator.request(add_subscription, CommandType.ADD_SUBSCRIPTION_TO_TXN_RESPONSE))
    ack = consumer.request(lambda r: commands.ack(1, [target], txn=third, request_id=r), CommandType.ACK_RESPONSE)
    txn_ok(ack)
    conflict = consumer.request(lambda r: commands.ack(1, [target], txn=fourth, request_id=r),
                                CommandType.ACK_RESPONSE)
    assert commands.error_of(conflict)[0] is ServerError.TransactionConflict  # type: ignore[index]
    end(third, TxnAction.ABORT)   # END_TXN_ON_SUBSCRIPTION: the ack is released and the entry comes back
    again = MessageId.from_proto(consumer.wait(lambda c: c.type is CommandType.MESSAGE).body.message_id)
    assert (again.ledger_id, again.entry_id) == (target.ledger_id, target.entry_id)
    for _ in range(3):
        consumer.wait(lambda c: c.type is CommandType.MESSAGE)
    txn_ok(consumer.request(lambda r: commands.ack(1, [target], txn=fourth, request_id=r), CommandType.ACK_RESPONSE))
    end(fourth, TxnAction.COMMIT)
    consumer.send(commands.redeliver_unacknowledged(1))   # rewind: everything not acknowledged again
    redelivered = [MessageId.from_proto(consumer.wait(lambda c: c.type is CommandType.MESSAGE).body.message_id)
                   for _ in range(3)]
    assert (target.ledger_id, target.entry_id) not in {(m.ledger_id, m.entry_id) for m in redelivered}
    consumer.close()
    producer.close()
    coordinator.close()
