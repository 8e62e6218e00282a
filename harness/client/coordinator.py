"""Transaction coordinators: discovery (v4 assign topic, v5 assignment watch) and requests.

Theory of operation
-------------------
One `CoordinatorHandler` per coordinator id (`tc_id` = TxnId.most). It is a
reconnecting handler whose target depends on the path:

* v4 (PIP-31, Java `AssignTopicDiscovery`): PARTITIONED_METADATA of
  `persistent://pulsar/system/transaction_coordinator_assign` gives the number of
  coordinators; handler i looks up `...assign-partition-i` (so it follows the
  partition's owner after a failover) and connects there.
* v5 (PIP-473, Java `WatchTcAssignmentsDiscovery`): one WATCH_TC_ASSIGNMENTS on any
  broker that announces `supports_tc_metadata_discovery`; every snapshot (the first
  answer, then a push on each leader change) maps tc_id -> leader broker URL, and
  each handler is pointed straight at its leader (no lookup) and retargeted when it
  moves. A tc_id missing from a snapshot is mid-election: its handler keeps its last
  leader until the next snapshot.

After connecting, a handler sends TC_CLIENT_CONNECT_REQUEST(tc_id) when the
negotiated protocol version is above 18 (as Java does) and waits for the answer;
NotAllowed closes the handler for good, other errors retry with backoff. All
coordinator commands carry `scalable = true` on the v5 path.

Requests (`CoordinatorHandler.call`) are matched by request id. NEW_TXN goes round
robin over the coordinators; everything else is routed by `TxnId.most`. A
TransactionCoordinatorNotFound answer, or a connection lost with the request in
flight, makes the handler re-resolve its coordinator and resend the request, at most
`max_end_txn_attempts` times and never past the caller's deadline (Java resends
pending requests after reconnecting, bounded by the operation timeout).
`AttemptRecord` remembers whether any END_TXN of a transaction may have reached a
coordinator: once one may have, no later failure of that transaction's END_TXN is
definite (see `harness.client.errors`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from harness.client.connection import ClientConnection, next_request_id, next_resource_id
from harness.client.errors import (
    ConnectionLostError,
    CoordinatorNotEnabledError,
    CoordinatorNotFoundError,
    FeatureNotSupportedError,
    NotAllowedError,
    NotReadyError,
    NotSentError,
    Op,
    OperationTimeoutError,
    Outcome,
    SetupError,
    StatusOutcome,
    TransactionOutcomeUnknownError,
    outcome_of,
    server_error,
    setup_error,
    status_outcome,
)
from harness.client.futures import Future, raw_lock
from harness.client.handler import ClientContext, HandlerState, ReconnectingHandler
from harness.client.lookup import BrokerAddress
from harness.client.timers import Backoff, Deadline, spawn
from harness.errors import IndeterminateError, OperationError
from harness.wire import Command, CommandType, ServerError, TxnAction, TxnId, commands

log = logging.getLogger(__name__)

ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
"""The partitioned system topic whose partition i is owned by coordinator i's broker (v4)."""


@dataclass
class AttemptRecord:
    """Whether an END_TXN of one transaction may have reached a coordinator, and how often it
    was sent again after a connection was lost with it in flight."""

    may_have_landed: bool = False
    resends_after_loss: int = 0
    """END_TXN requests sent again (after re-resolving the coordinator) because the connection
    carrying the previous attempt was lost before its answer: the decision the coordinator may
    already have taken is asked for a second time (the chaos report counts them)."""


