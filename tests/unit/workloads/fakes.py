"""An in-memory stand-in for `harness.client.PulsarClient`, faithful enough for the workloads.

It models what the history depends on: transactional sends become visible only when
their transaction commits (aborted ones never), each message is delivered to one
consumer of a Shared subscription at a time, a transactional ack holds the message
until the transaction ends (commit: acked; abort: delivered again, as Pulsar's
pending-ack store does), acking a message that is already acked or held by
another transaction is a TransactionConflict (definite), and a transaction with a
failed op refuses to commit (TransactionOpFailedError, definite, aborted instead), as
`harness.client` does. Receives never block: no message means None at once.

`FakeClient.fail_next(op, error)` scripts the next call of `op` (`new-txn`, `send`,
`ack`, `commit`, `abort`, `foreign-abort`, `subscribe`, `create-producer`,
`create-reader`, `read`) to raise `error` before it takes effect. `send-after` and `ack-after` raise after the
send or ack took effect, and a scripted `commit` error is raised after the commit took
effect: the worst case for a checker, it happened although the client does not know.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.client.errors import (
    AlreadyClosedError,
    InvalidStateError,
    Op,
    OperationTimeoutError,
    TransactionConflictError,
    TransactionNotFoundError,
    TransactionOpFailedError,
)
from harness.client.futures import Future
from harness.errors import OperationError
from harness.wire import ServerError, TxnId


@dataclass(frozen=True)
class FakeReceipt:
    msg_id: str
    topic: str
    segment: str | None = None


@dataclass
class Entry:
    topic: str
    msg_id: str
    data: bytes
    key: str | None
    txn: TxnId | None
    state: str                       # pending | committed | aborted
    publish_time_ms: int = 1


@dataclass(frozen=True, eq=False)
class FakeMessage:
    entry: Entry
    redelivery_count: int
    consumer: FakeConsumer
    arrived_ns: int = 0   # unknown: the fakes run on a manual clock

    @property
    def data(self) -> bytes:
        return self.entry.data

    @property
    def key(self) -> str | None:
        return self.entry.key

    @property
    def topic(self) -> str:
        return self.entry.topic

    @property
    def segment(self) -> str | None:
        return None

    @property
    def msg_id(self) -> str:
        return self.entry.msg_id

    @property
    def publish_time_ms(self) -> int:
        return self.entry.publish_time_ms


@dataclass
class SubscriptionState:
    topic: str
    name: str
    sub_type: str
    position: int = 0                                   # next log index never delivered
    acked: set[str] = field(default_factory=set)
    pending: dict[str, TxnId] = field(default_factory=dict)   # msg_id -> txn holding its ack
    redeliver: deque[Entry] = field(default_factory=deque)
    deliveries: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    consumers: list[FakeConsumer] = field(default_factory=list)
    turn: int = 0


class FakeTxn:
    def __init__(self, client: FakeClient, txn_id: TxnId) -> None:
        self.client = client
        self.id = txn_id
        self.state = "open"
        self.entries: list[Entry] = []
        self.acks: list[tuple[SubscriptionState, Entry, FakeConsumer]] = []
        self.failed = False
        self.end_txn_resends = 0     # as harness.client.Transaction's; a test sets it

    def commit(self, timeout_s: float | None = None) -> None:
        if self.client.on_commit is not None:
            self.client.on_commit(self)
        if self.state != "open":
            raise InvalidStateError(f"transaction {self.id} is {self.state}")
        if self.failed:
            self._finish("aborted")
            raise TransactionOpFailedError(f"transaction {self.id} not committed: an op failed")
        scripted = self.client.take_failure("commit")
        self._finish("committed")
        if scripted is not None:
            raise scripted

    def abort(self, timeout_s: float | None = None) -> None:
        self.client.maybe_fail("abort")
        if self.state != "open":
            raise InvalidStateError(f"transaction {self.id} is {self.state}")
        self._finish("aborted")

    def _finish(self, outcome: str) -> None:
        self.state = outcome
        for entry in self.entries:
            entry.state = outcome
        for sub, entry, consumer in self.acks:
            if sub.pending.get(entry.msg_id) == self.id:
                del sub.pending[entry.msg_id]
                if outcome == "committed":
                    sub.acked.add(entry.msg_id)
                else:  # as Pulsar's pending-ack store does on abort: deliver it again
                    consumer.unacked.pop(entry.msg_id, None)
                    sub.redeliver.append(entry)
        self.client.ended.append((str(self.id), outcome))


class FakeProducer:
    def __init__(self, client: FakeClient, topic: str) -> None:
        self.client = client
        self.topic = topic
        self.closed = False
        self.given_up: list[Future[FakeReceipt]] = []

    def send(self, data: bytes | str, *, key: str | None = None, properties: Any = None, txn: Any = None,
             event_time_ms: int | None = None, timeout_s: float | None = None) -> FakeReceipt:
        if self.closed:
            raise AlreadyClosedError("producer closed")
        payload = data.encode() if isinstance(data, str) else bytes(data)
        if self.client.on_send is not None:
            self.client.on_send()
        try:
            self.client.maybe_fail("send")
        except OperationError:
            if txn is not None:
                txn.failed = True
            raise
        with self.client.lock:   # sends of one user may run at once (workload.send_concurrency)
            log = self.client.logs[self.topic]
            entry = Entry(self.topic, f"1:{len(log)}:-1", payload, key, txn.id if txn is not None else None,
                          "pending" if txn is not None else "committed")
            log.append(entry)
            if txn is not None:
                txn.entries.append(entry)
        scripted = self.client.take_failure("send-after")
        if scripted is not None:  # it happened, but the client does not know
            if txn is not None:
                txn.failed = True
            raise scripted
        return FakeReceipt(entry.msg_id, self.topic)

    def send_async(self, data: bytes | str, *, key: str | None = None, properties: Any = None, txn: Any = None,
                   event_time_ms: int | None = None, timeout_s: float | None = None) -> Future[FakeReceipt]:
        """`send` in a thread of its own, so sends started together are in flight together (the
        `on_send` hook can hold them); the future completes as the real client's does."""
        future: Future[FakeReceipt] = Future()

        def run() -> None:
            try:
                future.set_result(self.send(data, key=key, properties=properties, txn=txn,
                                             event_time_ms=event_time_ms, timeout_s=timeout_s))
            except BaseException as exc:  # handed over in the future, as the client does
                future.set_exception(exc)

        threading.Thread(target=run, name="fake-send", daemon=True).start()
        return future

    def give_up(self, future: Future[FakeReceipt]) -> None:
        self.given_up.append(future)
        future.set_exception(OperationTimeoutError("fake: no receipt before the deadline"))

    def close(self, timeout_s: float | None = None) -> None:
        self.closed = True


