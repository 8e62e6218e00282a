"""An in-process fake Pulsar cluster for client tests: real sockets on 127.0.0.1, harness.wire.

Theory of operation
-------------------
`FakeCluster` holds the state Pulsar keeps (topics as lists of entries, partitioned
metadata, subscriptions with their delivered/acked sets, transactions, coordinator
ownership, scalable-topic DAGs); each `FakeBroker` is one listening socket with one
thread per client connection. Every received command is appended, in arrival order,
to `FakeCluster.log` (and to its broker's `received`) before it is handled, so tests
can assert the exact command sequence a client produced.

Behaviour follows Pulsar where the client can observe it:

* CONNECT -> CONNECTED with min(protocol version) and the broker's feature flags;
  PING -> PONG.
* LOOKUP answers Connect with the owner's URL (authoritative) unless a test scripts
  a redirect; PARTITIONED_METADATA answers the partition count (0 = not partitioned).
* SEND appends an entry (ledger per topic, entry ids from 0) and answers SEND_RECEIPT;
  a terminated topic answers SEND_ERROR TopicTerminatedError; PRODUCER on a
  terminated topic answers ERROR TopicTerminatedError.
* Transactional entries are invisible (and hold back everything after them, the
  v4 max-read-position) until END_TXN commits them; aborted entries are never
  dispatched.
* Subscriptions dispatch entries in order within the consumer's permits (Exclusive and
  Failover to one active consumer, Shared round robin), remember what was delivered
  to whom, and make it deliverable again when that consumer goes away, on
  REDELIVER_UNACKNOWLEDGED_MESSAGES, or when a transactional ack is aborted.
  Batch-index acks (`ack_set`) are honoured. A transactional ack of a message that is
  acked or pending in another transaction answers TransactionConflict.
* REACHED_END_OF_TOPIC goes to a subscription's consumers when the topic is
  terminated and everything in it is acknowledged, a reader's non-durable subscription too
  (Pulsar's `PersistentSubscription.acknowledgeMessage`; readers ack what they read for it).
* v4 coordinators: tc i is served by the owner of the assign topic's partition i;
  v5: by `tc_leaders[i]`, pushed to WATCH_TC_ASSIGNMENTS sessions on every change.
  A request to a broker that does not serve the tc answers TransactionCoordinatorNotFound.
* Scalable topics: SCALABLE_TOPIC_LOOKUP answers the DAG; `split()` seals a segment
  (terminates its topic), adds two children and pushes the new DAG.

Tests change behaviour with `FakeBroker.intercept(kind, hook)`: the hook sees each
command of that kind first and returns True when it handled it (replied, dropped the
connection, or deliberately stayed silent).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.wire import (
    AckType,
    Command,
    CommandType,
    Connection,
    ConnectionClosed,
    MessageId,
    Payload,
    RemoteProtocolError,
    Role,
    ServerError,
    SubType,
    TxnAction,
    TxnId,
    commands,
)
from tests.waiting import wait_until

T = CommandType
ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
V5_FEATURES = ("supports_scalable_topics", "supports_tc_metadata_discovery")

Hook = Callable[["BrokerConnection", Command], bool]
V = TypeVar("V")


@dataclass
class Entry:
    """One stored entry."""

    index: int
    payload: bytes
    num_messages: int
    batched: bool
    txn: TxnId | None
    state: str = "visible"  # visible | pending | aborted


@dataclass
class ConsumerRef:
    """A consumer attached to a subscription."""

    conn: BrokerConnection
    consumer_id: int
    permits: int = 0
    ended_notified: bool = False


@dataclass
class Subscription:
    """A subscription's cursor state."""

    name: str
    sub_type: SubType
    durable: bool = True
    start_index: int = 0
    consumers: list[ConsumerRef] = field(default_factory=list)
    delivered: dict[int, ConsumerRef] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    acked_indexes: dict[int, set[int]] = field(default_factory=dict)
    pending_acks: dict[int, TxnId] = field(default_factory=dict)
    redeliveries: dict[int, int] = field(default_factory=dict)
    rr: int = 0


@dataclass
class Topic:
    """A topic (or partition, or segment)."""

    name: str
    ledger_id: int
    entries: list[Entry] = field(default_factory=list)
    terminated: bool = False
    subscriptions: dict[str, Subscription] = field(default_factory=dict)


