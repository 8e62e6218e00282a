"""A transaction's sends in flight at once, without a thread or greenlet per send.

Theory of operation. `workload.send_concurrency` puts several sends of one transaction in
flight together. Each is a recorded operation on its own process lane (workloads.session):
`Session.begin` writes its invocation before it starts, the producer's `send_async` writes it
(the client registers a new partition with the coordinator first, also without waiting), and
the receipt's callback, in the connection's reader, records its completion (`Session.finish`)
the moment the outcome is known, as a blocking send's thread would have on waking. The
user's thread only waits, bounded, for the completions: at most `limit` sends are started
before it waits for the oldest.

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
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from harness.client.futures import Future
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

    __slots__ = ("deadline", "future", "outcome", "pending", "producer", "raised", "recorded")

    def __init__(self, pending: PendingOp, deadline: float) -> None:
        self.pending = pending
        self.deadline = deadline
        self.future: SendFuture | None = None
        self.producer: ProducerApi | None = None
        self.outcome: Outcome[Any] | None = None
        self.raised: BaseException | None = None   # not an OperationError: raised again by the waiter
        self.recorded: Future[None] = Future()     # set once the completion is recorded

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
            self.recorded.set_result(None)


def send_together(session: Session, producer_of: Callable[[str], ProducerApi], sends: Sequence[SendSpec],
                  limit: int, timeout_s: float, iteration: Iteration | None) -> list[Outcome[Any]]:
    """Start `sends` (at most `limit` in flight), each recorded on its own lane; their outcomes in order.

    Raises:
        What is not an OperationError (a failed history write, a bug), after every started
        send was recorded; StuckError when a completion never came.
    """
    started: list[_InFlight] = []
    window: deque[_InFlight] = deque()
    try:
        for spec in sends:
            if len(window) >= max(1, limit):
                _await(window.popleft())
            flight = _start(session, producer_of, spec, timeout_s, iteration)
            started.append(flight)
            window.append(flight)
    finally:
        for flight in window:
            _await(flight, reraise=False)
    for flight in started:
        if flight.raised is not None:
            raise flight.raised
    return [flight.outcome for flight in started]  # type: ignore[misc]  # every one was recorded


def _start(session: Session, producer_of: Callable[[str], ProducerApi], spec: SendSpec,
           timeout_s: float, iteration: Iteration | None) -> _InFlight:
    pending = session.begin(OpF.SEND, length=len(spec.payload), iteration=iteration, txn=spec.txn_id,
                            topic=spec.topic, key=spec.key, value=spec.value,
                            inputs=list(spec.inputs) if spec.inputs else None)
    flight = _InFlight(pending, time.monotonic() + timeout_s)
    try:
        producer = producer_of(spec.topic)
        flight.producer = producer
        future = producer.send_async(spec.payload, key=spec.key, txn=spec.txn, timeout_s=timeout_s)
    except BaseException as exc:   # the producer could not be made: nothing was sent
        try:
            flight.outcome = session.finish(pending, error=exc)
        finally:
            flight.recorded.set_result(None)
        if not isinstance(exc, OperationError):
            flight.raised = exc
        return flight
    flight.future = future
    future.add_done_callback(lambda done: flight.complete(session, done))
    return flight


def _await(flight: _InFlight, *, reraise: bool = True) -> None:
    """Until the send's completion is recorded; at its deadline the producer gives it up."""
    if not flight.recorded.wait(max(0.0, flight.deadline - time.monotonic())):
        assert flight.producer is not None and flight.future is not None
        flight.producer.give_up(flight.future)
        if not flight.recorded.wait(JOIN_GRACE_S):
            raise StuckError(f"a send did not end within {JOIN_GRACE_S:.0f} s after its deadline")
    if reraise and flight.raised is not None:
        raise flight.raised
