"""Reconnecting handlers: the connection life cycle shared by producers, consumers and coordinators.

Theory of operation
-------------------
A handler (one producer on one topic, one consumer on one topic, one coordinator
handler for one tc_id) is attached to at most one `ClientConnection` at a time. Its
`HandlerState`:

    IDLE --start/ready--> CONNECTING --attach ok--> READY
    READY --connection lost / broker closed it--> CONNECTING (a reconnect thread runs)
    CONNECTING --gave up after reconnect_timeout_s--> DISCONNECTED
    DISCONNECTED --the next operation's ready()--> CONNECTING
    any --permanent refusal (topic terminated, not allowed)--> TERMINATED
    any --close()--> CLOSED

At most one reconnect thread runs per handler. It calls the subclass's `_attach`
(lookup, connect, register, PRODUCER/SUBSCRIBE/TC_CLIENT_CONNECT ...) with exponential
backoff, and stops at success, a permanent error, `close()`, or `reconnect_timeout_s`.
No loop is unbounded: a handler that gave up stays DISCONNECTED until an operation
needs it again, and that operation waits at most its own deadline.

`ready(deadline)` is how operations get a connection: it returns at once when READY,
or waits (starting a reconnect if none runs) and raises `NotReadyError` (definite:
nothing was sent) at the deadline. When the attached connection ends, `_detached` is
called once so the subclass can fail its in-flight operations.
"""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from harness.client.config import ClientConfig
from harness.client.connection import ClientConnection, ConnectionPool
from harness.client.errors import AlreadyClosedError, NotReadyError, SetupError
from harness.client.lookup import LookupService
from harness.client.timers import Backoff, Deadline, Scheduler, spawn
from harness.errors import OperationError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientContext:
    """The shared parts of one client every handler uses."""

    config: ClientConfig
    pool: ConnectionPool
    lookup: LookupService
    scheduler: Scheduler


class HandlerState(Enum):
    """Where a handler is in its connection life cycle (see the module docstring)."""

    IDLE = "idle"
    CONNECTING = "connecting"
    READY = "ready"
    DISCONNECTED = "disconnected"
    TERMINATED = "terminated"
    CLOSED = "closed"


