"""A transaction as the client sees it: its id, its registrations, its ops, its end.

Theory of operation
-------------------
`PulsarClient.new_transaction()` sends NEW_TXN and wraps the returned `TxnId`. The
transaction then mirrors Java's `TransactionImpl`:

* before the first transactional send to a topic (partition, segment) it registers
  the topic with ADD_PARTITION_TO_TXN, once; before the first transactional ack on a
  (topic, subscription) it registers it with ADD_SUBSCRIPTION_TO_TXN, once.
  Concurrent first uses share one request. A failed registration fails only the
  send/ack that needed it, and always definitely: that SEND/ACK was never written.
* every send (including `send_async`) and ack of the transaction is tracked; a
  failure of any of them is noted.
* `commit()` waits (until its deadline) for the tracked sends; if any failed or is
  still unanswered it sends END_TXN ABORT instead and raises
  `TransactionOpFailedError` (definite: COMMIT was never sent, so the transaction
  cannot commit), as Java 4.x does. Otherwise it sends END_TXN COMMIT.
* `abort()` sends END_TXN ABORT.
* past its timeout (counted from NEW_TXN's answer) the transaction takes no new send or
  ack (`check_open` refuses, definitely), as Java's `TransactionImpl` goes TIME_OUT on its
  own timer: by then the coordinator may have aborted it, and an ack that reaches a
  subscription after the abort was delivered there is held until a low watermark past it
  arrives, which a transaction stuck in COMMITTING (e.g. on a terminated v4 topic) can
  hold back for good. commit() and abort() still go to the coordinator, which decides.

States: OPEN -> COMMITTING / ABORTING -> COMMITTED / ABORTED, or ERROR (END_TXN failed
definitely) or UNKNOWN (END_TXN ended without a decisive answer). From ERROR and
UNKNOWN both `commit()` and `abort()` may be tried again; the `AttemptRecord` carries
over, so once an END_TXN may have landed every later failure stays indeterminate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from harness.client.coordinator import AttemptRecord, CoordinatorClient
from harness.client.errors import (
    InvalidStateError,
    NotReadyError,
    TransactionOpFailedError,
)
from harness.client.futures import Future, raw_lock
from harness.client.timers import Deadline
from harness.errors import DefiniteError, OperationError
from harness.wire import TxnAction, TxnId

if TYPE_CHECKING:
    from harness.client.config import ClientConfig

log = logging.getLogger(__name__)


class TxnState(Enum):
    """Where a transaction is, as far as this client knows."""

    OPEN = "open"
    COMMITTING = "committing"
    ABORTING = "aborting"
    COMMITTED = "committed"
    ABORTED = "aborted"
    ERROR = "error"
    UNKNOWN = "unknown"


class TxnRegistrationError(DefiniteError):
    """Registering a topic or subscription with the coordinator failed; the send/ack was not written."""


_ENDABLE = (TxnState.OPEN, TxnState.ERROR, TxnState.UNKNOWN)


class Transaction:
    """One open transaction; pass it as `txn=` to sends and acks."""

    def __init__(self, coordinator: CoordinatorClient, txn_id: TxnId, timeout_s: float,
                 config: ClientConfig) -> None:
        self.id = txn_id
        self.timeout_s = timeout_s
        self._coordinator = coordinator
        self._config = config
        self._lock = raw_lock()   # never held across a wait
        self._state = TxnState.OPEN
        self._partitions: dict[str, Future[None]] = {}
        self._subscriptions: dict[tuple[str, str], Future[None]] = {}
        self._ops: list[Future[object]] = []
        self._failures: list[BaseException] = []
        self._record = AttemptRecord()
        self._expires = Deadline.after(timeout_s)

    @property
    def state(self) -> TxnState:
        """The current state."""
        return self._state

    @property
    def end_txn_resends(self) -> int:
        """END_TXN requests of this transaction sent again after a connection was lost with one
        in flight (`AttemptRecord.resends_after_loss`)."""
        return self._record.resends_after_loss

    def __str__(self) -> str:
        return str(self.id)

    def __repr__(self) -> str:
        return f"Transaction({self.id}, {self._state.value})"

    # ---- participation --------------------------------------------------------------

    def check_open(self) -> None:
        """Raise `InvalidStateError` (definite) unless the transaction is OPEN and within its timeout."""
        if self._state is not TxnState.OPEN:
            raise InvalidStateError(f"transaction {self.id} is {self._state.value}, not open")
        if self._expires.expired:
            raise InvalidStateError(f"transaction {self.id} timed out on the client ({self.timeout_s:g} s "
                                    "since it opened; its coordinator aborts it)")

    def register_produced_async(self, topic: str, deadline: Deadline) -> tuple[Future[None], bool]:
        """ADD_PARTITION_TO_TXN for `topic`, once per transaction, without waiting for it.

        Returns the registration's future, shared by every send to `topic` in this
        transaction, and whether this call sent the request (its owner). A failed
        registration is forgotten, so the next send to `topic` tries again;
        `registration_error` turns its error into what the send raises.

        Raises:
            InvalidStateError: the transaction is not open (definite).
        """
        with self._lock:
            self.check_open()
            future = self._partitions.get(topic)
            if future is not None:
                return future, False
            future = Future()
            self._partitions[topic] = future

        def done(answer: Future[None]) -> None:
            error = answer.exception()
            if error is None:
                future.set_result(None)
                return
            with self._lock:
                if self._partitions.get(topic) is future:
                    del self._partitions[topic]
            future.set_exception(error)

        self._coordinator.add_partitions_async(self.id, [topic], deadline).add_done_callback(done)
        return future, True

    def registration_error(self, error: BaseException, *, owner: bool, topic: str) -> OperationError:
        """What a send raises when registering `topic` failed with `error` (always definite)."""
        return self._registration_failure(error, owner, f"partition {topic}")

    def _registration_failure(self, error: BaseException, owner: bool, what: str) -> OperationError:
        if isinstance(error, DefiniteError) and not owner:
            return TxnRegistrationError(f"registering {what} in {self.id} failed: {error}")
        if isinstance(error, DefiniteError):
            return error
        return TxnRegistrationError(
            f"registering {what} in {self.id} failed ({type(error).__name__}: {error}); the "
            "send/ack was not written")

    def register_acked(self, topic: str, subscription: str, deadline: Deadline) -> None:
        """ADD_SUBSCRIPTION_TO_TXN for (topic, subscription), once per transaction."""
        self._register(self._subscriptions, (topic, subscription), deadline,
                       lambda: self._coordinator.add_subscription(self.id, topic, subscription,
                                                                  deadline),
                       f"subscription {subscription!r} on {topic}")

    def _register(self, table: dict[Any, Future[None]], key: object, deadline: Deadline,
                  request: Callable[[], None], what: str) -> None:
        with self._lock:
            self.check_open()
            future = table.get(key)
            owner = future is None
            if owner:
                future = Future()
                table[key] = future
        assert future is not None
        if owner:
            try:
                request()
            except OperationError as exc:
                with self._lock:
                    table.pop(key, None)
                future.set_exception(exc)
            else:
                future.set_result(None)
        if not future.wait(deadline.remaining()):
            raise NotReadyError(f"registering {what} in {self.id} took longer than the timeout")
        error = future.exception()
        if error is None:
            return
        raise self._registration_failure(error, owner, what)

    def track(self, future: Future[object]) -> None:
        """Remember an op of this transaction so `commit` waits for it."""
        with self._lock:
            self._ops.append(future)

    def note_failure(self, error: BaseException) -> None:
        """Record that an op of this transaction failed (commit will abort instead)."""
        with self._lock:
            self._failures.append(error)

    # ---- ending ---------------------------------------------------------------------

    def _deadline(self, timeout_s: float | None) -> Deadline:
        return Deadline.after(timeout_s if timeout_s is not None
                              else self._config.operation_timeout_s)

    def commit(self, timeout_s: float | None = None) -> None:
        """END_TXN COMMIT (after the transaction's in-flight sends complete).

        Raises:
            TransactionOpFailedError: an op failed, ABORT was sent instead (definite).
            InvalidStateError: already committed/aborted, or ending (definite).
            harness.errors.DefiniteError: not committed (the txn aborts or times out).
            harness.errors.IndeterminateError: the outcome is unknown.
        """
        deadline = self._deadline(timeout_s)
        with self._lock:
            if self._state not in _ENDABLE:
                raise InvalidStateError(f"cannot commit transaction {self.id}: it is "
                                        f"{self._state.value}")
            self._state = TxnState.COMMITTING
            ops = list(self._ops)
        failed = self._first_failed(ops, deadline)
        if failed is not None:
            self._abort_instead(deadline)
            raise TransactionOpFailedError(
                f"transaction {self.id} not committed: an op failed "
                f"({type(failed).__name__}: {failed}); ABORT was sent instead")
        self._end(TxnAction.COMMIT, deadline, TxnState.COMMITTED)

    def abort(self, timeout_s: float | None = None) -> None:
        """END_TXN ABORT.

        Raises:
            InvalidStateError: already committed/aborted, or ending (definite).
            harness.errors.DefiniteError / IndeterminateError: as the failure table says.
        """
        deadline = self._deadline(timeout_s)
        with self._lock:
            if self._state not in _ENDABLE:
                raise InvalidStateError(f"cannot abort transaction {self.id}: it is "
                                        f"{self._state.value}")
            self._state = TxnState.ABORTING
            ops = list(self._ops)
        for future in ops:  # as Java: let in-flight ops settle before aborting
            future.wait(deadline.remaining())
        self._end(TxnAction.ABORT, deadline, TxnState.ABORTED)

    def _first_failed(self, ops: list[Future[object]], deadline: Deadline) -> BaseException | None:
        with self._lock:
            if self._failures:
                return self._failures[0]
        for future in ops:
            if not future.wait(deadline.remaining()):
                return NotReadyError("a send of the transaction was still unanswered at the "
                                     "commit deadline")
            error = future.exception()
            if error is not None:
                return error
        return None

    def _abort_instead(self, deadline: Deadline) -> None:
        try:
            self._coordinator.end_txn(self.id, TxnAction.ABORT, deadline, self._record)
        except OperationError as exc:
            log.warning("abort of %s after a failed op failed: %s", self.id, exc)
            self._state = TxnState.ERROR if exc.definite else TxnState.UNKNOWN
        else:
            self._state = TxnState.ABORTED

    def _end(self, action: TxnAction, deadline: Deadline, success: TxnState) -> None:
        try:
            self._coordinator.end_txn(self.id, action, deadline, self._record)
        except OperationError as exc:
            self._state = TxnState.ERROR if exc.definite else TxnState.UNKNOWN
            raise
        except BaseException:
            self._state = TxnState.UNKNOWN
            raise
        self._state = success