class FakeConsumer:
    def __init__(self, client: FakeClient, sub: SubscriptionState, name: str | None) -> None:
        self.client = client
        self.sub = sub
        self.name = name
        self.unacked: dict[str, Entry] = {}
        self.closed = False
        self.redeliveries = 0

    def receive(self, timeout_s: float | None = None) -> FakeMessage | None:
        if self.closed:
            raise AlreadyClosedError("consumer closed")
        entry = self.client.next_for(self.sub, self)
        if entry is None:
            return None
        count = self.sub.deliveries[entry.msg_id]
        self.sub.deliveries[entry.msg_id] += 1
        self.unacked[entry.msg_id] = entry
        return FakeMessage(entry, count, self)

    def acknowledge(self, message: FakeMessage, *, txn: Any = None, timeout_s: float | None = None) -> None:
        self._ack(message, txn)

    def acknowledge_cumulative(self, message: FakeMessage, *, txn: Any = None,
                               timeout_s: float | None = None) -> None:
        log = self.client.logs[self.sub.topic]
        upto = log.index(message.entry)
        if txn is not None:
            self._ack_cumulative_in(txn, log[: upto + 1], message.msg_id)
            return
        for entry in log[: upto + 1]:
            if entry.state == "committed" and entry.msg_id not in self.sub.pending:
                self.sub.acked.add(entry.msg_id)
                self.unacked.pop(entry.msg_id, None)
        self.client.acks.append((self.sub.name, message.msg_id, None, True))

    def _ack_cumulative_in(self, txn: FakeTxn, covered: list[Entry], msg_id: str) -> None:
        """Hold every message this consumer was sent up to the ack in `txn`; one another
        transaction holds is a conflict (as Pulsar's pending-ack handle refuses a second
        transaction's cumulative ack)."""
        self.client.maybe_fail("ack")
        sub = self.sub
        mine = [e for e in covered if e.msg_id in self.unacked and sub.pending.get(e.msg_id) != txn.id]
        others = {sub.pending[e.msg_id] for e in mine if e.msg_id in sub.pending}
        if others:
            txn.failed = True
            raise TransactionConflictError(Op.ACK, ServerError.TransactionConflict,
                                           f"cumulative ack over messages held by {sorted(map(str, others))}")
        for entry in mine:
            sub.pending[entry.msg_id] = txn.id
            txn.acks.append((sub, entry, self))
        self.client.acks.append((sub.name, msg_id, str(txn.id), True))
        scripted = self.client.take_failure("ack-after")
        if scripted is not None:  # it happened, but the client does not know
            txn.failed = True
            raise scripted

    def redeliver_unacknowledged(self) -> None:
        """Everything this consumer was sent and nobody acked or holds, delivered again."""
        self.redeliveries += 1
        for entry in self.unacked.values():
            if entry.msg_id not in self.sub.acked and entry.msg_id not in self.sub.pending:
                self.sub.redeliver.append(entry)
        self.unacked.clear()

    def _ack(self, message: FakeMessage, txn: FakeTxn | None) -> None:
        try:
            self.client.maybe_fail("ack")
        except OperationError:
            if txn is not None:
                txn.failed = True
            raise
        sub = self.sub
        msg_id = message.msg_id
        if txn is None:
            sub.acked.add(msg_id)
        else:
            holder = sub.pending.get(msg_id)
            if msg_id in sub.acked or (holder is not None and holder != txn.id):
                txn.failed = True
                raise TransactionConflictError(Op.ACK, ServerError.TransactionConflict,
                                               f"{msg_id} is already acked or held by {holder}")
            sub.pending[msg_id] = txn.id
            txn.acks.append((sub, message.entry, message.consumer))
        if txn is None:
            message.consumer.unacked.pop(msg_id, None)
        self.client.acks.append((sub.name, msg_id, str(txn.id) if txn is not None else None, False))
        scripted = self.client.take_failure("ack-after")
        if scripted is not None:  # it happened, but the client does not know
            if txn is not None:
                txn.failed = True
            raise scripted

    def negative_acknowledge(self, message: FakeMessage) -> None:
        entry = message.entry
        if entry.msg_id in self.sub.acked or entry.msg_id in self.sub.pending:
            return
        self.unacked.pop(entry.msg_id, None)
        self.sub.redeliver.append(entry)

    def close(self, timeout_s: float | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        self.sub.consumers.remove(self)
        for entry in self.unacked.values():
            if entry.msg_id not in self.sub.acked and entry.msg_id not in self.sub.pending:
                self.sub.redeliver.append(entry)
        self.unacked.clear()


class FakeReader:
    def __init__(self, client: FakeClient, topic: str) -> None:
        self.client = client
        self.topic = topic

    def read_to_end(self, timeout_s: float | None = None, *, ask_last: bool = True) -> list[FakeMessage]:
        self.client.maybe_fail("read")
        dummy = FakeConsumer(self.client, SubscriptionState(self.topic, "reader", "Exclusive"), "reader")
        return [FakeMessage(e, 0, dummy) for e in self.client.logs[self.topic] if e.state == "committed"]

    def read_next(self, timeout_s: float | None = None) -> FakeMessage | None:
        return None       # read_to_end already gave everything: the broker's stated end is the true one

    def close(self, timeout_s: float | None = None) -> None:
        pass


class FakeClient:
    """The `workloads.api.ClientApi` of the tests (see the module docstring)."""

    def __init__(self) -> None:
        self.logs: dict[str, list[Entry]] = defaultdict(list)
        self.subs: dict[tuple[str, str], SubscriptionState] = {}
        self.failures: dict[str, deque[OperationError]] = defaultdict(deque)
        self.txn_ids = itertools.count(1)
        self.txns: dict[str, FakeTxn] = {}
        self.ended: list[tuple[str, str]] = []
        self.acks: list[tuple[str, str, str | None, bool]] = []
        self.batching: dict[str, Any] = {}   # topic -> the batching its producer was made with
        self.closed = False
        self.lock = threading.Lock()
        # hooks a test sets to hold operations in flight (called before the op takes effect);
        # what a hook returns is ignored
        self.on_send: Callable[[], object] | None = None
        self.on_commit: Callable[[FakeTxn], object] | None = None
        self.on_new_txn: Callable[[], object] | None = None

    # ---- scripting --------------------------------------------------------------------------

    def fail_next(self, op: str, error: OperationError, times: int = 1) -> None:
        for _ in range(times):
            self.failures[op].append(error)

    def take_failure(self, op: str) -> OperationError | None:
        queue = self.failures.get(op)
        return queue.popleft() if queue else None

    def maybe_fail(self, op: str) -> None:
        error = self.take_failure(op)
        if error is not None:
            raise error

    # ---- the client API ---------------------------------------------------------------------

    def create_producer(self, topic: str, *, batching: Any = None, timeout_s: float | None = None) -> FakeProducer:
        self.maybe_fail("create-producer")
        self.batching[topic] = batching
        return FakeProducer(self, topic)

    def subscribe(self, topic: str, subscription: str, *, sub_type: Any = "Exclusive",
                  consumer_name: str | None = None, receiver_queue_size: int = 1000,
                  timeout_s: float | None = None, **_: Any) -> FakeConsumer:
        self.maybe_fail("subscribe")
        sub = self.subs.setdefault((topic, subscription), SubscriptionState(topic, subscription, str(sub_type)))
        consumer = FakeConsumer(self, sub, consumer_name)
        sub.consumers.append(consumer)
        return consumer

    def create_reader(self, topic: str, *, timeout_s: float | None = None, **_: Any) -> FakeReader:
        self.maybe_fail("create-reader")
        return FakeReader(self, topic)

    def new_transaction(self, timeout_s: float = 60.0, *, request_timeout_s: float | None = None) -> FakeTxn:
        self.maybe_fail("new-txn")
        with self.lock:
            txn = FakeTxn(self, TxnId(1, next(self.txn_ids)))
            self.txns[str(txn.id)] = txn
        if self.on_new_txn is not None:
            self.on_new_txn()
        return txn

    def abort_transaction(self, txn_id: str, timeout_s: float | None = None) -> None:
        """A second client's abort by id: as the coordinator answers it (already aborted: done;
        committed: refused, definite)."""
        self.maybe_fail("foreign-abort")
        txn = self.txns.get(txn_id)
        if txn is None:
            raise TransactionNotFoundError(Op.END_TXN, ServerError.TransactionNotFound, f"txn {txn_id} not found")
        if txn.state == "aborted":
            return
        if txn.state != "open":
            raise InvalidStateError(f"transaction {txn_id} is {txn.state}")
        txn._finish("aborted")

    def close(self, timeout_s: float = 5.0) -> None:
        self.closed = True

    # ---- delivery ---------------------------------------------------------------------------

    def next_for(self, sub: SubscriptionState, consumer: FakeConsumer) -> Entry | None:
        while sub.redeliver:
            entry = sub.redeliver.popleft()
            if entry.msg_id not in sub.acked and entry.msg_id not in sub.pending:
                return entry
        log = self.logs[sub.topic]
        while sub.position < len(log):
            entry = log[sub.position]
            if entry.state == "pending":
                return None       # the read horizon: nothing after an open transaction
            sub.position += 1
            if entry.state == "committed" and entry.msg_id not in sub.acked:
                return entry
        return None

    def visible(self, topic: str) -> list[str]:
        return [e.msg_id for e in self.logs[topic] if e.state == "committed"]
