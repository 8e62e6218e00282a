"""The history contract (schema 1): op schema, recorder and reader. See docs/history.md."""

from harness.history.clock import RunClock
from harness.history.reader import HistoryFormatError, read_history_dir
from harness.history.recorder import HistoryMisuse, HistoryRecorder, HistoryWriteError, Invocation
from harness.history.schema import (
    FIELDS,
    OpF,
    OpType,
)

__all__ = [
    "FIELDS", "PHASE_DRAIN_COMPLETE", "SCHEMA_VERSION", "HistoryFormatError", "HistoryMisuse",
    "HistoryRecorder", "HistoryWriteError", "Invocation", "Op", "OpF", "OpType", "RunClock",
    "format_msg_id", "format_txn_id", "read_history_dir",
]
