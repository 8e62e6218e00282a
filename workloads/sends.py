"""A transaction's sends in flight at once, without a thread or greenlet per send.

Theory of operation. `workload.send_concurrency` puts several sends of one transaction in
flight together. Each is a recorded operation on its own process lane (workloads.session):
`Session.begin` writes its invocation before it starts, the producer's `send_async` writes it
(the client registers a new partition with the coordinator first, also without waiting), and
the receipt's callback, in the connection's reader, records its completion (`Session.finish`)
the moment the outcome is known, as a blocking send's thread would have on waking. The
user's thread only waits, bounded, for the completions, and wakes once when enough are
recorded (not once per receipt): at most `limit` sends are in flight; past that it waits
until one is recorded before starting the next.

Why not a thread per send (`concurrent.run_all`, used before): each send then cost a
greenlet's start and join and two blocking waits (its registration, its receipt); with four
sends a transaction that was the largest share of the load process's CPU left after the
history (issue #27). The recorded operations are the same: one invocation before the send
starts, one completion when its outcome is known, `ok` with the receipt's `msg_id` and
`segment`, `fail` or `info` by the error's kind.

Deadlines: a send waits `op_timeout_s` from its start, as a blocking send does; then the
producer's `give_up` fails it as `send` fails at its deadline (`info` on a timeout, `fail`
when it was never written) and its callback records that. A completion that still does not
come within `JOIN_GRACE_S` after that is a bug (`StuckError`), as a stuck helper thread was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.client.futures import Future, raw_lock
from harness.errors import OperationError
from harness.history import OpF
from workloads.api import ProducerApi, SendFuture
from workloads.concurrent import JOIN_GRACE_S, StuckError
from workloads.session import Iteration, Outcome, PendingOp, Session


def receipt_fields(receipt: Any) -> dict[str, Any]:
    """The completion fields of a send: where the broker stored it."""
    return {"msg_id": receipt.msg_id, "segment": receipt.segment}


class SendSpec:
    """One send to start: where, what, and the invocation's fields."""

    __slots__ = ("inputs", "key", "payload", "topic", "txn", "txn_id", "value")

    def __init__(self, topic: str, key: str | None, value: str, payload: bytes, txn: Any,
                 txn_id: str | None, inputs: tuple[str, ...] = ()) -> None:
        self.topic = topic
        self.key = key
        self.value = value
        self.payload = payload
        self.txn = txn
        self.txn_id = txn_id
        self.inputs = inputs


class _InFlight:
    """One started send: its recorded invocation, its future, and when its caller stops waiting."""

    __slots__ = ("deadline", "future", "group", "outcome", "pending", "producer", "raised", "recorded")

    def __init__(self, pending: PendingOp, deadline: float, group: _Group) -> None:
        self.pending = pending
        self.deadline = deadline
        self.group = group
        self.future: SendFuture | None = None
        self.producer: ProducerApi | None = None
        self.outcome: Outcome[Any] | None = None
        self.raised: BaseException | None = None   # not an OperationError: raised again by the waiter
        self.recorded = False                      # the completion is recorded (or failed to be)

    def mark_recorded(self) -> None:
        self.recorded = True
        self.group.one_recorded()

    def complete(self, session: Session, future: SendFuture) -> None:
        """The send's future completed (the connection's reader, or here): record its end."""
        try:
            error = future.exception()
            if error is None:
                self.outcome = session.finish(self.pending, value=future.result(0), result=receipt_fields)
            else:
                self.outcome = session.finish(self.pending, error=error)
                if not isinstance(error, OperationError):
                    self.raised = error
        except BaseException as exc:  # a history write failed: the waiter raises it
            self.raised = exc
        finally:
            self.mark_recorded()