@dataclass
class Txn:
    """A transaction at its coordinator."""

    id: TxnId
    state: str = "open"  # open | committed | aborted
    writes: list[tuple[str, int]] = field(default_factory=list)
    acks: list[tuple[str, str, int]] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Segment:
    """A segment of a scalable topic."""

    segment_id: int
    start: int
    end: int
    sealed: bool = False
    parents: list[int] = field(default_factory=list)
    children: list[int] = field(default_factory=list)


class BrokerConnection:
    """One client connection at a fake broker."""

    def __init__(self, broker: FakeBroker, sock: socket.socket, conn_id: int) -> None:
        self.broker = broker
        self.sock = sock
        self.conn_id = conn_id
        self.wire = Connection(Role.SERVER)
        self._write_lock = threading.Lock()
        self.closed = False
        self.producers: dict[int, str] = {}
        self.consumers: dict[int, tuple[str, str]] = {}

    def reply(self, command: Command) -> None:
        """Send a command to the client (ignored once closed)."""
        if self.closed:
            return
        try:
            with self._write_lock:
                self.sock.sendall(self.wire.send(command))
        except OSError:
            self.drop()

    def drop(self) -> None:
        """Close the connection abruptly (the client sees end of stream)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def serve(self) -> None:
        try:
            while not self.closed:
                try:
                    data = self.sock.recv(65536)
                except OSError:
                    break
                self.wire.receive_data(data)
                for event in self.wire.events():
                    if isinstance(event, ConnectionClosed):
                        return
                    self.broker.handle(self, event)
                if not data:
                    break
        except RemoteProtocolError:
            pass
        finally:
            self.drop()
            self.broker.cluster.connection_gone(self)


class FakeBroker:
    """One broker of a `FakeCluster`, listening on 127.0.0.1."""

    def __init__(self, cluster: FakeCluster, name: str, features: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.name = name
        self.features = features
        self.protocol_version: int | None = None
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.url = f"pulsar://127.0.0.1:{self.port}"
        self.connections: list[BrokerConnection] = []
        self.received: list[Command] = []
        self._hooks: dict[CommandType, list[Hook]] = {}
        self._ids = itertools.count(1)
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, name=f"fake-{name}", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            if self._stopped:
                sock.close()
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = BrokerConnection(self, sock, next(self._ids))
            with self.cluster.lock:
                self.connections.append(conn)
            threading.Thread(target=conn.serve, name=f"fake-{self.name}-conn", daemon=True).start()

    # ---- scripting ------------------------------------------------------------------

    def intercept(self, kind: CommandType, hook: Hook) -> None:
        """Let `hook` see every `kind` command first; True from it means 'handled'."""
        with self.cluster.lock:
            self._hooks.setdefault(kind, []).append(hook)

    def drop_connections(self) -> None:
        """Close every client connection abruptly."""
        with self.cluster.lock:
            conns = list(self.connections)
        for conn in conns:
            conn.drop()

    def stop(self) -> None:
        """Stop listening and drop every connection."""
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.drop_connections()

    def of_type(self, *kinds: CommandType) -> list[Command]:
        """Received commands of the given kinds, in order."""
        with self.cluster.lock:
            return [c for c in self.received if c.type in kinds]

    # ---- dispatch -------------------------------------------------------------------

    def handle(self, conn: BrokerConnection, event: Command) -> None:
        with self.cluster.lock:
            self.received.append(event)
            self.cluster.log.append((self.name, conn.conn_id, event))
            hooks = list(self._hooks.get(event.type, ()))
        for hook in hooks:
            if hook(conn, event):
                return
        with self.cluster.lock:
            handler = getattr(self.cluster, f"on_{event.type.name.lower()}", None)
            if handler is None:
                return
            handler(self, conn, event)


class FakeCluster:
    """The shared state of the fake brokers."""

    def __init__(self, brokers: int = 1, *, v5: bool = False, tc_count: int = 0) -> None:
        self.lock = threading.RLock()
        self.log: list[tuple[str, int, Command]] = []
        features = V5_FEATURES if v5 else ()
        self.brokers = [FakeBroker(self, f"b{i}", features) for i in range(brokers)]
        self.topics: dict[str, Topic] = {}
        self.partitioned: dict[str, int] = {}
        self.owners: dict[str, FakeBroker] = {}
        self.redirects: dict[tuple[str, str], tuple[FakeBroker, bool]] = {}
        self.txns: dict[TxnId, Txn] = {}
        self._tc_seq: dict[int, itertools.count] = {}
        self.tc_leaders: dict[int, FakeBroker] = {}
        self.tc_parallelism = tc_count
        self.tc_watchers: list[tuple[BrokerConnection, int]] = []
        self.scalable: dict[str, dict[int, Segment]] = {}
        self.scalable_epoch: dict[str, int] = {}
        self.dag_sessions: list[tuple[BrokerConnection, int, str]] = []
        self._ledgers = itertools.count(100)
        self._producer_names = itertools.count(1)
        if tc_count:
            self.partitioned[ASSIGN_TOPIC] = tc_count
            for tc_id in range(tc_count):
                self.tc_leaders[tc_id] = self.brokers[tc_id % brokers]

    @property
    def url(self) -> str:
        """The service URL (the first broker)."""
        return self.brokers[0].url

    def stop(self) -> None:
        """Stop every broker."""
        for broker in self.brokers:
            broker.stop()

    # ---- helpers for tests ----------------------------------------------------------

    def owner(self, topic: str) -> FakeBroker:
        """The broker owning `topic` (explicit, else the assign partitions' tc leaders, else b0)."""
        if topic in self.owners:
            return self.owners[topic]
        prefix = f"{ASSIGN_TOPIC}-partition-"
        if topic.startswith(prefix):
            tc_id = int(topic[len(prefix):])
            if tc_id in self.tc_leaders:
                return self.tc_leaders[tc_id]
        return self.brokers[0]

    def topic(self, name: str) -> Topic:
        """The topic state (created on first use, as Pulsar's auto-creation does)."""
        with self.lock:
            found = self.topics.get(name)
            if found is None:
                found = Topic(name, next(self._ledgers))
                self.topics[name] = found
            return found

    def commands(self, *kinds: CommandType) -> list[Command]:
        """Every received command of the given kinds (all kinds if none), cluster-wide, in order."""
        with self.lock:
            return [c for _, _, c in self.log if not kinds or c.type in kinds]

    def kinds(self, *kinds: CommandType) -> list[CommandType]:
        """The types of `commands(*kinds)`."""
        return [c.type for c in self.commands(*kinds)]

    def values(self, name: str) -> list[bytes]:
        """The data of every visible message of a topic, in log order (batches unpacked)."""
        from harness.wire import unpack_messages

        with self.lock:
            topic = self.topic(name)
            out: list[bytes] = []
            for entry in topic.entries:
                if entry.state == "visible":
                    out.extend(m.data for m in unpack_messages(Payload.parse(entry.payload)))
            return out

    def terminate(self, name: str) -> None:
        """Terminate a topic (as the admin API does)."""
        with self.lock:
            self.topic(name).terminated = True
            self._dispatch_all(self.topic(name))

    def set_tc_leader(self, tc_id: int, broker: FakeBroker) -> None:
        """Move coordinator `tc_id` (v4: its assign partition; v5: its leader) and push snapshots."""
        with self.lock:
            self.tc_leaders[tc_id] = broker
            for conn, watch_id in list(self.tc_watchers):
                conn.reply(self._tc_snapshot(watch_id))

    def create_scalable(self, name: str, segments: int = 1) -> None:
        """A scalable topic with `segments` equal segments."""
        with self.lock:
            width = 0x10000 // segments
            self.scalable[name] = {
                i: Segment(i, i * width, (i + 1) * width - 1 if i < segments - 1 else 0xFFFF)
                for i in range(segments)
            }
            self.scalable_epoch[name] = 1

    def segment_topic(self, name: str, segment_id: int) -> str:
        """The segment:// name of a segment."""
        seg = self.scalable[name][segment_id]
        return f"segment://{name[len('topic://'):]}/{seg.start:04x}-{seg.end:04x}-{segment_id}"

    def split(self, name: str, segment_id: int, *, push: bool = True) -> tuple[int, int]:
        """Seal a segment and add two children splitting its range; pushes the new DAG.

        With `push=False` the watchers learn of it only from `push_dag` (a slow controller).
        """
        with self.lock:
            segments = self.scalable[name]
            parent = segments[segment_id]
            parent.sealed = True
            middle = (parent.start + parent.end) // 2
            first = max(segments) + 1
            segments[first] = Segment(first, parent.start, middle, parents=[segment_id])
            segments[first + 1] = Segment(first + 1, middle + 1, parent.end, parents=[segment_id])
            parent.children = [first, first + 1]
            self.scalable_epoch[name] += 1
            self.terminate(self.segment_topic(name, segment_id))
            if push:
                self.push_dag(name)
            return first, first + 1

    def push_dag(self, name: str) -> None:
        """Send the current DAG of `name` to every watch session."""
        with self.lock:
            for conn, session_id, topic in list(self.dag_sessions):
                if topic == name:
                    conn.reply(self._dag_update(session_id, name))

    # ---- connection -----------------------------------------------------------------

    def connection_gone(self, conn: BrokerConnection) -> None:
        with self.lock:
            self.tc_watchers = [(c, w) for c, w in self.tc_watchers if c is not conn]
            self.dag_sessions = [s for s in self.dag_sessions if s[0] is not conn]
            for consumer_id, (topic_name, sub_name) in list(conn.consumers.items()):
                self._remove_consumer(conn, consumer_id, topic_name, sub_name)

    def on_connect(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        version = broker.protocol_version
        conn.reply(commands.connected("fake-pulsar", protocol_version=(
            min(version, event.body.protocol_version) if version is not None else None),
            feature_flags=broker.features or None))

    def on_ping(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        conn.reply(commands.pong())

    # ---- discovery ------------------------------------------------------------------

    def on_partitioned_metadata(self, broker: FakeBroker, conn: BrokerConnection,
                                event: Command) -> None:
        body = event.body
        conn.reply(commands.partitioned_metadata_response(body.request_id,
                                                          self.partitioned.get(body.topic, 0)))

    def on_lookup(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        body = event.body
        redirect = self.redirects.get((broker.name, body.topic))
        if redirect is not None:
            target, authoritative = redirect
            conn.reply(commands.lookup_response(body.request_id, target.url, redirect=True,
                                                authoritative=authoritative))
            return
        owner = self.owner(body.topic)
        conn.reply(commands.lookup_response(body.request_id, owner.url, authoritative=True))

    # ---- producing ------------------------------------------------------------------

    def on_producer(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        body = event.body
        topic = self.topic(body.topic)
        if topic.terminated:
            conn.reply(commands.error(body.request_id, ServerError.TopicTerminatedError,
                                      f"Topic {body.topic} is terminated"))
            return
        conn.producers[body.producer_id] = body.topic
        name = body.producer_name if body.HasField("producer_name") else \
            f"fake-{next(self._producer_names)}"
        conn.reply(commands.producer_success(body.request_id, name, last_sequence_id=-1))

    def on_send(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        body = event.body
        topic_name = conn.producers.get(body.producer_id)
        if topic_name is None:
            return
        topic = self.topic(topic_name)
        if topic.terminated:
            conn.reply(commands.send_error(body.producer_id, body.sequence_id,
                                           ServerError.TopicTerminatedError, "Topic is terminated"))
            return
        assert event.payload is not None
        metadata = event.payload.metadata
        txn = commands.txn_of(body)
        if txn is not None:
            record = self.txns.get(txn)
            if record is None or record.state != "open":
                conn.reply(commands.send_error(body.producer_id, body.sequence_id,
                                               ServerError.TransactionNotFound,
                                               f"txn {txn} is not open"))
                return
        entry = Entry(len(topic.entries), bytes(event.payload.entry),
                      metadata.num_messages_in_batch, metadata.HasField("num_messages_in_batch"),
                      txn, "pending" if txn is not None else "visible")
        topic.entries.append(entry)
        if txn is not None:
            self.txns[txn].writes.append((topic_name, entry.index))
        conn.reply(commands.send_receipt(body.producer_id, body.sequence_id,
                                         MessageId(topic.ledger_id, entry.index),
                                         highest_sequence_id=body.highest_sequence_id or None))
        self._dispatch_all(topic)

    def on_close_producer(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        conn.producers.pop(event.body.producer_id, None)
        conn.reply(commands.success(event.body.request_id))

    # ---- consuming ------------------------------------------------------------------

    def on_subscribe(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        body = event.body
        topic = self.topic(body.topic)
        sub = topic.subscriptions.get(body.subscription)
        sub_type = SubType(body.subType)
        if sub is None:
            start = 0
            if body.HasField("start_message_id") and body.start_message_id.entryId < (1 << 63):
                start = body.start_message_id.entryId + 1
            sub = Subscription(body.subscription, sub_type, durable=body.durable, start_index=start)
            topic.subscriptions[body.subscription] = sub
        if sub_type is SubType.Exclusive and sub.consumers:
            conn.reply(commands.error(body.request_id, ServerError.ConsumerBusy,
                                      "Exclusive consumer is already connected"))
            return
        ref = ConsumerRef(conn, body.consumer_id)
        sub.consumers.append(ref)
        conn.consumers[body.consumer_id] = (body.topic, body.subscription)
        conn.reply(commands.success(body.request_id))
        if sub_type is SubType.Failover:
            for index, consumer in enumerate(sub.consumers):
                consumer.conn.reply(commands.active_consumer_change(consumer.consumer_id,
                                                                    index == 0))

    def _sub_of(self, conn: BrokerConnection, consumer_id: int) -> tuple[Topic, Subscription,
                                                                           ConsumerRef] | None:
        found = conn.consumers.get(consumer_id)
        if found is None:
            return None
        topic = self.topic(found[0])
        sub = topic.subscriptions[found[1]]
        for ref in sub.consumers:
            if ref.conn is conn and ref.consumer_id == consumer_id:
                return topic, sub, ref
        return None

    def on_flow(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        found = self._sub_of(conn, event.body.consumer_id)
        if found is None:
            return
        topic, sub, ref = found
        ref.permits += event.body.messagePermits
        self._dispatch(topic, sub)

    def _dispatchable_limit(self, topic: Topic) -> int:
        for entry in topic.entries:
            if entry.state == "pending":
                return entry.index
        return len(topic.entries)

    def _dispatch_all(self, topic: Topic) -> None:
        for sub in topic.subscriptions.values():
            self._dispatch(topic, sub)

    def _dispatch(self, topic: Topic, sub: Subscription) -> None:
        limit = self._dispatchable_limit(topic)
        for entry in topic.entries[sub.start_index:limit]:
            index = entry.index
            if entry.state == "aborted" or index in sub.acked or index in sub.delivered \
                    or index in sub.pending_acks:
                continue
            target = self._choose(sub)
            if target is None:
                break
            target.permits -= entry.num_messages
            sub.delivered[index] = target
            payload = Payload.parse(entry.payload)
            ack_set = None
            done = sub.acked_indexes.get(index)
            if entry.batched and done:
                words = [0] * ((entry.num_messages + 63) // 64)
                for i in range(entry.num_messages):
                    if i not in done:
                        words[i // 64] |= 1 << (i % 64)
                ack_set = [w - (1 << 64) if w >= (1 << 63) else w for w in words]
            target.conn.reply(commands.message(
                target.consumer_id, MessageId(topic.ledger_id, index), payload,
                redelivery_count=sub.redeliveries.get(index, 0), ack_set=ack_set))
        self._maybe_end(topic, sub)

    def _choose(self, sub: Subscription) -> ConsumerRef | None:
        if not sub.consumers:
            return None
        if sub.sub_type in (SubType.Shared, SubType.Key_Shared):
            for offset in range(len(sub.consumers)):
                ref = sub.consumers[(sub.rr + offset) % len(sub.consumers)]
                if ref.permits > 0:
                    sub.rr = (sub.rr + offset + 1) % len(sub.consumers)
                    return ref
            return None
        ref = sub.consumers[0]
        return ref if ref.permits > 0 else None

    def _maybe_end(self, topic: Topic, sub: Subscription) -> None:
        if not topic.terminated:
            return
        for entry in topic.entries[sub.start_index:]:
            # as Pulsar: only an empty backlog hears the end, durable or not (a reader acks for it)
            if entry.state != "aborted" and entry.index not in sub.acked:
                return
        for ref in sub.consumers:
            if not ref.ended_notified:
                ref.ended_notified = True
                ref.conn.reply(commands.reached_end_of_topic(ref.consumer_id))

    def on_ack(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        body = event.body
        found = self._sub_of(conn, body.consumer_id)
        request_id = body.request_id if body.HasField("request_id") else None
        if found is None:
            if request_id is not None:
                conn.reply(commands.ack_response(body.consumer_id, request_id,
                                                 error=ServerError.ConsumerNotFound,
                                                 message="consumer not found"))
            return
        topic, sub, _ = found
        txn = commands.txn_of(body)
        if body.HasField("validation_error"):
            for data in body.message_id:
                sub.acked.add(data.entryId)
                sub.delivered.pop(data.entryId, None)
            return
        if txn is not None:
            record = self.txns.get(txn)
            if record is None or record.state != "open":
                # a receipt-less ack is answered too, without a request_id
                conn.reply(commands.ack_response(body.consumer_id, request_id, txn=txn,
                                                 error=ServerError.TransactionNotFound,
                                                 message=f"txn {txn} not open"))
                return
            for data in body.message_id:
                index = data.entryId
                holder = sub.pending_acks.get(index)
                if index in sub.acked or (holder is not None and holder != txn):
                    conn.reply(commands.ack_response(
                        body.consumer_id, request_id, txn=txn,
                        error=ServerError.TransactionConflict,
                        message=f"{topic.ledger_id}:{index} is acked or held by {holder}"))
                    return
            for data in body.message_id:
                sub.pending_acks[data.entryId] = txn
                sub.delivered.pop(data.entryId, None)
                record.acks.append((topic.name, sub.name, data.entryId))
        else:
            for data in body.message_id:
                if body.ack_type == AckType.Cumulative:
                    for entry in topic.entries[: data.entryId + 1]:
                        sub.acked.add(entry.index)
                        sub.delivered.pop(entry.index, None)
                elif len(data.ack_set):
                    done = sub.acked_indexes.setdefault(data.entryId, set())
                    size = topic.entries[data.entryId].num_messages
                    words = [w % (1 << 64) for w in data.ack_set]
                    for i in range(size):
                        if not (words[i // 64] >> (i % 64)) & 1:
                            done.add(i)
                    if len(done) >= size:
                        sub.acked.add(data.entryId)
                        sub.delivered.pop(data.entryId, None)
                else:
                    sub.acked.add(data.entryId)
                    sub.delivered.pop(data.entryId, None)
        if request_id is not None:
            conn.reply(commands.ack_response(body.consumer_id, request_id, txn=txn))
        self._dispatch(topic, sub)

    def on_redeliver_unacknowledged_messages(self, broker: FakeBroker, conn: BrokerConnection,
                                             event: Command) -> None:
        found = self._sub_of(conn, event.body.consumer_id)
        if found is None:
            return
        topic, sub, ref = found
        wanted = {d.entryId for d in event.body.message_ids} or None
        for index, holder in list(sub.delivered.items()):
            if holder is ref and (wanted is None or index in wanted):
                del sub.delivered[index]
                sub.redeliveries[index] = sub.redeliveries.get(index, 0) + 1
                ref.permits += topic.entries[index].num_messages
        self._dispatch(topic, sub)

    def _remove_consumer(self, conn: BrokerConnection, consumer_id: int, topic_name: str,
                         sub_name: str) -> None:
        topic = self.topic(topic_name)
        sub = topic.subscriptions.get(sub_name)
        conn.consumers.pop(consumer_id, None)
        if sub is None:
            return
        sub.consumers = [r for r in sub.consumers
                         if not (r.conn is conn and r.consumer_id == consumer_id)]
        for index, holder in list(sub.delivered.items()):
            if holder.conn is conn and holder.consumer_id == consumer_id:
                del sub.delivered[index]
                sub.redeliveries[index] = sub.redeliveries.get(index, 0) + 1
        if sub.sub_type is SubType.Failover and sub.consumers:
            for index, consumer in enumerate(sub.consumers):
                consumer.conn.reply(commands.active_consumer_change(consumer.consumer_id,
                                                                    index == 0))
        if not sub.durable and not sub.consumers:
            topic.subscriptions.pop(sub_name, None)
        else:
            self._dispatch(topic, sub)

    def on_close_consumer(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        found = conn.consumers.get(event.body.consumer_id)
        if found is not None:
            self._remove_consumer(conn, event.body.consumer_id, *found)
        conn.reply(commands.success(event.body.request_id))

    def on_unsubscribe(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        found = conn.consumers.get(event.body.consumer_id)
        if found is not None:
            self._remove_consumer(conn, event.body.consumer_id, *found)
            self.topic(found[0]).subscriptions.pop(found[1], None)
        conn.reply(commands.success(event.body.request_id))

    def on_get_last_message_id(self, broker: FakeBroker, conn: BrokerConnection,
                               event: Command) -> None:
        found = self._sub_of(conn, event.body.consumer_id)
        topic = found[0] if found else self.topic("unknown")
        last = MessageId(topic.ledger_id, -1)
        for entry in topic.entries[: self._dispatchable_limit(topic)]:
            if entry.state == "visible":
                last = MessageId(topic.ledger_id, entry.index,
                                 entry.num_messages - 1 if entry.batched else -1)
        conn.reply(commands.get_last_message_id_response(event.body.request_id, last))

    # ---- transactions ---------------------------------------------------------------

    def serves_tc(self, broker: FakeBroker, tc_id: int) -> bool:
        """Whether `broker` serves coordinator `tc_id`."""
        return self.tc_leaders.get(tc_id) is broker

    def on_tc_client_connect_request(self, broker: FakeBroker, conn: BrokerConnection,
                                     event: Command) -> None:
        body = event.body
        if self.serves_tc(broker, body.tc_id):
            conn.reply(commands.tc_client_connect_response(body.request_id))
        else:
            conn.reply(commands.tc_client_connect_response(
                body.request_id, error=ServerError.TransactionCoordinatorNotFound,
                message=f"coordinator {body.tc_id} is not served here"))

    def on_new_txn(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        body = event.body
        if not self.serves_tc(broker, body.tc_id):
            conn.reply(commands.new_txn_response(
                body.request_id, error=ServerError.TransactionCoordinatorNotFound,
                message=f"coordinator {body.tc_id} is not served here"))
            return
        counter = self._tc_seq.setdefault(body.tc_id, itertools.count())
        txn = TxnId(body.tc_id, next(counter))
        self.txns[txn] = Txn(txn)
        conn.reply(commands.new_txn_response(body.request_id, txn))

    def _txn_request(self, broker: FakeBroker, conn: BrokerConnection, event: Command,
                     respond: Callable[..., Command]) -> Txn | None:
        body = event.body
        txn = commands.txn_of(body)
        assert txn is not None
        if not self.serves_tc(broker, txn.most):
            conn.reply(respond(body.request_id, txn, error=ServerError.TransactionCoordinatorNotFound,
                               message=f"coordinator {txn.most} is not served here"))
            return None
        record = self.txns.get(txn)
        if record is None or record.state != "open":
            conn.reply(respond(body.request_id, txn, error=ServerError.TransactionNotFound,
                               message=f"txn {txn} not found"))
            return None
        return record

    def on_add_partition_to_txn(self, broker: FakeBroker, conn: BrokerConnection,
                                event: Command) -> None:
        record = self._txn_request(broker, conn, event, commands.add_partition_to_txn_response)
        if record is not None:
            record.partitions.extend(event.body.partitions)
            conn.reply(commands.add_partition_to_txn_response(event.body.request_id, record.id))

    def on_add_subscription_to_txn(self, broker: FakeBroker, conn: BrokerConnection,
                                   event: Command) -> None:
        record = self._txn_request(broker, conn, event, commands.add_subscription_to_txn_response)
        if record is not None:
            record.subscriptions.extend((s.topic, s.subscription)
                                        for s in event.body.subscription)
            conn.reply(commands.add_subscription_to_txn_response(event.body.request_id,
                                                                 record.id))

    def on_end_txn(self, broker: FakeBroker, conn: BrokerConnection, event: Command) -> None:
        record = self._txn_request(broker, conn, event, commands.end_txn_response)
        if record is None:
            return
        self.end_txn(record, TxnAction(event.body.txn_action))
        conn.reply(commands.end_txn_response(event.body.request_id, record.id))

    def end_txn(self, record: Txn, action: TxnAction) -> None:
        """Apply a decision (tests call it to simulate a coordinator that already decided)."""
        commit = action is TxnAction.COMMIT
        record.state = "committed" if commit else "aborted"
        touched: set[str] = set()
        for topic_name, index in record.writes:
            self.topic(topic_name).entries[index].state = "visible" if commit else "aborted"
            touched.add(topic_name)
        for topic_name, sub_name, index in record.acks:
            sub = self.topic(topic_name).subscriptions.get(sub_name)
            if sub is None:
                continue
            sub.pending_acks.pop(index, None)
            if commit:
                sub.acked.add(index)
            else:
                sub.redeliveries[index] = sub.redeliveries.get(index, 0) + 1
            touched.add(topic_name)
        for topic_name in touched:
            self._dispatch_all(self.topic(topic_name))

    def _tc_snapshot(self, watch_id: int) -> Command:
        return commands.watch_tc_assignments_update(
            watch_id, parallelism=self.tc_parallelism,
            leaders={tc: broker.url for tc, broker in self.tc_leaders.items()})

    def on_watch_tc_assignments(self, broker: FakeBroker, conn: BrokerConnection,
                                event: Command) -> None:
        if "supports_tc_metadata_discovery" not in broker.features:
            conn.reply(commands.watch_tc_assignments_update(
                event.body.watch_id, error=ServerError.NotAllowedError,
                message="metadata TC discovery is disabled"))
            return
        self.tc_watchers.append((conn, event.body.watch_id))
        conn.reply(self._tc_snapshot(event.body.watch_id))

    def on_watch_tc_assignments_close(self, broker: FakeBroker, conn: BrokerConnection,
                                      event: Command) -> None:
        self.tc_watchers = [(c, w) for c, w in self.tc_watchers
                            if not (c is conn and w == event.body.watch_id)]

    # ---- scalable topics ------------------------------------------------------------

    def _dag_update(self, session_id: int, name: str) -> Command:
        segments = [
            commands.segment_info(s.segment_id, s.start, s.end, sealed=s.sealed,
                                  parent_ids=s.parents, child_ids=s.children)
            for s in self.scalable[name].values()
        ]
        dag = commands.segment_dag(self.scalable_epoch[name], segments)
        return commands.scalable_topic_update(session_id, dag=dag, resolved_topic_name=name)

    def on_scalable_topic_lookup(self, broker: FakeBroker, conn: BrokerConnection,
                                 event: Command) -> None:
        body = event.body
        if body.topic not in self.scalable:
            conn.reply(commands.scalable_topic_update(body.session_id,
                                                      error=ServerError.TopicNotFound,
                                                      message=f"{body.topic} does not exist"))
            return
        self.dag_sessions.append((conn, body.session_id, body.topic))
        conn.reply(self._dag_update(body.session_id, body.topic))

    def on_scalable_topic_close(self, broker: FakeBroker, conn: BrokerConnection,
                                event: Command) -> None:
        self.dag_sessions = [s for s in self.dag_sessions
                             if not (s[0] is conn and s[1] == event.body.session_id)]


def wait_for(condition: Callable[[], Any], timeout_s: float = 5.0, what: str = "condition") -> Any:
    """Poll `condition` until truthy (bounded); returns its value."""
    return wait_until(condition, timeout_s, 0.005, what)


def arrived(message: V | None) -> V:
    """A received or read message; fails the test when the wait ended with nothing (None)."""
    assert message is not None, "nothing arrived before the timeout"
    return message


def silent(conn: BrokerConnection, event: Command) -> bool:
    """A hook that never answers (the request times out)."""
    return True


def drop(conn: BrokerConnection, event: Command) -> bool:
    """A hook that drops the connection instead of answering (after the request arrived)."""
    conn.drop()
    return True


def once(hook: Hook) -> Hook:
    """Apply `hook` to the first matching command only."""
    used = [False]

    def wrapper(conn: BrokerConnection, event: Command) -> bool:
        if used[0]:
            return False
        used[0] = True
        return hook(conn, event)

    return wrapper


def coordinators_ready(client: Any, count: int, timeout_s: float = 5.0) -> None:
    """Start the client's coordinator discovery and wait until `count` handlers are connected."""
    from harness.client.handler import HandlerState
    from harness.client.timers import Deadline

    discovery = client._coordinator.discovery(Deadline.after(timeout_s))
    wait_for(lambda: all(discovery.handler(t) is not None
                         and discovery.handler(t).state is HandlerState.READY
                         for t in range(count)), timeout_s, what=f"{count} coordinators connected")
