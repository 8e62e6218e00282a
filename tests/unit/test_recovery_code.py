"""The recovery code's list resolves, and the coverage report reads spans and data right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embedded.recovery_code import RECOVERY_CODE
from orchestrator.coverage import (
    Tally,
    find_span,
    ranges,
    render_markdown,
    repository_root,
    spans,
    summary_lines,
)

ROOT = repository_root()


def test_every_named_function_exists_and_areas_cover_the_issue() -> None:
    found = spans(ROOT)
    assert {"log replay", "snapshot restore", "pending-ack replay", "fencing and takeover", "timeout sweep",
            "garbage collection", "sealed and split segments"} <= set(found)
    for area, entries in found.items():
        assert entries, area
        for span in entries:
            assert span.first <= span.last and (ROOT / span.file).is_file()
    names = [(f, n) for entries in RECOVERY_CODE.values() for f, n in entries]
    assert len(names) == len(set(names)), "a function is listed once"


def test_spans_and_ranges(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("class A:\n    @staticmethod\n    def f():\n        return 1\n\n\nasync def g():\n"
                                   "    pass\n")
    assert (find_span(tmp_path, "m.py", "A.f").first, find_span(tmp_path, "m.py", "A.f").last) == (2, 4)
    assert find_span(tmp_path, "m.py", "g").first == 7
    assert ranges([9, 3, 4, 5, 11, 12]) == "3-5, 9, 11-12" and ranges([]) == ""
    t = Tally(10, 9, 4, 2)
    assert t.line_percent == 90.0 and t.branch_percent == 50.0 and Tally().line_percent == 100.0


def test_the_report_says_the_figure_against_the_goal() -> None:
    area = {"area": "log replay", "lines": 10, "lines_hit": 9, "line_percent": 90.0, "branches": 4,
            "branches_hit": 2, "branch_percent": 50.0,
            "functions": [{"file": "embedded/x.py", "function": "X.replay", "lines": 10, "lines_hit": 9,
                           "branches": 4, "branches_hit": 2, "missing": "12"}]}
    result: dict[str, Any] = {
        "goal_percent": 90.0, "data_files": 7,
        "all": {"lines": 10, "lines_hit": 9, "line_percent": 90.0, "branches": 4, "branches_hit": 2,
                "branch_percent": 50.0, "areas": [area]},
        "runs": {"v4": {"line_percent": 80.0, "branch_percent": 40.0, "lines": 10, "lines_hit": 8,
                        "areas": [{k: v for k, v in area.items() if k != "functions"}]}}}
    head = summary_lines(result)
    assert "**90.0% of lines** (9/10)" in head[0] and "reaches the goal of 90%" in head[0]
    assert head[1] == "- v4: 80.0% of lines (8/10), 40.0% of branches, of the listed code its processes loaded"
    md = render_markdown(result)
    assert "| `embedded/x.py` `X.replay` | 9/10 | 2/4 | 12 |" in md
    # a run whose late fault windows never ran says so beside its figure
    result["runs"]["v4"]["faults_progress"] = {"windows": 27, "started": 22, "last_late_s": 61.5,
                                               "unreached": [{"window": 23, "at_s": 84.0, "faults": ["kill ledger"]}]}
    assert summary_lines(result)[1].endswith(
        "loaded; 22 of 27 fault windows ran (the rest never did: the timeline ran 61.5 s late)")


def test_a_service_under_coverage_is_started_through_the_launcher() -> None:
    import embedded.broker
    from targets.processes import module_argv

    plain = module_argv(embedded.broker, Path("conf/broker-0.json"))
    assert plain[1:] == ["-m", "embedded.broker", "--config", "conf/broker-0.json"]
    covered = module_argv(embedded.broker, Path("conf/broker-0.json"), Path("run/coverage"))
    assert covered[1:] == ["-m", "harness.covered", "--data-dir", "run/coverage", "--source", "embedded",
                           "embedded.broker", "--", "--config", "conf/broker-0.json"]
