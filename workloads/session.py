"""One logical client process: its recorded operations, its pacing, its statistics.

Theory of operation. A `Session` is what a workload user uses to do anything the
history must show. `op()` writes the invocation (flushed) before calling the client,
then the completion: `ok` with the call's results, or, on an error, `fail` when the
error proves the operation had no effect (`harness.errors.is_definite`) and `info`
otherwise. Every completed op also fires a Locust request event (request type = the
op, name = the workload) so Locust's own statistics and CSV files see the same
operations, and bumps the load process's counters for the status file. A process
runs its ops one after another, so it never has more than one outstanding.

Pacing. With `load.rate_per_user` set, a `Pacer` gives each iteration (one
transaction) an intended start on a fixed schedule, `start + k / rate`. The session
waits for it when early; when late it starts at once and never skips an iteration,
so a stall makes the following iterations late too. Every invocation of a paced
iteration carries `extra.intended_ns`: the time it was meant to start, i.e. the
iteration's slot plus how long after the iteration's first invocation it was
invoked (its actual time minus the iteration's lag). Latency measured from there
charges a stall to every operation it delayed (no coordinated omission).

Lanes. A user may run several operations at once (a transaction's sends, with
`workload.send_concurrency`; transactions overlapping, with `workload.txn_pipeline`).
Each operation is recorded under a process *lane* it holds from its invocation to its
completion: the user's own name `<writer>/u<n>` when free, else `<writer>/u<n>/l1`,
`/l2` ..., the lowest free one. So every history process (lane) still has at most one
outstanding operation, and a user running one operation at a time records under its own
name only, exactly as before lanes existed. Each iteration's timing is an `Iteration`
object, so operations of an earlier transaction still running in the background are
paced and timed against their own iteration.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from harness.client.errors import is_ack_conflict
from harness.client.futures import raw_lock
from harness.errors import OperationError, is_definite
from harness.history import HistoryRecorder, Invocation, OpF, RunClock
from workloads.api import delivery_extra

if TYPE_CHECKING:
    from workloads.context import LoadContext

T = TypeVar("T")

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """How one recorded operation ended."""

    ok: bool
    value: T | None = None
    error: BaseException | None = None

    @property
    def definite(self) -> bool:
        """True when it failed and certainly had no effect."""
        return not self.ok and self.error is not None and is_definite(self.error)


StatsSink = Callable[[str, str, float, int, BaseException | None], None]
"""(request_type, name, response_time_ms, response_length, exception) -> None: Locust's request event."""


class Pacer:
    """Constant-throughput schedule: iteration k is meant to start at `first + k / rate`."""

    def __init__(self, rate_per_s: float, clock: RunClock) -> None:
        if rate_per_s <= 0:
            raise ValueError(f"rate must be positive, got {rate_per_s}")
        self.period_ns = int(NS_PER_S / rate_per_s)
        self.clock = clock
        self._next_ns: int | None = None

    def next_slot(self) -> int:
        """The intended start of the next iteration (the first starts now)."""
        if self._next_ns is None:
            self._next_ns = self.clock.now_ns()
        slot = self._next_ns
        self._next_ns += self.period_ns
        return slot


class Iteration:
    """One iteration's timing: when it started and, when paced, its slot on the schedule."""

    __slots__ = ("_first_op_ns", "slot_ns", "started")

    def __init__(self, slot_ns: int | None = None) -> None:
        self.slot_ns = slot_ns                  # the paced iteration's intended start
        self._first_op_ns: int | None = None    # when its first op was invoked
        self.started = time.perf_counter()

    def intended_ns(self, now_ns: int) -> int:
        """The intended start of an op invoked at `now_ns`: the slot plus how far into the iteration it is."""
        if self._first_op_ns is None:
            self._first_op_ns = now_ns
        assert self.slot_ns is not None
        return self.slot_ns + (now_ns - self._first_op_ns)

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0