class _Group:
    """The sends of one `send_together` call: their waiter wakes once enough of them are recorded.

    Receipts from a real broker arrive one at a time; waiting on each send in turn woke the
    waiting thread once per receipt, this wakes it once per wait (the last send recorded).
    One waiter: the thread that started the sends.
    """

    __slots__ = ("_lock", "_signal", "_want", "unrecorded")

    def __init__(self) -> None:
        self._lock = raw_lock()
        self.unrecorded = 0
        self._want = -1
        self._signal: Future[None] | None = None

    def add(self) -> None:
        with self._lock:
            self.unrecorded += 1

    def one_recorded(self) -> None:
        with self._lock:
            self.unrecorded -= 1
            signal = self._signal if self.unrecorded <= self._want else None
            if signal is not None:
                self._signal, self._want = None, -1
        if signal is not None:
            signal.set_result(None)

    def wait_until_at_most(self, count: int, timeout_s: float) -> bool:
        """Until at most `count` sends are unrecorded, `timeout_s` at most; whether that happened."""
        with self._lock:
            if self.unrecorded <= count:
                return True
            signal = self._signal = Future()
            self._want = count
        return signal.wait(timeout_s)


def send_together(session: Session, producer_of: Callable[[str], ProducerApi], sends: Sequence[SendSpec],
                  limit: int, timeout_s: float, iteration: Iteration | None) -> list[Outcome[Any]]:
    """Start `sends` (at most `limit` in flight), each recorded on its own lane; their outcomes in order.

    Raises:
        What is not an OperationError (a failed history write, a bug), after every started
        send was recorded; StuckError when a completion never came.
    """
    group = _Group()
    started: list[_InFlight] = []
    try:
        for spec in sends:
            if group.unrecorded >= max(1, limit):
                _wait(group, started, max(1, limit) - 1)
            started.append(_start(session, producer_of, spec, timeout_s, iteration, group))
    finally:
        _wait(group, started, 0)
    for flight in started:
        if flight.raised is not None:
            raise flight.raised
    return [flight.outcome for flight in started]  # type: ignore[misc]  # every one was recorded


def _start(session: Session, producer_of: Callable[[str], ProducerApi], spec: SendSpec,
           timeout_s: float, iteration: Iteration | None, group: _Group) -> _InFlight:
    pending = session.begin(OpF.SEND, length=len(spec.payload), iteration=iteration, txn=spec.txn_id,
                            topic=spec.topic, key=spec.key, value=spec.value,
                            inputs=list(spec.inputs) if spec.inputs else None)
    flight = _InFlight(pending, time.monotonic() + timeout_s, group)
    group.add()
    try:
        producer = producer_of(spec.topic)
        flight.producer = producer
        future = producer.send_async(spec.payload, key=spec.key, txn=spec.txn, timeout_s=timeout_s)
    except BaseException as exc:   # the producer could not be made: nothing was sent
        try:
            flight.outcome = session.finish(pending, error=exc)
        finally:
            flight.mark_recorded()
        if not isinstance(exc, OperationError):
            flight.raised = exc
        return flight
    flight.future = future
    future.add_done_callback(lambda done: flight.complete(session, done))
    return flight


def _wait(group: _Group, flights: list[_InFlight], count: int) -> None:
    """Until at most `count` of `flights` are unrecorded; a send whose deadline passed is given up
    (its producer fails it, its callback records that), and one not recorded `JOIN_GRACE_S`
    after that is a bug (`StuckError`). Bounded: every send has a deadline and a grace."""
    given_up: dict[int, float] = {}
    while True:
        waiting = [f for f in flights if not f.recorded]
        if len(waiting) <= count:
            return
        now = time.monotonic()
        for index, flight in enumerate(waiting):
            if flight.deadline <= now and id(flight) not in given_up:
                given_up[id(flight)] = now
                assert flight.producer is not None and flight.future is not None
                flight.producer.give_up(flight.future)
            elif id(flight) in given_up and not flight.recorded and now - given_up[id(flight)] > JOIN_GRACE_S:
                raise StuckError(f"send {index} did not end within {JOIN_GRACE_S:.0f} s after its deadline")
        waiting = [f for f in waiting if not f.recorded]
        if len(waiting) <= count:
            return
        next_check = min(given_up[id(f)] + JOIN_GRACE_S if id(f) in given_up else f.deadline for f in waiting)
        group.wait_until_at_most(count, max(0.001, next_check - time.monotonic()))
