"""The run report says how far the fault timeline got, and warns when planned faults never ran."""

from __future__ import annotations

from analysis.report.run_report import _faults_progress_text


def test_windows_that_never_ran_are_named_with_a_warning() -> None:
    text = _faults_progress_text({"windows": 27, "started": 25, "max_late_s": 64.0, "last_late_s": 61.5,
                                  "unreached": [{"window": 26, "at_s": 88.0, "faults": ["client-isolate clients"]},
                                                {"window": 27, "at_s": 109.0, "faults": ["partition broker:random"]}]})
    assert text is not None and text.startswith("⚠ Fault timeline: 25 of 27 planned windows ran")
    assert "61.5 s behind" in text and "2 windows never ran" in text
    assert "at 88 s: client-isolate clients; at 109 s: partition broker:random" in text
    assert text.endswith("Raise phases.faults_overrun_s (or faults_s) to run them.")


def test_a_whole_timeline_is_one_plain_line_and_no_faults_no_line() -> None:
    text = _faults_progress_text({"windows": 3, "started": 3, "max_late_s": 1.0, "last_late_s": 0.5, "unreached": []})
    assert text == "Fault timeline: 3 of 3 planned windows ran, the last 0.5 s behind its plan (heals and triggers take time)."
    assert _faults_progress_text(None) is None and _faults_progress_text({"windows": 0}) is None


def test_a_phase_that_ran_over_its_plan_says_by_how_much() -> None:
    text = _faults_progress_text({"windows": 37, "started": 37, "max_late_s": 301.2, "last_late_s": 298.0,
                                  "unreached": [], "overrun_s": 284.6})
    assert text == ("Fault timeline: 37 of 37 planned windows ran, the last 298 s behind its plan (heals and "
                    "triggers take time). The faults phase ran 284.6 s past its planned length to play them.")