class Lanes:
    """The process lanes of one user: its own name, then `/l1`, `/l2` ... (lowest free first)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._free: list[int] = []
        self._count = 0
        self._lock = raw_lock()

    def name(self, lane: int) -> str:
        return self.base if lane == 0 else f"{self.base}/l{lane}"

    def take(self) -> int:
        with self._lock:
            if self._free:
                return heapq.heappop(self._free)
            self._count += 1
            return self._count - 1

    def give(self, lane: int) -> None:
        with self._lock:
            heapq.heappush(self._free, lane)

    @property
    def used(self) -> int:
        """How many lanes this user has needed at once, at most."""
        return self._count


class PendingOp:
    """An operation `Session.begin` recorded as invoked, until `Session.finish` records its end."""

    __slots__ = ("expect_loss", "f", "inv", "lane", "length", "started")

    def __init__(self, f: OpF, inv: Invocation, lane: int, length: int, expect_loss: bool = False) -> None:
        self.f = f
        self.inv = inv
        self.lane = lane
        self.length = length
        self.expect_loss = expect_loss
        self.started = time.perf_counter()


class Session:
    """The recorded operations of one user (`<writer>/u<n>` and its lanes)."""

    def __init__(self, ctx: LoadContext, number: int, name: str, *, paced: bool = True,
                 process: str | None = None) -> None:
        self.ctx = ctx
        self.number = number
        self.process = process or f"{ctx.writer}/u{number}"
        self.lanes = Lanes(self.process)
        self.name = name
        self.recorder: HistoryRecorder = ctx.recorder
        self.clock = ctx.clock
        rate = ctx.config.load.rate_per_user
        self.pacer = Pacer(rate, ctx.clock) if (paced and rate) else None
        self.iteration = Iteration()
        self.oks = 0
        """Operations of this user that completed ok, so far (its workload backs off on failures)."""
        self.failures = 0
        """Operations of this user that failed, so far; ack conflicts (an outcome the ack-only
        workload provokes on purpose, the broker's rule at work) and races lost on purpose
        (`expect_loss`) are not counted."""

    # ---- iterations ------------------------------------------------------------------

    def begin_iteration(self) -> bool:
        """Wait for this iteration's turn (when paced). False when the load is stopping."""
        if self.pacer is None:
            self.iteration = Iteration()
            return not self.ctx.stopping.is_set()
        slot = self.pacer.next_slot()
        early_ns = slot - self.clock.now_ns()
        if early_ns > 0 and self.ctx.stopping.wait(early_ns / NS_PER_S):
            return False
        self.iteration = Iteration(slot)
        return not self.ctx.stopping.is_set()

    # ---- operations ------------------------------------------------------------------

    def op(self, f: OpF, call: Callable[[], T], *, result: Callable[[T], dict[str, Any]] | None = None,
           length: int = 0, iteration: Iteration | None = None, expect_loss: bool = False,
           **fields: Any) -> Outcome[T]:
        """Record `f`, run `call()`, record its completion; never raises an OperationError.

        Args:
            f: the operation.
            call: does it; its return value goes to `result`.
            result: the completion's extra fields from the return value (e.g. msg_id).
            length: bytes, for Locust's statistics.
            iteration: the iteration it belongs to (default: the current one).
            expect_loss: the operation is one side of a race the load made on purpose (a commit
                at its transaction's timeout, a commit a second client's abort races, that
                abort): a definite failure is the race lost, counted apart from errors.
            fields: the invocation's fields (txn, topic, key, value, inputs, ...).

        Raises:
            Whatever is not an OperationError (a bug, a killed greenlet), after
            recording it as `info`: the operation may have happened.
        """
        pending = self.begin(f, length=length, iteration=iteration, expect_loss=expect_loss, **fields)
        try:
            value = call()
        except OperationError as exc:
            return self.finish(pending, error=exc)
        except BaseException as exc:
            self.finish(pending, error=exc)
            raise
        return self.finish(pending, value=value, result=result)

    def begin(self, f: OpF, *, length: int = 0, iteration: Iteration | None = None,
              expect_loss: bool = False, **fields: Any) -> PendingOp:
        """Record the invocation of `f` (on a free lane) before it starts; `finish` records its end.

        `op` is `begin`, the call, `finish`; an operation whose outcome arrives elsewhere (a
        send's receipt, in the connection's reader) is begun here and finished there.
        """
        iteration = iteration or self.iteration
        if iteration.slot_ns is not None:
            extra = dict(fields.pop("extra", None) or {})
            extra["intended_ns"] = iteration.intended_ns(self.clock.now_ns())
            fields["extra"] = extra
        lane = self.lanes.take()
        try:
            inv = self.recorder.invoke(self.lanes.name(lane), f, **fields)
        except BaseException:
            self.lanes.give(lane)
            raise
        return PendingOp(f, inv, lane, length, expect_loss)

    def finish(self, pending: PendingOp, *, value: T | None = None, error: BaseException | None = None,
               result: Callable[[T], dict[str, Any]] | None = None) -> Outcome[T]:
        """Record how a begun operation ended: `ok` (with `result(value)`), or by `error`'s kind.

        An `error` that is not an OperationError (a bug, a killed greenlet) is recorded as
        `info` (the operation may have happened); the caller raises it again.
        """
        f, inv = pending.f, pending.inv
        elapsed_ms = (time.perf_counter() - pending.started) * 1000.0
        try:
            if error is None:
                self.recorder.ok(inv, **(result(value) if result is not None else {}))  # type: ignore[arg-type]
                self.oks += 1
                self.ctx.counters.count(f, ok=True)
                self.ctx.fire(f.value, self.name, elapsed_ms, pending.length, None)
                return Outcome(ok=True, value=value)
            if isinstance(error, OperationError):
                self.recorder.complete_with_error(inv, error)
            elif not inv.completed and not self.recorder.closed:
                self.recorder.info(inv, f"{type(error).__name__}: {error}")
            conflict = f is OpF.ACK and is_ack_conflict(error)
            lost_race = pending.expect_loss and is_definite(error)
            if not (conflict or lost_race):
                self.failures += 1
            self.ctx.counters.count(f, ok=False, conflict=conflict, lost_race=lost_race)
            self.ctx.fire(f.value, self.name, elapsed_ms, pending.length, error)
            return Outcome(ok=False, error=error)
        finally:
            if inv.completed:   # a lane whose op was never completed (the history closed) is not reused
                self.lanes.give(pending.lane)

    def receive_event(self, message: Any, subscription: str, *, value: str | None,
                      extra: dict[str, Any] | None = None) -> None:
        """Record a `receive` event for a message this process got."""
        fields = {**delivery_extra(message, self.recorder.clock.base_ns), **(extra or {})}
        self.recorder.event(self.process, OpF.RECEIVE, topic=message.topic, segment=message.segment,
                            subscription=subscription, key=message.key, value=value,
                            msg_id=message.msg_id, extra=fields)
        self.ctx.counters.receives += 1

    def fire(self, request_type: str, response_time_ms: float, error: BaseException | None = None,
             length: int = 0) -> None:
        """A Locust request event that is not a history op (e.g. a whole transaction)."""
        self.ctx.fire(request_type, self.name, response_time_ms, length, error)

