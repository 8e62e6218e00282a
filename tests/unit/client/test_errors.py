"""The definite/indeterminate table: each row the history depends on."""

from __future__ import annotations

import pytest

from harness.client import errors
from harness.client.errors import Op, Outcome, outcome_of, server_error
from harness.errors import DefiniteError, IndeterminateError, is_definite
from harness.wire import ServerError as E


@pytest.mark.parametrize(("op", "code", "definite"), [
    (Op.SEND, E.ChecksumError, True),
    (Op.SEND, E.TopicTerminatedError, True),
    (Op.SEND, E.TransactionNotFound, True),
    (Op.SEND, E.NotAllowedError, True),
    (Op.SEND, E.ServiceNotReady, True),
    (Op.SEND, E.PersistenceError, False),
    (Op.SEND, E.UnknownError, False),
    (Op.SEND, E.MetadataError, False),
    (Op.ACK, E.TransactionConflict, True),
    (Op.ACK, E.TransactionNotFound, True),
    (Op.ACK, E.ConsumerNotFound, True),
    (Op.ACK, E.PersistenceError, False),
    (Op.ACK, E.UnknownError, False),
    (Op.NEW_TXN, E.UnknownError, True),
    (Op.ADD_PARTITION, E.TransactionNotFound, True),
    (Op.ADD_SUBSCRIPTION, E.UnknownError, True),
    (Op.END_TXN, E.NotAllowedError, True),
    (Op.END_TXN, E.UnknownError, False),
    (Op.END_TXN, E.PersistenceError, False),
    (Op.END_TXN, E.ServiceNotReady, False),
])
def test_server_errors_follow_the_table(op: Op, code: E, definite: bool) -> None:
    error = server_error(op, code, "boom")
    assert is_definite(error) is definite
    assert isinstance(error, DefiniteError if definite else IndeterminateError)
    assert code.name in str(error)


def test_specific_classes_for_the_codes_callers_branch_on() -> None:
    assert isinstance(server_error(Op.SEND, E.TopicTerminatedError, ""), errors.TopicTerminatedError)
    assert isinstance(server_error(Op.ACK, E.TransactionConflict, ""),
                      errors.TransactionConflictError)
    assert isinstance(server_error(Op.END_TXN, E.TransactionCoordinatorNotFound, ""),
                      errors.CoordinatorNotFoundError)


def test_coordinator_not_found_is_a_retry_for_every_coordinator_request() -> None:
    for op in (Op.NEW_TXN, Op.ADD_PARTITION, Op.ADD_SUBSCRIPTION, Op.END_TXN):
        assert outcome_of(op, E.TransactionCoordinatorNotFound) is Outcome.RETRY


@pytest.mark.parametrize("code", [E.InvalidTxnStatus, E.TransactionNotFound])
def test_end_txn_status_errors_depend_on_earlier_attempts(code: E) -> None:
    first = server_error(Op.END_TXN, code, "gone")
    assert first.definite
    after_unknown = server_error(Op.END_TXN, code, "gone", earlier_attempt_may_have_landed=True)
    assert isinstance(after_unknown, errors.TransactionOutcomeUnknownError)
    assert not after_unknown.definite


def test_failure_points_have_the_documented_split() -> None:
    for cls in (errors.NotReadyError, errors.NotSentError, errors.InvalidStateError,
                errors.AlreadyClosedError, errors.TransactionOpFailedError, errors.SetupError):
        assert cls("x").definite
    for unknown in (errors.ConnectionLostError, errors.OperationTimeoutError,
                    errors.TransactionOutcomeUnknownError):
        assert not unknown("x").definite


def test_error_name_is_what_the_history_records() -> None:
    error = server_error(Op.ACK, E.TransactionConflict, "held by 1:2")
    assert error.error_name.startswith("TransactionConflictError: ack rejected by the broker")
