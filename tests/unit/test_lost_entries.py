"""The drain's lost entries as the checker reads them (`analysis.model`), without Spark."""

from __future__ import annotations

import json

from analysis.model import _drain_from_phases, lost_run_of
from harness.history.schema import PHASE_DRAIN_COMPLETE

RUN: dict[str, object] = {"topic": "persistent://p/n/t", "segment": "persistent://p/n/t-partition-1", "first": "12:7",
       "last": "13:0", "count": 3, "reason": "NoSuchEntry"}


def _phase(extra: dict[str, object], time_ns: int = 5) -> dict[str, object]:
    return {"phase": PHASE_DRAIN_COMPLETE, "extra": json.dumps({"name": PHASE_DRAIN_COMPLETE, **extra}),
            "time_ns": time_ns}


def test_lost_runs_are_read_from_drain_complete_and_malformed_ones_ignored() -> None:
    drain = _drain_from_phases([_phase({"topics": ["persistent://p/n/t"],
                                        "lost_entries": [RUN, {"first": "x"}, "junk"]})])
    assert drain.complete and drain.lost_entries == (RUN,)
    assert _drain_from_phases([_phase({"topics": []})]).lost_entries == ()


def test_a_message_id_inside_a_run_of_its_partition_is_found() -> None:
    drain = _drain_from_phases([_phase({"topics": ["persistent://p/n/t"], "lost_entries": [RUN]})])
    topic, part = "persistent://p/n/t", "persistent://p/n/t-partition-1"
    assert lost_run_of(drain, topic, part, "12:7:-1") == RUN
    assert lost_run_of(drain, topic, part, "12:900:3") == RUN        # the run crosses into ledger 13
    assert lost_run_of(drain, topic, part, "13:0:-1") == RUN
    assert lost_run_of(drain, topic, part, "12:6:-1") is None
    assert lost_run_of(drain, topic, part, "13:1:-1") is None
    assert lost_run_of(drain, topic, "persistent://p/n/t-partition-0", "12:7:-1") is None
    assert lost_run_of(drain, topic, part, None) is None
