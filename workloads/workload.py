"""The common shape of a workload: one object per Locust user, one iteration per task.

A workload object does the protocol work of one logical client process and records
it through its `Session`; the Locust `User` around it (workloads.users) only calls
`step()` and `close()`. A workload first sets itself up (subscriptions), retrying
with a bounded backoff when that fails (a setup failure changes nothing the history
records, so it is reported to Locust only), then runs one iteration per `step()`.

Stopping: every iteration checks the load's stop flag between operations. A
transaction still open when the load stops is aborted (with a short timeout) instead
of being continued, so a graceful stop ends within one operation timeout.

Backing off: Locust runs the next iteration at once (`wait_time` 0), and an operation the
cluster refuses comes back at once. A user whose operations failed since its previous
iteration (ack conflicts, which ack-only provokes on purpose, aside) therefore waits before
the next one, `FAIL_BACKOFF_S[0]` doubling to `FAIL_BACKOFF_S[1]`; an iteration with only
ok operations starts the pause over, and one without operations (nothing to consume) leaves
it. A chaos run whose bookie had died had one atomic-produce user open and fail ~25,000
transactions in 19 s (0.6 ms each) without it. The pause is a stop-aware wait between
iterations: the history records exactly the same operations, only fewer of them (a paced
user's late iterations still carry their `intended_ns`). The feeder pauses per topic itself
(workloads.feeder); the verifier never loops on failures (workloads.verifier).

Operations at once: `send_together` (workloads.sends) runs a transaction's sends together
(`send_concurrency`), and `background` holds the user's transactions still ending after it
moved on (`txn_pipeline`); each operation records under its own process lane
(workloads.session). A user joins its background before it is closed, and the load
process joins every user's (`LoadContext.join_background`) before it closes the history.
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from harness.config import TIMEOUT_COMMIT_WINDOW_S
from harness.errors import OperationError
from harness.history import HistoryMisuse, HistoryWriteError, OpF
from workloads.api import ConsumerApi, TransactionApi
from workloads.concurrent import JOIN_GRACE_S, Background
from workloads.context import LoadContext
from workloads.foreign import RACE_SPREAD_S
from workloads.payload import Decoded, PayloadError, ValueSource, decode, encode
from workloads.sends import SendSpec, send_together
from workloads.session import NS_PER_S, Iteration, Outcome, Session

log = logging.getLogger(__name__)

# How long a consumer waits for the first message of an iteration, then for the rest.
FIRST_RECEIVE_WAIT_S = 1.0
GATHER_RECEIVE_WAIT_S = 0.05
# A transaction cut short by a stop is aborted within this (or the op timeout, if shorter).
STOP_ABORT_TIMEOUT_S = 5.0
SETUP_BACKOFF_S = (0.2, 5.0)
FAIL_BACKOFF_S = (0.005, 1.0)
"""The pause before the next iteration after failed operations: first, and at most (doubling)."""


class UserKind(StrEnum):
    """What a user does; also its name in Locust's statistics."""

    ATOMIC_PRODUCE = "atomic-produce"
    CONSUME_TRANSFORM_PRODUCE = "consume-transform-produce"
    CTP_CUMULATIVE = "ctp-cumulative"
    ACK_ONLY = "ack-only"
    FEEDER = "feed"
    VERIFIER = "verify"


@dataclass(frozen=True)
class Received:
    """A message a user received, and what its payload says."""

    message: Any
    decoded: Decoded | None

    @property
    def value(self) -> str | None:
        return self.decoded.value if self.decoded is not None else None


@dataclass(frozen=True)
class OpenTxn:
    txn: TransactionApi
    id: str
    iteration: Iteration | None = None
    """The iteration that opened it: its ops are paced and timed against it, also in the background."""
    opened_ns: int = 0
    """Run-clock time its open returned: its timeout counts from about here (the client's from the
    NEW_TXN answer, the coordinator's from a little before)."""


@dataclass(frozen=True)
class Ending:
    """How a transaction that is meant to commit ends: racing decisions drawn when it is planned.

    `timeout_offset_s`: commit this far from the transaction's timeout (within
    TIMEOUT_COMMIT_WINDOW_S either side), racing the coordinator's timeout abort
    (`workload.timeout_commit_ratio`). `foreign_delay_s`: a second client aborts the transaction
    this long after the commit starts, or, negative, that long before (workloads.foreign,
    `workload.foreign_abort_ratio`). None: no such race.
    """

    timeout_offset_s: float | None = None
    foreign_delay_s: float | None = None

    @property
    def at_timeout(self) -> bool:
        return self.timeout_offset_s is not None


PLAIN_ENDING = Ending()


