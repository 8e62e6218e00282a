"""The history recorder: one writer's file, written line by line.

Theory of operation. An operation is recorded in two lines: the invocation,
written and flushed *before* the operation starts, and its completion, written
when the outcome is known. If the process dies in between, the file ends with
an invocation without completion, which the analysis treats as `info`. Lines
are appended under a lock (threads and, once gevent has patched `threading`,
greenlets), each handed to the OS immediately in one unbuffered write: a `kill -9` loses nothing that
was written, and at worst leaves a torn last line that the reader skips.

The recorder enforces the contract's invariants instead of trusting callers:
one outstanding operation per process, a completion only for an invocation of
this recorder, and no writes after close. A failed write is not swallowed: it
raises, and `write_error` stays set so the orchestrator can fail the run.
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import is_definite
from harness.history.clock import RunClock
from harness.history.schema import SINGLE_EVENT_FS, Op, OpF, OpType


def _raw_lock() -> threading.Lock:
    """The interpreter's own lock, also after gevent patched `threading` (whose Lock is Python
    code, taken twice per operation here; issue #27). A line's write never switches greenlets
    (a regular file is not cooperative), so no greenlet can find it held."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        return monkey.get_original("_thread", "allocate_lock")()
    return _thread.allocate_lock()


class HistoryMisuse(RuntimeError):
    """A caller broke the history contract (a bug in a workload or the nemesis)."""


class HistoryWriteError(RuntimeError):
    """The history file could not be written; the run's history is incomplete."""


_OP_FIELDS = ("txn", "topic", "segment", "subscription", "key", "value", "inputs", "msg_id", "extra")
_ALLOWED_FIELDS = frozenset((*_OP_FIELDS, "path", "error"))


@dataclass
class Invocation:
    """An operation in flight. Set `result` fields inside `recorder.operation()`."""

    op: Op
    result: dict[str, Any] = field(default_factory=dict)
    completed: bool = False

    @property
    def process(self) -> str:
        return self.op.process


