"""The client's error model: what each failure proves about the operation's effect.

Theory of operation
-------------------
Every client operation that the history records (txn-open, send, ack, txn-commit,
txn-abort) ends in success or in exactly one exception from this module. Each
exception subclasses `harness.errors.DefiniteError` (the history writes `fail`: the
operation certainly had no effect) or `harness.errors.IndeterminateError` (`info`:
it may have had an effect). The checker trusts this split, so an error is definite
only when the client can *prove* the broker did not apply the request. Two things
decide it:

1. **Where it failed.** A request that never left the client (no connection, the
   handler was not ready within the timeout, the socket write raised, a local state
   check failed) is definite: the broker cannot act on bytes it never received. A
   frame handed whole to the kernel may have been processed, so a connection lost
   or a timeout after that point is indeterminate.
2. **What the broker answered.** `FAILURE_TABLE` maps (operation, ServerError) to an
   `Outcome`. The rows and why:

=================  ==========================================  ===========  =======================================================
operation          server error                                outcome      why
=================  ==========================================  ===========  =======================================================
send               ChecksumError                               definite     the broker verifies the CRC before appending and answers SEND_ERROR
send               TopicTerminatedError                        definite     a terminated topic (a sealed v5 segment) rejects the write before the
                                                                            append; a scalable producer retries it on the new segment
send               NotAllowedError, TransactionNotFound,       definite     the transaction buffer rejects the write before appending it
                   InvalidTxnStatus, TransactionConflict
send               ProducerBlockedQuota*, TopicNotFound,       definite     admission checks run before the append
                   ServiceNotReady, TooManyRequests,
                   ProducerFenced, ProducerBusy
send               PersistenceError, MetadataError, Unknown,   indeterminate  the append itself failed; BookKeeper (or our ledger store) may
                   anything else                                            hold the entry, and a later reader may see it
ack                TransactionConflict                         definite     the pending-ack store refuses the ack (already acked, or held by another
                                                                            transaction) without writing anything
ack                NotAllowedError, TransactionNotFound,       definite     rejected by validation before the cursor or pending-ack log is touched
                   InvalidTxnStatus, ConsumerNotFound,
                   SubscriptionNotFound, TopicNotFound,
                   ServiceNotReady
ack                PersistenceError, MetadataError, Unknown,   indeterminate  the pending-ack log or cursor write failed midway
                   anything else
new-txn            TransactionCoordinatorNotFound              retry        the TC is not (yet) loaded there: re-discover and resend, as Java does
new-txn            anything else                               definite     an id was not handed out; a TC-side orphan only times out, invisible
add-partition,     TransactionCoordinatorNotFound              retry        as new-txn
add-subscription   anything else                               definite     the SEND/ACK that needed the registration is never sent, so the
                                                                            enclosing send/ack definitely had no effect
end-txn            TransactionCoordinatorNotFound              retry        resend (bounded), as Java does; but the attempt may have been
                                                                            applied: a TC that loses its ownership after logging COMMITTING
                                                                            answers this, and its next owner finishes the commit (seen on
                                                                            Pulsar 4.0.8, #47), so later answers are read as after a landed one
end-txn            InvalidTxnStatus naming the status           by status    "... but it is in <STATUS> status": the TC's own word decides
                                                                            (`status_outcome`): the action's end state is success, the other
                                                                            decision's states definite, its own in-between state indeterminate
end-txn            InvalidTxnStatus, TransactionNotFound       definite if  on the first delivery the TC knows the transaction only as aborted
                                                               no earlier   or timed out (commit) / already aborting (abort); after an attempt that
                                                               attempt may  may have been applied, a commit that succeeded is also "not found"
                                                               have landed, (v4 forgets finished txns) or "invalid status", so the client no
                                                               else         longer knows the outcome
                                                               indeterminate
end-txn            NotAllowedError                             definite     refused by the TC's validation before any state change
end-txn            anything else (Unknown, Persistence,        indeterminate  the TC may have logged COMMITTING and will finish the decision on
                   Metadata, ServiceNotReady ...)                           recovery (v4), or CAS'd the header (v5)
setup ops          any (lookup, producer, subscribe,           definite     they change nothing the history records; `retriable` marks the
(lookup, create,   tc-connect, watches)                                     codes worth another attempt (ServiceNotReady, TooManyRequests,
subscribe ...)                                                              MetadataError, ProducerBusy, ConsumerBusy, TCNotFound)
=================  ==========================================  ===========  =======================================================

Failure points that are not server errors:

=====================================================  =============  ==============================================
failure point                                          outcome        exception
=====================================================  =============  ==============================================
no connection / handler not ready before the deadline  definite       `NotReadyError`
socket write raised (frame not fully handed over)      definite       `NotSentError`
local check (txn not open, producer/consumer closed)   definite       `InvalidStateError`, `AlreadyClosedError`
commit while an earlier op of the txn failed           definite       `TransactionOpFailedError` (ABORT is sent instead)
connection lost after the frame was written            indeterminate  `ConnectionLostError`
no answer before the deadline after writing            indeterminate  `OperationTimeoutError`
END_TXN retried after an attempt that may have landed  indeterminate  `TransactionOutcomeUnknownError`
=====================================================  =============  ==============================================

In-flight sends on a dropped connection are failed as `ConnectionLostError` and are
*not* resent on the new connection (the Java client resends them, relying on broker
deduplication, which a benchmark cluster usually runs without; resending would turn
one `info` into a possible duplicate). Coordinator requests are different: NEW_TXN,
ADD_PARTITION_TO_TXN and ADD_SUBSCRIPTION_TO_TXN are idempotent or harmless to
repeat and are resent after the coordinator handler reconnects; END_TXN is resent at
most `ClientConfig.max_end_txn_attempts` times, and from the moment an attempt may
have landed every later failure is indeterminate.
"""