class Workload(ABC):
    """One logical client process of a load process."""

    kind: ClassVar[UserKind]
    paced: ClassVar[bool] = True
    backs_off: ClassVar[bool] = True
    """Pause between iterations after failed operations (see the module docstring)."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.w = ctx.workload
        self.number = ctx.next_number()
        self.session = Session(ctx, self.number, self.kind.value, paced=self.paced)
        self.rng = ctx.rng(self.number)
        self.values = ValueSource(ctx.writer, self.number)
        self.op_timeout_s = self.w.op_timeout_s
        self._ready = False
        self._backoff_s = SETUP_BACKOFF_S[0]
        self.fail_pause_s = 0.0
        """The pause after the latest failures (0: the previous iteration went well)."""
        self._seen = (0, 0)    # the session's (oks, failures) at the previous iteration's end
        self.closed = False
        self.background = Background(self.w.open_txns_per_user, self._background_failed)
        ctx.add_background(self.background)

    @property
    def process(self) -> str:
        return self.session.process

    def draw_hold_s(self, usual_s: float) -> float:
        """How long the next transaction stays open after its sends or acks: `usual_s`, or with
        probability `long_txn_ratio` the long hold. Drawn with the user's seeded rng when the
        transaction is planned, and only when long transactions are asked for (a run without
        them draws exactly what it drew before)."""
        if self.w.long_txn_ratio > 0 and self.rng.random() < self.w.long_txn_ratio:
            return self.w.long_hold_s
        return usual_s

    def draw_ending(self) -> Ending:
        """The racing decisions of the next transaction (`Ending`), drawn with the user's seeded rng
        when it is planned, and only those asked for: a run without them draws exactly what it
        drew before."""
        offset = delay = None
        if self.w.timeout_commit_ratio > 0 and self.rng.random() < self.w.timeout_commit_ratio:
            offset = self.rng.uniform(-TIMEOUT_COMMIT_WINDOW_S, TIMEOUT_COMMIT_WINDOW_S)
        if self.ctx.foreign is not None and self.rng.random() < self.w.foreign_abort_ratio:
            delay = self.rng.uniform(-RACE_SPREAD_S, RACE_SPREAD_S)
        return Ending(offset, delay) if offset is not None or delay is not None else PLAIN_ENDING

    def finish_later(self, finisher: Callable[[], None]) -> bool:
        """Run `finisher` (the rest of a transaction: a commit held until its timeout) in the
        background, so the user goes on meanwhile; False when no slot is free (or the load is
        stopping): the caller runs it itself."""
        if self.ctx.stopping.is_set() or not self.background.acquire(self.ctx.stopping, 0.0):
            return False
        self.background.spawn(finisher)
        return True

    # ---- the user's entry points --------------------------------------------------------

    def step(self) -> None:
        """Set up if needed, then run one iteration. History failures stop the whole load."""
        if self.closed:
            return
        if self.ctx.stopping.is_set():
            self.join_background()
            return
        try:
            if not self._ready and not self._try_setup():
                return
            self.iterate()
            if self.ctx.stopping.is_set():
                self.join_background()
            elif self.backs_off:
                self._back_off()
        except (HistoryWriteError, HistoryMisuse) as err:
            self.ctx.fail_fatally(err)
            raise
        except OperationError:
            raise  # iterate() records operation errors itself; one escaping is a bug
        except Exception:
            self.ctx.counters.exceptions += 1
            raise

    def close(self) -> None:
        """Release what this user holds (consumers); bounded; idempotent."""
        if self.closed:
            return
        self.closed = True
        self.join_background()
        self.teardown()

    def join_background(self) -> None:
        """Wait (bounded) for the transactions this user left ending in the background."""
        if not self.background.join(self.finish_timeout_s()):
            log.warning("%s: transactions still ending after %.0f s", self.process, self.finish_timeout_s())

    def finish_timeout_s(self) -> float:
        """How long a background transaction may take to end: its sends, then its commit or abort
        (after holding it until its timeout, with `timeout_commit_ratio`)."""
        held = self.w.txn_timeout_s + TIMEOUT_COMMIT_WINDOW_S if self.w.timeout_commit_ratio > 0 else 0.0
        return 2 * self.op_timeout_s + JOIN_GRACE_S + held

    def _background_failed(self, err: BaseException) -> None:
        if isinstance(err, (HistoryWriteError, HistoryMisuse)):
            self.ctx.fail_fatally(err)
            return
        self.ctx.counters.exceptions += 1
        log.error("%s: a transaction ending in the background failed: %s: %s", self.process,
                  type(err).__name__, err, exc_info=err)

    # ---- what each kind implements ---------------------------------------------------------

    def setup(self) -> None:  # noqa: B027 - a hook; most kinds need no setup
        """Create what the iterations need (raise an OperationError to retry later)."""

    @abstractmethod
    def iterate(self) -> None:
        """One unit of work (one transaction, one poll, one feed send)."""

    def teardown(self) -> None:  # noqa: B027 - a hook
        """Undo `setup()`."""

    # ---- helpers --------------------------------------------------------------------------

    def _back_off(self) -> None:
        """Wait before the next iteration when operations failed since the last one (bounded)."""
        oks, failures = self.session.oks, self.session.failures
        new_oks, new_failures = oks - self._seen[0], failures - self._seen[1]
        self._seen = (oks, failures)
        if new_failures:
            pause = self.fail_pause_s * 2 if self.fail_pause_s else FAIL_BACKOFF_S[0]
            self.fail_pause_s = min(pause, FAIL_BACKOFF_S[1])
            self.ctx.stopping.wait(self.fail_pause_s)
        elif new_oks:
            self.fail_pause_s = 0.0

    def _try_setup(self) -> bool:
        try:
            self.setup()
        except OperationError as err:
            self.ctx.counters.exceptions += 1
            self.session.fire("setup", 0.0, err)
            self.ctx.stopping.wait(self._backoff_s)
            self._backoff_s = min(self._backoff_s * 2, SETUP_BACKOFF_S[1])
            return False
        self._ready = True
        return True

    def stop_timeout_s(self) -> float:
        """The timeout of an operation that ends a transaction cut short by a stop."""
        return min(self.op_timeout_s, STOP_ABORT_TIMEOUT_S)

    def open_txn(self) -> OpenTxn | None:
        outcome = self.session.op(
            OpF.TXN_OPEN,
            lambda: self.ctx.client.new_transaction(self.w.txn_timeout_s, request_timeout_s=self.op_timeout_s),
            result=lambda txn: {"txn": str(txn.id)})
        if not outcome.ok:
            return None
        assert outcome.value is not None
        return OpenTxn(outcome.value, str(outcome.value.id), self.session.iteration, self.ctx.clock.now_ns())

    def hold_to_timeout(self, txn: OpenTxn, offset_s: float) -> bool:
        """Wait until `offset_s` from `txn`'s timeout (stop-aware); False when the load stopped."""
        due_ns = txn.opened_ns + int((self.w.txn_timeout_s + offset_s) * NS_PER_S)
        wait_s = (due_ns - self.ctx.clock.now_ns()) / NS_PER_S
        return wait_s <= 0 or not self.ctx.stopping.wait(wait_s)

    def end_txn(self, txn: OpenTxn, *, abort: bool, ending: Ending = PLAIN_ENDING) -> Outcome[None]:
        """Commit or abort; fires a `txn` request event for the whole transaction.

        A commit with racing decisions (`ending`) first waits until its moment at the timeout, and
        has a second client's abort started beside it. Every commit invoked within
        TIMEOUT_COMMIT_WINDOW_S of the timeout carries `extra.timeout_offset_s` and is counted in
        `Counters.timeout_commits`."""
        if not abort and ending.timeout_offset_s is not None and not self.hold_to_timeout(txn, ending.timeout_offset_s):
            abort = True   # the load stops during the hold: end it now, by abort
        timeout = self.stop_timeout_s() if self.ctx.stopping.is_set() else self.op_timeout_s
        iteration = txn.iteration or self.session.iteration
        if abort:
            outcome = self.session.op(OpF.TXN_ABORT, lambda: txn.txn.abort(timeout), txn=txn.id,
                                      iteration=iteration)
        else:
            outcome = self._commit(txn, timeout, iteration, ending)
        self.ctx.counters.end_txn_resends += int(getattr(txn.txn, "end_txn_resends", 0) or 0)
        self.session.fire("txn", iteration.elapsed_ms(), outcome.error)
        return outcome

    def _commit(self, txn: OpenTxn, timeout: float, iteration: Iteration, ending: Ending) -> Outcome[None]:
        raced = False
        foreign = self.ctx.foreign
        if ending.foreign_delay_s is not None and foreign is not None and not self.ctx.stopping.is_set():
            raced = foreign.race(txn.id, self.process, ending.foreign_delay_s, timeout)
            if raced and ending.foreign_delay_s < 0:
                self.ctx.stopping.wait(-ending.foreign_delay_s)   # the abort goes first
        offset_s = (self.ctx.clock.now_ns() - txn.opened_ns) / NS_PER_S - self.w.txn_timeout_s
        at_timeout = abs(offset_s) <= TIMEOUT_COMMIT_WINDOW_S
        extra = {"timeout_offset_s": round(offset_s, 3)} if at_timeout else None
        outcome = self.session.op(OpF.TXN_COMMIT, lambda: txn.txn.commit(timeout), txn=txn.id,
                                  iteration=iteration, extra=extra, expect_loss=raced or at_timeout)
        if at_timeout:
            counted = self.ctx.counters.timeout_commits
            counted["count"] += 1
            counted["ok" if outcome.ok else "fail" if outcome.definite else "info"] += 1
            if offset_s > 0:
                counted["after"] += 1
                if outcome.ok:
                    counted["after_ok"] += 1
            if ending.at_timeout:
                counted["planned"] += 1
        return outcome

    def send(self, topic: str, *, txn: OpenTxn | None, key: str | None,
             inputs: tuple[str, ...] = (), value: str | None = None) -> Outcome[Any]:
        """One recorded send; `value` drawn here unless the caller drew it (before running sends at once)."""
        value = value if value is not None else self.values.next()
        payload = encode(value, inputs, self.w.message_size)
        producers = self.ctx.producers
        handle = txn.txn if txn is not None else None
        outcome = self.session.op(
            OpF.SEND,
            lambda: producers.get(topic).send(payload, key=key, txn=handle, timeout_s=self.op_timeout_s),
            result=lambda receipt: {"msg_id": receipt.msg_id, "segment": receipt.segment},
            length=len(payload), txn=txn.id if txn is not None else None, topic=topic, key=key, value=value,
            inputs=list(inputs) if inputs else None, iteration=txn.iteration if txn is not None else None)
        if not outcome.ok and getattr(outcome.error, "topic_terminated", False):
            self.ctx.note_terminated(topic)
        return outcome

    def send_together(self, txn: OpenTxn | None, planned: Sequence[tuple[str, str | None, str, tuple[str, ...]]],
                      limit: int | None = None) -> list[Outcome[Any]]:
        """Recorded sends of `txn` (or outside any transaction) (topic, key, value, inputs each),
        `limit` (default `send_concurrency`) of them in flight at once without a thread each
        (workloads.sends); their outcomes in order."""
        specs = [SendSpec(topic, key, value, encode(value, inputs, self.w.message_size),
                          txn.txn if txn is not None else None, txn.id if txn is not None else None, inputs)
                 for topic, key, value, inputs in planned]
        outcomes = send_together(self.session, self.ctx.producers.get, specs,
                                 self.w.send_concurrency if limit is None else limit,
                                 self.op_timeout_s, txn.iteration if txn is not None else None)
        for spec, outcome in zip(specs, outcomes, strict=True):
            if not outcome.ok and getattr(outcome.error, "topic_terminated", False):
                self.ctx.note_terminated(spec.topic)   # as `send` does
        return outcomes

    def ack(self, consumer: ConsumerApi, received: Received, subscription: str, *,
            txn: OpenTxn | None, cumulative: bool = False) -> Outcome[None]:
        message = received.message
        handle = txn.txn if txn is not None else None
        if cumulative:
            def call() -> None:
                consumer.acknowledge_cumulative(message, txn=handle, timeout_s=self.op_timeout_s)
        else:
            def call() -> None:
                consumer.acknowledge(message, txn=handle, timeout_s=self.op_timeout_s)
        return self.session.op(
            OpF.ACK, call, txn=txn.id if txn is not None else None, topic=message.topic,
            segment=message.segment, subscription=subscription, key=message.key, value=received.value,
            msg_id=message.msg_id, extra={"cumulative": True} if cumulative else None)

    def receive_one(self, consumer: ConsumerApi, subscription: str, timeout_s: float) -> Received | None:
        """Receive one message (recording a `receive` event), or None within `timeout_s`."""
        try:
            message = consumer.receive(timeout_s)
        except OperationError:
            return None
        if message is None:
            return None
        try:
            decoded: Decoded | None = decode(message.data)
            extra = None
        except PayloadError as err:
            decoded, extra = None, {"payload_error": str(err)}
        received = Received(message, decoded)
        self.session.receive_event(message, subscription, value=received.value, extra=extra)
        return received

    def receive_batch(self, consumer: ConsumerApi, subscription: str, count: int) -> list[Received]:
        """Up to `count` messages: wait for the first, then take what arrives quickly."""
        got: list[Received] = []
        wait = FIRST_RECEIVE_WAIT_S
        while len(got) < count and not self.ctx.stopping.is_set():
            received = self.receive_one(consumer, subscription, wait)
            if received is None:
                break
            got.append(received)
            wait = GATHER_RECEIVE_WAIT_S
        return got

    def pick_key(self) -> str | None:
        """A random key of `keys`; None (no key, no draw) when the workload sends unkeyed messages."""
        return f"k{self.rng.randrange(self.w.keys)}" if self.w.keys else None

    def close_quietly(self, closable: Any) -> None:
        with contextlib.suppress(Exception):  # best effort: nothing it does is recorded
            closable.close(self.stop_timeout_s())