class HistoryRecorder:
    """Appends one writer's operations to `<directory>/<writer>.jsonl`.

    Args:
        directory: the run's history folder.
        run: the run id written on every line.
        writer: this file's writer name, e.g. `w0`, `nemesis`, `drain`.
        clock: the run clock shared by all writers on this host.
        txn_path: the transaction path written on lines that do not give their own.
    """

    def __init__(self, directory: Path, run: str, writer: str, clock: RunClock, txn_path: str = "") -> None:
        if not writer or "/" in writer or writer.startswith("."):
            raise HistoryMisuse(f"bad writer name {writer!r}")
        directory.mkdir(parents=True, exist_ok=True)
        self.file_path = directory / f"{writer}.jsonl"
        # 'x': one file per writer, never reopened or overwritten. Unbuffered bytes: a line is
        # one write(2) of its encoded bytes, on the OS at once, with no text layer to flush.
        self._file = open(self.file_path, "xb", buffering=0)  # noqa: SIM115 - closed in close()
        self.run = run
        self.writer = writer
        self.clock = clock
        self.txn_path = txn_path
        self.write_error: BaseException | None = None
        self._lock = _raw_lock()   # held for one line's write, never across a wait
        self._index = 0
        self._outstanding: dict[str, Invocation] = {}
        self._closed = False

    # ---- public API -------------------------------------------------------------------------

    def invoke(self, process: str, f: OpF, **fields: Any) -> Invocation:
        """Record and flush the invocation of `f` by `process`; call before starting it."""
        if f in SINGLE_EVENT_FS:
            raise HistoryMisuse(f"{f} is a single event; use event()")
        with self._lock:
            if process in self._outstanding:
                raise HistoryMisuse(f"process {process} already has an outstanding "
                                    f"{self._outstanding[process].op.f}")
            op = self._write_locked(OpType.INVOKE, process, f, fields)
            inv = Invocation(op)
            self._outstanding[process] = inv
            return inv

    def ok(self, inv: Invocation, **result: Any) -> Op:
        return self._complete(inv, OpType.OK, result)

    def fail(self, inv: Invocation, error: str, **result: Any) -> Op:
        """The operation certainly did not take effect."""
        return self._complete(inv, OpType.FAIL, {**result, "error": error})

    def info(self, inv: Invocation, error: str, **result: Any) -> Op:
        """The operation's outcome is unknown."""
        return self._complete(inv, OpType.INFO, {**result, "error": error})

    def complete_with_error(self, inv: Invocation, exc: BaseException, **result: Any) -> Op:
        """`fail` when `exc` proves the operation had no effect, otherwise `info`."""
        error = getattr(exc, "error_name", None) or f"{type(exc).__name__}: {exc}"
        if is_definite(exc):
            return self.fail(inv, error, **result)
        return self.info(inv, error, **result)

    @contextmanager
    def operation(self, process: str, f: OpF, **fields: Any) -> Iterator[Invocation]:
        """Invoke, run the block, then complete: `ok` on success (with `inv.result`),
        `fail`/`info` by the error's kind on an exception, which is re-raised."""
        inv = self.invoke(process, f, **fields)
        try:
            yield inv
        except BaseException as exc:
            if not inv.completed:
                self.complete_with_error(inv, exc, **inv.result)
            raise
        if not inv.completed:
            self.ok(inv, **inv.result)

    def event(self, process: str, f: OpF, **fields: Any) -> Op:
        """Record a single `ok` event: receive, read or phase."""
        if f not in SINGLE_EVENT_FS:
            raise HistoryMisuse(f"{f} needs invoke() and a completion")
        with self._lock:
            return self._write_locked(OpType.OK, process, f, fields)

    def phase(self, name: str, **extra: Any) -> Op:
        """Record a phase boundary (`f: phase`, `extra.name`)."""
        return self.event(self.writer, OpF.PHASE, extra={"name": name, **extra})

    def outstanding(self) -> list[Invocation]:
        with self._lock:
            return list(self._outstanding.values())

    def close(self) -> None:
        """Flush, fsync and close. Outstanding invocations stay open (they read as `info`)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                os.fsync(self._file.fileno())
            finally:
                self._file.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def register(self, environment: Any) -> None:
        """Attach to a Locust Environment: close the file when Locust quits."""
        environment.events.quitting.add_listener(lambda **_: self.close())

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals --------------------------------------------------------------------------

    def _complete(self, inv: Invocation, type_: OpType, result: dict[str, Any]) -> Op:
        with self._lock:
            if self._outstanding.get(inv.process) is not inv:
                raise HistoryMisuse(f"completion of {inv.op.f} by {inv.process} without its invocation")
            base = inv.op
            # the invocation's fields, then the result's (its `extra` merged into the
            # invocation's, its `error` the completion's); field by field, not by getattr
            # over names: two lines per operation of the load (issue #27)
            fields: dict[str, Any] = {
                "txn": base.txn, "topic": base.topic, "segment": base.segment,
                "subscription": base.subscription, "key": base.key, "value": base.value,
                "inputs": base.inputs, "msg_id": base.msg_id}
            extra = base.extra
            for name, value in result.items():
                if name == "extra":
                    if value:
                        extra = {**(extra or {}), **value}
                elif name != "error":
                    fields[name] = value
            fields["extra"] = dict(extra) if extra else None
            fields["error"] = result.get("error")
            fields["path"] = base.path
            op = self._write_locked(type_, inv.process, base.f, fields)
            inv.completed = True
            del self._outstanding[inv.process]
            return op

    def _write_locked(self, type_: OpType, process: str, f: OpF, fields: dict[str, Any]) -> Op:
        if self._closed:
            raise HistoryMisuse(f"history {self.file_path} is closed")
        if self.write_error is not None:
            raise HistoryWriteError(f"history {self.file_path} failed earlier: {self.write_error}")
        if not _ALLOWED_FIELDS.issuperset(fields):
            raise HistoryMisuse(f"unknown history fields: {sorted(set(fields) - _ALLOWED_FIELDS)}")
        get = fields.get
        inputs = get("inputs")
        # positional, in Op's field order: keyword merging was a third of a line's cost
        op = Op(self.run, self.writer, process, self._index, self.clock.now_ns(), self.clock.wall_ms(),
                type_, f, str(get("path") or self.txn_path), get("txn"), get("topic"), get("segment"),
                get("subscription"), get("key"), get("value"),
                tuple(inputs) if inputs is not None else None, get("msg_id"), get("error"), get("extra"))
        line = op.to_json_line()
        try:
            written = self._file.write(line) or 0
            for _ in range(8):   # a short write (a regular file rarely has one): the rest, in order
                if written >= len(line):
                    break
                written += self._file.write(line[written:]) or 0
            else:
                raise OSError(f"short write: {written} of {len(line)} bytes")
        except OSError as err:
            self.write_error = err
            raise HistoryWriteError(f"could not write {self.file_path}: {err}") from err
        self._index += 1
        return op