from __future__ import annotations

import re
from enum import Enum

from harness.errors import DefiniteError, IndeterminateError, OperationError
from harness.wire import ServerError


class Op(Enum):
    """The client operations whose failures the table classifies."""

    SEND = "send"
    ACK = "ack"
    NEW_TXN = "new-txn"
    ADD_PARTITION = "add-partition"
    ADD_SUBSCRIPTION = "add-subscription"
    END_TXN = "end-txn"
    LOOKUP = "lookup"
    CREATE_PRODUCER = "create-producer"
    SUBSCRIBE = "subscribe"
    TC_CONNECT = "tc-connect"
    WATCH = "watch"
    OTHER = "other"


class Outcome(Enum):
    """What a server error proves about the request."""

    DEFINITE = "definite"
    INDETERMINATE = "indeterminate"
    RETRY = "retry"  # definite for this attempt; the caller re-discovers and resends
    STATUS_DEPENDS = "status-depends"  # END_TXN: definite unless an earlier attempt may have landed


E = ServerError

_SEND_DEFINITE = (
    E.ChecksumError, E.TopicTerminatedError, E.NotAllowedError, E.TransactionNotFound,
    E.InvalidTxnStatus, E.TransactionConflict, E.ProducerBlockedQuotaExceededError,
    E.ProducerBlockedQuotaExceededException, E.TopicNotFound, E.ServiceNotReady,
    E.TooManyRequests, E.ProducerFenced, E.ProducerBusy, E.InvalidTopicName,
    E.IncompatibleSchema, E.AuthorizationError, E.AuthenticationError,
)
_ACK_DEFINITE = (
    E.TransactionConflict, E.NotAllowedError, E.TransactionNotFound, E.InvalidTxnStatus,
    E.ConsumerNotFound, E.SubscriptionNotFound, E.TopicNotFound, E.ServiceNotReady,
    E.AuthorizationError, E.AuthenticationError,
)

FAILURE_TABLE: dict[tuple[Op, ServerError], Outcome] = {
    **{(Op.SEND, code): Outcome.DEFINITE for code in _SEND_DEFINITE},
    **{(Op.ACK, code): Outcome.DEFINITE for code in _ACK_DEFINITE},
    (Op.NEW_TXN, E.TransactionCoordinatorNotFound): Outcome.RETRY,
    (Op.ADD_PARTITION, E.TransactionCoordinatorNotFound): Outcome.RETRY,
    (Op.ADD_SUBSCRIPTION, E.TransactionCoordinatorNotFound): Outcome.RETRY,
    (Op.END_TXN, E.TransactionCoordinatorNotFound): Outcome.RETRY,
    (Op.END_TXN, E.InvalidTxnStatus): Outcome.STATUS_DEPENDS,
    (Op.END_TXN, E.TransactionNotFound): Outcome.STATUS_DEPENDS,
    (Op.END_TXN, E.NotAllowedError): Outcome.DEFINITE,
}
"""(operation, server error) -> outcome; the module docstring explains every row."""