class CoordinatorHandler(ReconnectingHandler):
    """The connection to coordinator `tc_id` and the requests sent to it."""

    def __init__(self, ctx: ClientContext, tc_id: int, *, scalable: bool,
                 resolve: Callable[[Deadline], BrokerAddress]) -> None:
        super().__init__(ctx, f"transaction coordinator {tc_id}")
        self.tc_id = tc_id
        self.scalable = scalable
        self._resolve = resolve
        self.address: BrokerAddress | None = None

    def _attach(self, deadline: Deadline) -> ClientConnection:
        address = self._resolve(deadline)
        conn = self.ctx.pool.get(address.logical, address.physical, deadline)
        conn.add_listener(self)
        if conn.protocol_version > 18:
            request_id = next_request_id()
            command = commands.tc_client_connect_request(request_id, self.tc_id,
                                                         scalable=self.scalable)
            try:
                answer = conn.request(command, request_id, max(0.001, deadline.remaining()))
            except (ConnectionLostError, OperationTimeoutError) as exc:
                conn.remove_listener(self)
                raise SetupError(f"connecting {self.description}: {exc}", retriable=True) from None
            except (NotReadyError, NotSentError):
                conn.remove_listener(self)
                raise
            error = commands.error_of(answer)
            if error is not None:
                conn.remove_listener(self)
                raise setup_error(f"connecting {self.description} at {address.logical}",
                                  error[0], error[1])
        self.address = address
        return conn

    def _permanent_error(self, error: SetupError) -> Callable[[], OperationError] | None:
        if error.server_error is ServerError.NotAllowedError:
            message = str(error)
            return lambda: NotAllowedError(Op.TC_CONNECT, ServerError.NotAllowedError, message)
        return None

    def retarget(self, resolve: Callable[[Deadline], BrokerAddress], url: str) -> None:
        """v5: point the handler at a new leader; leaves the old connection if it moved."""
        self._resolve = resolve
        conn = self.connection
        if conn is not None and conn.logical_url != url:
            self._detach_voluntarily(conn, f"coordinator {self.tc_id} moved to {url}")

    def call(self, op: Op, build: Callable[[int], Command], deadline: Deadline,
             record: AttemptRecord | None = None, *, first_attempt: int = 1,
             last: OperationError | None = None, commits: bool | None = None) -> Command:
        """Send a coordinator request and return its successful answer.

        Args:
            op: which request (selects the rows of the failure table).
            build: makes the command for a request id (a resend gets a new id).
            record: END_TXN only: the transaction's attempt record (read and updated).
            commits: END_TXN only: whether the action is a commit (an InvalidTxnStatus answer
                naming the transaction's status is then read by `status_outcome`).
            first_attempt, last: where a request whose first attempts were made elsewhere
                (`CoordinatorClient.call_async`) goes on, and how its last one failed.

        Raises:
            harness.errors.DefiniteError: the request certainly had no effect.
            harness.errors.IndeterminateError: it may have.
        """
        record = record if record is not None else AttemptRecord()
        end_txn = op is Op.END_TXN
        max_attempts = self.ctx.config.max_end_txn_attempts
        backoff = Backoff(self.ctx.config.initial_backoff_s, self.ctx.config.max_backoff_s / 10)
        pause: threading.Event | None = None
        for attempt in range(first_attempt, max_attempts + 1):
            try:
                conn = self.ready(deadline)
            except OperationError as exc:
                last = exc
                break
            if end_txn and isinstance(last, ConnectionLostError):
                record.resends_after_loss += 1
            request_id = next_request_id()
            try:
                answer = conn.request(build(request_id), request_id,
                                      max(0.001, deadline.remaining()))
            except (NotReadyError, NotSentError) as exc:
                last = exc  # this attempt never left: definite for it
            except ConnectionLostError as exc:
                record.may_have_landed = True
                last = exc
            except OperationTimeoutError as exc:
                record.may_have_landed = True
                last = exc
                break
            else:
                error = commands.error_of(answer)
                if error is None:
                    return answer
                code, message = error
                known = (status_outcome(commits, message)
                         if end_txn and commits is not None and code is ServerError.InvalidTxnStatus else None)
                if known is StatusOutcome.DONE:
                    return answer       # the coordinator says the action's end state holds
                if known is StatusOutcome.DEFINITE:
                    raise server_error(op, code, message)
                if known is StatusOutcome.UNKNOWN:
                    record.may_have_landed = True
                if end_txn and code is ServerError.TransactionCoordinatorNotFound:
                    record.may_have_landed = True   # errors.py: a TC losing its ownership mid-commit answers this
                if outcome_of(op, code) is not Outcome.RETRY:
                    if end_txn and record.may_have_landed:
                        raise TransactionOutcomeUnknownError(
                            f"{op.value} on {self.description}: {code.name} ({message}) after an "
                            "earlier attempt that may have been applied")
                    failure = server_error(op, code, message,
                                           earlier_attempt_may_have_landed=record.may_have_landed)
                    if end_txn and failure.definite is False:
                        record.may_have_landed = True
                    raise failure
                last = server_error(op, code, message)
                self._detach_voluntarily(conn, f"{code.name}: {message}")
            if attempt == max_attempts:
                break
            delay = backoff.next()
            if deadline.remaining() <= delay:
                break
            pause = pause or threading.Event()
            pause.wait(delay)
        return self._give_up(op, last, record)

    def _give_up(self, op: Op, last: OperationError | None, record: AttemptRecord) -> Command:
        reason = str(last) if last is not None else "no attempt was possible"
        if record.may_have_landed:
            if op is Op.END_TXN:
                raise TransactionOutcomeUnknownError(
                    f"{op.value} on {self.description}: gave up after an attempt that may have "
                    f"been applied: {reason}")
            if isinstance(last, IndeterminateError):
                raise last
            raise ConnectionLostError(f"{op.value} on {self.description}: {reason}")
        if last is not None and last.definite:
            raise last
        raise NotReadyError(f"{op.value} on {self.description}: {reason}")


