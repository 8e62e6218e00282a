"""Errors that reach users, and the definite/indeterminate split the history needs.

Two families live here because every package raises them:

* `TxnbenchError` and its subclasses are problems a user can fix (a bad scenario,
  a port in use, a missing Java). The command line prints their one-line message
  and exits with their `exit_code`; it never prints a traceback for them.
* `OperationError` is the outcome of one client operation that did not succeed.
  Its `definite` flag decides the history's completion type: a definite failure
  certainly did not take effect (`fail`), an indeterminate one may have (`info`).
  The checker's verdict depends on this split being right, so client code must
  raise the subclass that matches what it actually knows.
"""

from __future__ import annotations


class TxnbenchError(Exception):
    """A problem the user can act on; `str(err)` is the whole message."""

    exit_code: int = 2


class ConfigError(TxnbenchError):
    """A scenario file or command-line value is wrong.

    The message names the file, the key and the fix in one line.
    """

    def __init__(self, source: str, key: str, problem: str, fix: str = "") -> None:
        self.source = source
        self.key = key
        self.problem = problem
        self.fix = fix
        where = f"{source}: {key}" if key else source
        message = f"{where}: {problem}"
        if fix:
            message += f"; {fix}"
        super().__init__(message)


class EnvironmentProblem(TxnbenchError):
    """The machine lacks something (Java, a free port, Docker) or is in the wrong state."""

    exit_code = 2


class MissingTool(EnvironmentProblem):
    """A program that must be installed is not (`mvn`, `go`, a Java or JDK new enough); `tool` names it.

    Tests that need one skip on this, with its one-line message (tests/prerequisites.py)."""

    def __init__(self, message: str, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class OperationError(Exception):
    """A client operation that did not succeed.

    Attributes:
        definite: True when the operation certainly did not take effect.
    """

    definite: bool = False
    topic_terminated: bool = False
    """True when the topic refused the write because it is terminated: it never takes one again, so
    a load stops choosing it (a sealed v5 segment is not its topic's end: its client moves on)."""

    @property
    def error_name(self) -> str:
        """The error class and message as the history's `error` field records it."""
        return f"{type(self).__name__}: {self}"


class DefiniteError(OperationError):
    """The operation certainly did not take effect (history type `fail`)."""

    definite = True


class IndeterminateError(OperationError):
    """The operation may or may not have taken effect (history type `info`)."""

    definite = False


def is_definite(exc: BaseException) -> bool:
    """Whether `exc` proves the operation had no effect.

    Anything that is not an `OperationError` (a bug, a cancelled greenlet) is
    indeterminate: claiming `fail` without proof could hide a real anomaly.
    """
    return isinstance(exc, OperationError) and exc.definite