DEFAULT_OUTCOME: dict[Op, Outcome] = {
    Op.SEND: Outcome.INDETERMINATE,
    Op.ACK: Outcome.INDETERMINATE,
    Op.NEW_TXN: Outcome.DEFINITE,
    Op.ADD_PARTITION: Outcome.DEFINITE,
    Op.ADD_SUBSCRIPTION: Outcome.DEFINITE,
    Op.END_TXN: Outcome.INDETERMINATE,
}
"""The outcome of a server error that has no row of its own; setup ops default to definite."""

RETRIABLE_SETUP_ERRORS = frozenset({
    E.ServiceNotReady, E.TooManyRequests, E.MetadataError, E.ProducerBusy, E.ConsumerBusy,
    E.TransactionCoordinatorNotFound, E.PersistenceError, E.UnknownError,
})
"""Errors of setup operations (lookup, create producer, subscribe, tc-connect) worth retrying."""


def outcome_of(op: Op, error: ServerError) -> Outcome:
    """The row of `FAILURE_TABLE` for (op, error), or the operation's default."""
    found = FAILURE_TABLE.get((op, error))
    if found is not None:
        return found
    return DEFAULT_OUTCOME.get(op, Outcome.DEFINITE)


# ---- definite ---------------------------------------------------------------------


class NotReadyError(DefiniteError):
    """No usable connection before the deadline; the request was never written."""


class NotSentError(DefiniteError):
    """Writing the request failed before its frame was fully handed to the kernel."""


class InvalidStateError(DefiniteError):
    """A local check refused the operation (e.g. the transaction is not open)."""


class AlreadyClosedError(DefiniteError):
    """The producer, consumer or client was closed; nothing was sent."""


class TransactionOpFailedError(DefiniteError):
    """Commit refused because a send or ack of the transaction failed; ABORT was sent instead."""


class ServerRejectedError(DefiniteError):
    """The broker answered with an error that proves the request had no effect.

    Attributes:
        server_error: the `ServerError` code.
        op: the client operation.
    """

    def __init__(self, op: Op, server_error: ServerError, message: str) -> None:
        self.op = op
        self.server_error = server_error
        super().__init__(f"{op.value} rejected by the broker: {server_error.name}: {message}")


class TopicTerminatedError(ServerRejectedError):
    """The topic (or v5 segment) is terminated/sealed and takes no more writes."""

    topic_terminated = True


class TransactionConflictError(ServerRejectedError):
    """An ack conflicts with another transaction's (or an earlier) ack."""


def is_ack_conflict(exc: BaseException | None) -> bool:
    """The broker refused an ack because another transaction had acked (or held) the message: Pulsar's
    ack-conflict rule at work, expected whenever transactions compete for messages (the load counts
    them apart from its errors)."""
    return isinstance(exc, TransactionConflictError) and exc.op is Op.ACK


class TransactionNotFoundError(ServerRejectedError):
    """The coordinator or participant does not know the transaction (it timed out or ended)."""


class InvalidTxnStatusError(ServerRejectedError):
    """The transaction is not in a state that allows the request."""


class CoordinatorNotFoundError(ServerRejectedError):
    """No transaction coordinator answered for the id (after the bounded retries)."""


class NotAllowedError(ServerRejectedError):
    """The broker refused the request as not allowed."""


class SetupError(DefiniteError):
    """A lookup, producer/consumer creation, or discovery step failed; nothing the history records changed.

    Attributes:
        server_error: the broker's error code when it answered with one.
        retriable: whether trying again may help.
    """

    def __init__(self, message: str, *, server_error: ServerError | None = None,
                 retriable: bool = False) -> None:
        self.server_error = server_error
        self.retriable = retriable
        super().__init__(message)


class CoordinatorNotEnabledError(SetupError):
    """The cluster has no transaction coordinators the client can discover."""


class FeatureNotSupportedError(SetupError):
    """The broker lacks a protocol feature the requested operation needs (e.g. v5 discovery)."""


# ---- indeterminate ----------------------------------------------------------------


class ConnectionLostError(IndeterminateError):
    """The connection dropped after the request was written; it may have been applied."""


class OperationTimeoutError(IndeterminateError):
    """No answer before the deadline, after the request was written."""


class ServerFailedError(IndeterminateError):
    """The broker answered with an error that does not prove the request had no effect.

    Attributes:
        server_error: the `ServerError` code.
        op: the client operation.
    """

    def __init__(self, op: Op, server_error: ServerError, message: str) -> None:
        self.op = op
        self.server_error = server_error
        super().__init__(f"{op.value} failed at the broker: {server_error.name}: {message}")