class Discovery(Protocol):
    """Finds the coordinators and keeps one handler per coordinator id."""

    def start(self, deadline: Deadline) -> None:
        """Discover and connect (at least one coordinator) before `deadline`."""

    def handler(self, tc_id: int) -> CoordinatorHandler | None:
        """The handler of coordinator `tc_id`, if known."""

    def next_handler(self) -> CoordinatorHandler | None:
        """The next coordinator for NEW_TXN (round robin)."""

    def handlers(self) -> list[CoordinatorHandler]:
        """Every coordinator's handler known now, by coordinator id."""

    def brokers(self, deadline: Deadline) -> dict[int, str]:
        """tc_id -> broker service URL of its current leader/owner."""

    def close(self) -> None:
        """Close every handler and watch."""


def _pick_ready(handlers: list[CoordinatorHandler], start: int) -> CoordinatorHandler | None:
    """Round robin from `start`, preferring a connected coordinator (an unreachable one
    would only make NEW_TXN wait out its deadline); the first candidate if none is."""
    if not handlers:
        return None
    count = len(handlers)
    for offset in range(count):
        handler = handlers[(start + offset) % count]
        if handler.state is HandlerState.READY:
            return handler
    return handlers[start % count]


class AssignTopicDiscovery:
    """v4: coordinators are the partitions of the assign topic."""

    def __init__(self, ctx: ClientContext) -> None:
        self._ctx = ctx
        self._handlers: list[CoordinatorHandler] = []
        self._round_robin = itertools.count()

    def start(self, deadline: Deadline) -> None:
        try:
            partitions = self._ctx.lookup.partitioned_metadata(ASSIGN_TOPIC, deadline)
        except SetupError as exc:
            raise CoordinatorNotEnabledError(
                f"cannot read {ASSIGN_TOPIC}: {exc}; enable transactions on the brokers "
                "(transactionCoordinatorEnabled=true) and initialize the coordinator metadata "
                "(pulsar initialize-transaction-coordinator-metadata)",
                server_error=exc.server_error, retriable=exc.retriable) from None
        if partitions == 0:
            raise CoordinatorNotEnabledError(
                "The broker doesn't enable the transaction coordinator, or the transaction "
                f"coordinator has not initialized: {ASSIGN_TOPIC} has no partitions; set "
                "transactionCoordinatorEnabled=true and run "
                "`pulsar initialize-transaction-coordinator-metadata`")
        self._handlers = [
            CoordinatorHandler(self._ctx, tc_id, scalable=False,
                               resolve=self._resolver(f"{ASSIGN_TOPIC}-partition-{tc_id}"))
            for tc_id in range(partitions)
        ]
        for handler in self._handlers:  # connect in the background; requests wait in ready()
            handler.connect_in_background()

    def _resolver(self, topic: str) -> Callable[[Deadline], BrokerAddress]:
        lookup = self._ctx.lookup
        return lambda deadline: lookup.lookup(topic, deadline)

    def handler(self, tc_id: int) -> CoordinatorHandler | None:
        if 0 <= tc_id < len(self._handlers):
            return self._handlers[tc_id]
        return None

    def next_handler(self) -> CoordinatorHandler | None:
        return _pick_ready(self._handlers, next(self._round_robin))

    def handlers(self) -> list[CoordinatorHandler]:
        return list(self._handlers)

    def brokers(self, deadline: Deadline) -> dict[int, str]:
        out: dict[int, str] = {}
        for handler in self._handlers:
            conn = handler.connection
            if conn is not None:
                out[handler.tc_id] = conn.logical_url
                continue
            try:
                out[handler.tc_id] = self._ctx.lookup.lookup(
                    f"{ASSIGN_TOPIC}-partition-{handler.tc_id}", deadline).logical
            except OperationError as exc:
                log.warning("owner of coordinator %d unknown: %s", handler.tc_id, exc)
        return out

    def close(self) -> None:
        for handler in self._handlers:
            handler.shutdown()