class ReconnectingHandler(abc.ABC):
    """Base class: keeps one attached connection, reconnecting with bounded backoff."""

    def __init__(self, ctx: ClientContext, description: str) -> None:
        self.ctx = ctx
        self.description = description
        self._cond = threading.Condition()
        self._state = HandlerState.IDLE
        self._conn: ClientConnection | None = None
        self._reconnecting = False
        self._stop = threading.Event()
        self._last_error: BaseException | None = None
        self._terminal: Callable[[], OperationError] | None = None

    # ---- subclass hooks -------------------------------------------------------------

    @abc.abstractmethod
    def _attach(self, deadline: Deadline) -> ClientConnection:
        """Find the broker, connect, register and create the resource there.

        Raises:
            SetupError: retriable or not (`retriable`); a non-retriable one that
                `_permanent_error` accepts makes the handler TERMINATED.
            NotReadyError: the broker was unreachable (retriable).
        """

    def _detached(self, conn: ClientConnection, reason: str) -> None:  # noqa: B027 (optional hook)
        """The attached connection ended: fail in-flight operations. Must not block."""

    def _on_ready(self, conn: ClientConnection) -> None:  # noqa: B027 (optional hook)
        """Attached (again). Runs in the thread that attached."""

    def _permanent_error(self, error: SetupError) -> Callable[[], OperationError] | None:
        """For a refusal that no retry can fix, the factory of the error operations raise."""
        return None

    # ---- state ----------------------------------------------------------------------

    @property
    def state(self) -> HandlerState:
        """The current state."""
        return self._state

    @property
    def connection(self) -> ClientConnection | None:
        """The attached connection, if READY."""
        return self._conn if self._state is HandlerState.READY else None

    def start(self, deadline: Deadline) -> None:
        """Attach now, in this thread, retrying retriable errors until the deadline.

        Raises:
            SetupError, NotReadyError: the last error when the deadline passed or a
                permanent error occurred.
        """
        with self._cond:
            if self._state is not HandlerState.IDLE:
                return
            self._state = HandlerState.CONNECTING
            self._reconnecting = True
        self._connect_loop(deadline, raise_errors=True)

    def ready(self, deadline: Deadline) -> ClientConnection:
        """The attached connection, waiting for a (re)connect until `deadline`.

        Raises:
            AlreadyClosedError: the handler was closed.
            OperationError: the handler is TERMINATED (e.g. TopicTerminatedError).
            NotReadyError: not attached before the deadline.
        """
        # The common case without the condition's lock (every send and request asks): a
        # connection read here may close at once, as one returned under the lock may.
        conn = self._conn
        if self._state is HandlerState.READY and conn is not None:
            return conn
        with self._cond:
            while True:
                state = self._state
                if state is HandlerState.READY and self._conn is not None:
                    return self._conn
                if state is HandlerState.CLOSED:
                    raise AlreadyClosedError(f"{self.description} is closed")
                if state is HandlerState.TERMINATED and self._terminal is not None:
                    raise self._terminal()
                if state in (HandlerState.IDLE, HandlerState.DISCONNECTED):
                    self._state = HandlerState.CONNECTING
                    self._start_reconnect_locked()
                remaining = deadline.remaining()
                if remaining <= 0:
                    detail = f" (last error: {self._last_error})" if self._last_error else ""
                    raise NotReadyError(f"{self.description} not connected within the "
                                        f"timeout{detail}")
                self._cond.wait(remaining)

    def connect_in_background(self) -> None:
        """Start attaching in a background thread unless attached or already trying."""
        with self._cond:
            if self._state in (HandlerState.IDLE, HandlerState.DISCONNECTED):
                self._state = HandlerState.CONNECTING
                self._start_reconnect_locked()

    def _detach_voluntarily(self, conn: ClientConnection, reason: str) -> None:
        """Leave `conn` (still open, maybe shared) and attach anew, e.g. to a moved coordinator."""
        with self._cond:
            if conn is not self._conn or self._state is not HandlerState.READY:
                return
            self._conn = None
            self._state = HandlerState.CONNECTING
        log.info("%s leaves %s: %s", self.description, conn.physical_url, reason)
        self._release(conn)
        with self._cond:
            if self._state is HandlerState.CONNECTING:
                self._start_reconnect_locked()

    def connection_closed(self, conn: ClientConnection) -> None:
        """The attached connection ended (connection listener)."""
        self._lost(conn, conn.close_reason or "connection closed")

    def _lost(self, conn: ClientConnection, reason: str) -> None:
        with self._cond:
            if conn is not self._conn:
                return
            self._conn = None
            if self._state in (HandlerState.CLOSED, HandlerState.TERMINATED):
                return
            self._state = HandlerState.CONNECTING
        log.info("%s lost its connection: %s; reconnecting", self.description, reason)
        try:
            self._detached(conn, reason)
        finally:
            with self._cond:
                if self._state is HandlerState.CONNECTING:
                    self._start_reconnect_locked()

    def _terminate(self, error: Callable[[], OperationError]) -> None:
        with self._cond:
            if self._state is HandlerState.CLOSED:
                return
            self._terminal = error
            self._state = HandlerState.TERMINATED
            self._cond.notify_all()

    def _start_reconnect_locked(self) -> None:
        if self._reconnecting or self._stop.is_set():
            return
        self._reconnecting = True
        deadline = Deadline.after(self.ctx.config.reconnect_timeout_s)
        spawn(lambda: self._connect_loop(deadline, raise_errors=False),
              f"reconnect-{self.description}")

    def _connect_loop(self, deadline: Deadline, *, raise_errors: bool) -> None:
        config = self.ctx.config
        backoff = Backoff(config.initial_backoff_s, config.max_backoff_s)
        try:
            while not self._stop.is_set():
                try:
                    conn = self._attach(deadline.earlier(config.operation_timeout_s))
                except OperationError as exc:  # setup refusals, unreachable, write failures
                    self._last_error = exc
                    permanent = (self._permanent_error(exc)
                                 if isinstance(exc, SetupError) and not exc.retriable else None)
                    if permanent is not None:
                        self._terminate(permanent)
                        if raise_errors:
                            raise
                        return
                    if isinstance(exc, SetupError) and not exc.retriable and raise_errors:
                        with self._cond:
                            self._state = HandlerState.DISCONNECTED
                            self._cond.notify_all()
                        raise
                    delay = backoff.next()
                    if deadline.remaining() <= delay:
                        with self._cond:
                            if self._state is HandlerState.CONNECTING:
                                self._state = HandlerState.DISCONNECTED
                            self._cond.notify_all()
                        log.warning("%s gave up reconnecting: %s", self.description, exc)
                        if raise_errors:
                            raise
                        return
                    self._stop.wait(delay)
                    continue
                with self._cond:
                    if self._state is not HandlerState.CONNECTING or self._stop.is_set():
                        abandoned = True
                    else:
                        abandoned = False
                        self._conn = conn
                        self._state = HandlerState.READY
                        self._last_error = None
                if abandoned:
                    self._release(conn)
                    return
                if conn.closed:  # it died between attach and now; its close notice was ignored
                    with self._cond:
                        if self._conn is conn:
                            self._conn = None
                            self._state = HandlerState.CONNECTING
                    continue
                self._on_ready(conn)
                with self._cond:
                    self._cond.notify_all()
                return
            if raise_errors:
                raise AlreadyClosedError(f"{self.description} is closed")
        finally:
            with self._cond:
                self._reconnecting = False
                self._cond.notify_all()

    def _release(self, conn: ClientConnection) -> None:
        """Undo a registration made by `_attach` that is no longer wanted."""
        conn.remove_listener(self)

    def _mark_closed(self) -> ClientConnection | None:
        """Enter CLOSED; returns the connection that was attached, if any."""
        self._stop.set()
        with self._cond:
            conn = self._conn
            self._conn = None
            self._state = HandlerState.CLOSED
            self._cond.notify_all()
        return conn

    def shutdown(self) -> None:
        """Enter CLOSED and leave the attached connection (no farewell command)."""
        conn = self._mark_closed()
        if conn is not None:
            self._release(conn)