class TransactionOutcomeUnknownError(IndeterminateError):
    """END_TXN ended without a decisive answer after an attempt that may have been applied."""


# ---- construction -----------------------------------------------------------------

_DEFINITE_CLASSES: dict[ServerError, type[ServerRejectedError]] = {
    E.TopicTerminatedError: TopicTerminatedError,
    E.TransactionConflict: TransactionConflictError,
    E.TransactionNotFound: TransactionNotFoundError,
    E.InvalidTxnStatus: InvalidTxnStatusError,
    E.TransactionCoordinatorNotFound: CoordinatorNotFoundError,
    E.NotAllowedError: NotAllowedError,
}


def server_error(op: Op, code: ServerError, message: str, *,
                 earlier_attempt_may_have_landed: bool = False) -> OperationError:
    """The exception for a broker's error answer to `op`, following `FAILURE_TABLE`.

    Args:
        earlier_attempt_may_have_landed: END_TXN only: an earlier attempt of this
            transaction's END_TXN was written and not definitively refused.
    """
    outcome = outcome_of(op, code)
    if outcome is Outcome.STATUS_DEPENDS:
        outcome = Outcome.INDETERMINATE if earlier_attempt_may_have_landed else Outcome.DEFINITE
        if outcome is Outcome.INDETERMINATE:
            return TransactionOutcomeUnknownError(
                f"{op.value}: {code.name} after an earlier attempt that may have been applied: "
                f"{message}"
            )
    if outcome is Outcome.INDETERMINATE:
        return ServerFailedError(op, code, message)
    cls = _DEFINITE_CLASSES.get(code, ServerRejectedError)
    return cls(op, code, message)


_STATUS_IN_MESSAGE = re.compile(r"but it is in (\w+) status")


class StatusOutcome(Enum):
    """What an END_TXN refused with InvalidTxnStatus says about the transaction's end."""

    DONE = "done"                # already in the state the action leads to: the action's effect holds
    DEFINITE = "definite"        # the other decision was taken: this action definitely had no effect
    UNKNOWN = "unknown"          # still between (COMMITTING for a commit): decided, maybe never finished


def status_outcome(action_commits: bool, message: str) -> StatusOutcome | None:
    """Read the coordinator's status out of an InvalidTxnStatus answer to END_TXN (Pulsar's
    `InvalidTxnStatusException`: "Expect Txn `(2,46)` to be in COMMITTING status but it is in
    COMMITTED status"); None when the message names no status this knows.

    Why: a retried commit whose first attempt was applied behind an answer the client took for
    "not applied" is refused this way; the status, not the attempt record, is the truth (on
    Pulsar 4.0.8 a commit so refused had committed, and was recorded as aborted, #47)."""
    found = _STATUS_IN_MESSAGE.search(message)
    if found is None:
        return None
    status = found.group(1).upper()
    done, between = ("COMMITTED", "COMMITTING") if action_commits else ("ABORTED", "ABORTING")
    other = {"ABORTED", "ABORTING", "TIMEOUT"} if action_commits else {"COMMITTED", "COMMITTING"}
    if status == done:
        return StatusOutcome.DONE
    if status in other:
        return StatusOutcome.DEFINITE
    if status == between:
        return StatusOutcome.UNKNOWN
    return None


def setup_error(what: str, code: ServerError, message: str) -> SetupError:
    """A definite setup failure for a broker error answer, flagged retriable per the table."""
    return SetupError(f"{what}: {code.name}: {message}", server_error=code,
                      retriable=code in RETRIABLE_SETUP_ERRORS)


__all__ = [
    "DEFAULT_OUTCOME",
    "FAILURE_TABLE",
    "RETRIABLE_SETUP_ERRORS",
    "AlreadyClosedError",
    "ConnectionLostError",
    "CoordinatorNotEnabledError",
    "CoordinatorNotFoundError",
    "FeatureNotSupportedError",
    "InvalidStateError",
    "InvalidTxnStatusError",
    "NotAllowedError",
    "NotReadyError",
    "NotSentError",
    "Op",
    "OperationTimeoutError",
    "Outcome",
    "ServerFailedError",
    "ServerRejectedError",
    "SetupError",
    "StatusOutcome",
    "TopicTerminatedError",
    "TransactionConflictError",
    "TransactionNotFoundError",
    "TransactionOpFailedError",
    "TransactionOutcomeUnknownError",
    "is_ack_conflict",
    "outcome_of",
    "server_error",
    "setup_error",
    "status_outcome",
]