class WatchTcAssignmentsDiscovery(ReconnectingHandler):
    """v5: a WATCH_TC_ASSIGNMENTS session; snapshots point one handler per tc_id at its leader."""

    def __init__(self, ctx: ClientContext) -> None:
        super().__init__(ctx, "transaction coordinator assignment watch")
        self._ctx = ctx
        self.watch_id = next_resource_id()
        self._lock = threading.Lock()
        self._handlers: dict[int, CoordinatorHandler] = {}
        self._leaders: dict[int, str] = {}
        self.parallelism = 0
        self._round_robin = itertools.count()
        self._first: Future[None] | None = None
        self.snapshots = 0

    # ---- the watch session ---------------------------------------------------------

    def _attach(self, deadline: Deadline) -> ClientConnection:
        conn = self._ctx.pool.service_connection(deadline)
        if not conn.peer_supports("supports_tc_metadata_discovery"):
            raise FeatureNotSupportedError(
                f"{conn.physical_url} does not announce supports_tc_metadata_discovery: it is not "
                "a Pulsar 5.0 broker with transactionCoordinatorScalableTopicsEnabled=true; "
                "use txn_path='v4' for this cluster")
        first: Future[None] = Future()
        self._first = first
        conn.register_session(CommandType.WATCH_TC_ASSIGNMENTS_UPDATE, self.watch_id,
                              self._on_update)
        conn.add_listener(self)
        try:
            conn.send(commands.watch_tc_assignments(self.watch_id))
            if not first.wait(max(0.001, deadline.remaining())):
                raise SetupError("no WATCH_TC_ASSIGNMENTS_UPDATE within the timeout",
                                 retriable=True)
            first.result(0)
        except BaseException:
            self._release(conn)
            raise
        return conn

    def _release(self, conn: ClientConnection) -> None:
        conn.unregister_session(CommandType.WATCH_TC_ASSIGNMENTS_UPDATE, self.watch_id)
        conn.remove_listener(self)

    def _detached(self, conn: ClientConnection, reason: str) -> None:
        first = self._first
        if first is not None:
            first.set_exception(SetupError(f"assignment watch: {reason}", retriable=True))

    def _on_update(self, event: Command) -> None:
        error = commands.error_of(event)
        first = self._first
        if error is not None:
            failure = setup_error("WATCH_TC_ASSIGNMENTS", error[0], error[1])
            if first is not None and not first.done():
                first.set_exception(failure)
                return
            log.warning("coordinator assignment watch rejected: %s; re-opening", failure)
            conn = self.connection
            if conn is not None:
                self._detach_voluntarily(conn, str(failure))
            return
        body = event.body
        if body.HasField("snapshot"):
            self._apply(body.snapshot)
        if first is not None:
            first.set_result(None)

    def _apply(self, snapshot: object) -> None:
        leaders = {a.tc_id: a.broker_service_url for a in snapshot.assignments  # type: ignore[attr-defined]
                   if a.broker_service_url}
        with self._lock:
            self.parallelism = int(snapshot.parallelism)  # type: ignore[attr-defined]
            self._leaders.update(leaders)
            self.snapshots += 1
            changes: list[tuple[CoordinatorHandler, str, bool]] = []
            for tc_id, url in leaders.items():
                handler = self._handlers.get(tc_id)
                if handler is None:
                    handler = CoordinatorHandler(self._ctx, tc_id, scalable=True,
                                                 resolve=_fixed(url))
                    self._handlers[tc_id] = handler
                    changes.append((handler, url, True))
                else:
                    changes.append((handler, url, False))
        for handler, url, new in changes:
            if new:
                handler.connect_in_background()
            else:
                handler.retarget(_fixed(url), url)

    # ---- Discovery ------------------------------------------------------------------

    def start(self, deadline: Deadline) -> None:
        super().start(deadline)
        with self._lock:
            found = bool(self._handlers)
        if not found:
            raise CoordinatorNotEnabledError(
                "the coordinator assignment snapshot names no leaders (parallelism "
                f"{self.parallelism}); are transactionCoordinatorEnabled and "
                "transactionCoordinatorScalableTopicsEnabled on?")

    def handler(self, tc_id: int) -> CoordinatorHandler | None:
        with self._lock:
            return self._handlers.get(tc_id)

    def next_handler(self) -> CoordinatorHandler | None:
        if self.state is HandlerState.DISCONNECTED:
            self.connect_in_background()  # the watch gave up reconnecting: revive it
        with self._lock:
            count = self.parallelism
            handlers = [self._handlers[t] for t in range(count) if t in self._handlers]
        return _pick_ready(handlers, next(self._round_robin))

    def handlers(self) -> list[CoordinatorHandler]:
        with self._lock:
            return [self._handlers[t] for t in sorted(self._handlers)]

    def brokers(self, deadline: Deadline) -> dict[int, str]:
        with self._lock:
            return dict(self._leaders)

    def close(self) -> None:
        conn = self._mark_closed()
        if conn is not None:
            self._release(conn)
            with contextlib.suppress(NotReadyError, NotSentError):
                conn.send(commands.watch_tc_assignments_close(self.watch_id))
        with self._lock:
            handlers = list(self._handlers.values())
        for handler in handlers:
            handler.shutdown()


def _copy_outcome(source: Future[Command], target: Future[None]) -> None:
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(None)


def _fixed(url: str) -> Callable[[Deadline], BrokerAddress]:
    address = BrokerAddress(url, url)
    return lambda _deadline: address


class _AsyncRequest:
    """A coordinator request sent without a thread waiting for it (`CoordinatorClient.call_async`)."""

    __slots__ = ("conn", "deadline", "request_id", "result")

    def __init__(self, conn: ClientConnection, request_id: int, deadline: Deadline,
                 result: Future[Command]) -> None:
        self.conn = conn
        self.request_id = request_id
        self.deadline = deadline
        self.result = result


@dataclass
class CoordinatorClient:
    """The client's view of all coordinators: discovery on first use, routing, requests.

    `add_partitions_async` is the one request sent without a thread waiting on it (every
    transactional send to a new partition needs one, and a thread or greenlet per
    registration was a large share of the load process's CPU, issue #27). Its first attempt
    goes on the coordinator's connection when it is ready, and the answer completes a future
    in the connection's reader. Anything but a plain answer (not connected, a connection lost
    with the request in flight, an answer whose error says resend) hands the request to
    `CoordinatorHandler.call` in a thread, which resends it as the blocking path does; a
    request still unanswered at its deadline is failed as timed out by the client's
    one-second sweep (`expire`), as a blocking request would have been at its deadline.
    """

    ctx: ClientContext
    _discovery: Discovery | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: dict[int, _AsyncRequest] = field(default_factory=dict)
    _flight_lock: threading.Lock = field(default_factory=raw_lock)

    @property
    def scalable(self) -> bool:
        """Whether commands carry the PIP-473 `scalable` flag."""
        return self.ctx.config.is_v5

    def discovery(self, deadline: Deadline) -> Discovery:
        """The started discovery (starting it now if needed).

        Raises:
            SetupError, NotReadyError: discovery failed (definite: nothing transactional sent).
        """
        found = self._discovery   # started once; read without the lock afterwards
        if found is not None:
            return found
        with self._lock:
            if self._discovery is not None:
                return self._discovery
            discovery: Discovery = (WatchTcAssignmentsDiscovery(self.ctx) if self.scalable
                                    else AssignTopicDiscovery(self.ctx))
            try:
                discovery.start(deadline)
            except BaseException:
                discovery.close()
                raise
            self._discovery = discovery
            return discovery

    def _route(self, txn: TxnId, deadline: Deadline) -> CoordinatorHandler:
        handler = self.discovery(deadline).handler(txn.most)
        if handler is None:
            raise CoordinatorNotFoundError(Op.OTHER, ServerError.TransactionCoordinatorNotFound,
                                           f"no coordinator {txn.most} is known for txn {txn}")
        return handler

    def new_txn(self, ttl_ms: int, deadline: Deadline) -> TxnId:
        """NEW_TXN on the next coordinator; the id the coordinator assigned."""
        handler = self.discovery(deadline).next_handler()
        if handler is None:
            raise CoordinatorNotFoundError(Op.NEW_TXN, ServerError.TransactionCoordinatorNotFound,
                                           "no coordinator is known")
        tc_id = handler.tc_id
        answer = handler.call(Op.NEW_TXN, lambda rid: commands.new_txn(
            rid, tc_id, timeout_ms=ttl_ms, scalable=self.scalable), deadline)
        found = commands.txn_of(answer)
        if found is None:
            raise TransactionOutcomeUnknownError(
                f"NEW_TXN answer from coordinator {tc_id} carries no transaction id")
        return found

    def add_partitions(self, txn: TxnId, topics: list[str], deadline: Deadline) -> None:
        """ADD_PARTITION_TO_TXN."""
        self._route(txn, deadline).call(Op.ADD_PARTITION, lambda rid: commands.add_partition_to_txn(
            rid, txn, topics, scalable=self.scalable), deadline)

    def add_partitions_async(self, txn: TxnId, topics: list[str], deadline: Deadline) -> Future[None]:
        """ADD_PARTITION_TO_TXN without waiting: a future that completes (or fails, with the
        errors `add_partitions` raises) when the coordinator answers."""
        done: Future[None] = Future()
        try:
            handler = self._route(txn, deadline)
        except OperationError as exc:
            done.set_exception(exc)
            return done
        answer = self.call_async(handler, Op.ADD_PARTITION, lambda rid: commands.add_partition_to_txn(
            rid, txn, topics, scalable=self.scalable), deadline)
        answer.add_done_callback(lambda f: _copy_outcome(f, done))
        return done

    def call_async(self, handler: CoordinatorHandler, op: Op, build: Callable[[int], Command],
                   deadline: Deadline) -> Future[Command]:
        """`handler.call(op, build, deadline)` without a waiting thread on its common path.

        Not for END_TXN: its attempt record must see every attempt in order.
        """
        result: Future[Command] = Future()
        conn = handler.connection
        if conn is None or deadline.expired:
            self._call_in_thread(handler, op, build, deadline, result, delay_s=0.0)
            return result
        request_id = next_request_id()
        try:
            answer = conn.start_request(build(request_id), request_id)
        except (NotReadyError, NotSentError):   # nothing left: the blocking path retries
            self._call_in_thread(handler, op, build, deadline, result, delay_s=0.0)
            return result
        pending = _AsyncRequest(conn, request_id, deadline, result)
        with self._flight_lock:
            self._in_flight[request_id] = pending
        answer.add_done_callback(lambda f: self._answered(handler, op, build, pending, f))
        return result

    def _answered(self, handler: CoordinatorHandler, op: Op, build: Callable[[int], Command],
                  pending: _AsyncRequest, answer: Future[Command]) -> None:
        with self._flight_lock:
            self._in_flight.pop(pending.request_id, None)
        result = pending.result
        if result.done():   # timed out by the sweep
            return
        lost = answer.exception()
        if lost is not None:   # the connection was lost with it in flight: it may have landed
            failed: OperationError = (lost if isinstance(lost, OperationError)
                                      else ConnectionLostError(str(lost)))
            self._call_in_thread(handler, op, build, pending.deadline, result, delay_s=0.0,
                                 record=AttemptRecord(may_have_landed=True), last=failed)
            return
        command = answer.result(0)
        error = commands.error_of(command)
        if error is None:
            result.set_result(command)
            return
        code, message = error
        if outcome_of(op, code) is not Outcome.RETRY:
            result.set_exception(server_error(op, code, message))
            return
        # the coordinator moved or is not ready: re-resolve and resend, as `call` does
        handler._detach_voluntarily(pending.conn, f"{code.name}: {message}")
        self._call_in_thread(handler, op, build, pending.deadline, result,
                             delay_s=self.ctx.config.initial_backoff_s, record=AttemptRecord(),
                             last=server_error(op, code, message))

    def _call_in_thread(self, handler: CoordinatorHandler, op: Op, build: Callable[[int], Command],
                        deadline: Deadline, result: Future[Command], *, delay_s: float,
                        record: AttemptRecord | None = None,
                        last: OperationError | None = None) -> None:
        """Go on with `handler.call` in a thread: from its first attempt when none was made
        (`last` None), else from its second, as the blocking path would after `last`."""
        first_attempt = 1 if last is None else 2
        if first_attempt > self.ctx.config.max_end_txn_attempts:
            try:
                handler._give_up(op, last, record or AttemptRecord())
            except BaseException as exc:  # _give_up always raises
                result.set_exception(exc)
            return

        def run() -> None:
            try:
                if delay_s > 0 and deadline.remaining() > delay_s:
                    threading.Event().wait(delay_s)
                result.set_result(handler.call(op, build, deadline, record,
                                               first_attempt=first_attempt, last=last))
            except BaseException as exc:  # handed to the waiter
                result.set_exception(exc)

        spawn(run, f"{op.value}-{handler.tc_id}")

    def expire(self, now: float) -> None:
        """Fail the requests of `call_async` still unanswered at their deadline (the client's sweep)."""
        with self._flight_lock:
            overdue = [p for p in self._in_flight.values() if p.deadline.at <= now]
            for pending in overdue:
                del self._in_flight[pending.request_id]
        for pending in overdue:
            pending.conn.forget(pending.request_id)
            pending.result.set_exception(OperationTimeoutError(
                f"no answer from the transaction coordinator within the timeout "
                f"(request {pending.request_id} on {pending.conn.physical_url})"))

    def add_subscription(self, txn: TxnId, topic: str, subscription: str,
                         deadline: Deadline) -> None:
        """ADD_SUBSCRIPTION_TO_TXN."""
        self._route(txn, deadline).call(
            Op.ADD_SUBSCRIPTION, lambda rid: commands.add_subscription_to_txn(
                rid, txn, [(topic, subscription)], scalable=self.scalable), deadline)

    def end_txn(self, txn: TxnId, action: TxnAction, deadline: Deadline,
                record: AttemptRecord) -> None:
        """END_TXN (commit or abort), routed by `txn.most`."""
        try:
            handler = self._route(txn, deadline)
        except OperationError as exc:
            if record.may_have_landed:
                raise TransactionOutcomeUnknownError(f"END_TXN for {txn}: {exc}") from None
            raise
        handler.call(Op.END_TXN, lambda rid: commands.end_txn(
            rid, txn, action, scalable=self.scalable), deadline, record, commits=action is TxnAction.COMMIT)

    def brokers(self, deadline: Deadline) -> dict[int, str]:
        """tc_id -> the broker URL serving it."""
        return self.discovery(deadline).brokers(deadline)

    def connect_all(self, deadline: Deadline) -> dict[int, str | None]:
        """Connect every coordinator (TC_CLIENT_CONNECT, as Java's transactional client does when
        it starts); per coordinator id None once connected, else why not by `deadline`.

        Why: a v4 broker loads a coordinator (and replays its log, finishing the transactions it
        left committing or aborting) only when a client connects to it; until then its admin
        API answers "coordinator not found" for each of its transactions.
        """
        handlers = self.discovery(deadline).handlers()
        for handler in handlers:
            handler.connect_in_background()
        out: dict[int, str | None] = {}
        for handler in handlers:
            try:
                handler.ready(deadline)
                out[handler.tc_id] = None
            except OperationError as exc:
                out[handler.tc_id] = f"{type(exc).__name__}: {exc}"
        return out

    def close(self) -> None:
        """Close the discovery and every handler."""
        with self._lock:
            discovery = self._discovery
            self._discovery = None
        if discovery is not None:
            discovery.close()
