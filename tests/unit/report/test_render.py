"""Reports render the numbers of perf.json, absent metrics as absent, and need no network."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from analysis.compare import RunEntry, build_comparison, ratio
from analysis.report.compare_report import COMPARE_REPORT
from analysis.report.run_report import RUN_REPORT, RunInputs
from analysis.report.writer import write_report
from harness.results import RunDir, read_json
from tests.unit.report.fakes import fake_perf, fake_results

PNG = b"\x89PNG\r\n\x1a\n"


def assert_self_contained(html: str, images: int) -> None:
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I)
    assert "@import" not in html and "url(" not in html
    sources = re.findall(r'<img src="([^"]+)"', html)
    assert len(sources) == images
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data.startswith(PNG) and len(data) > 2000


def test_run_report_shows_perf_numbers_and_the_verdict(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run-v4")
    perf = fake_perf(run.path, metadata=False)
    assert perf["committed_txn_per_s"] == 100.0            # 1000 commits over the 10 s steady phase
    assert perf["io_per_txn"]["data_entries"] == 5.0       # (5 * 1300 - 5 * 300) / 1000
    assert perf["io_per_txn"]["metadata_fsyncs"] is None
    report = write_report(RUN_REPORT, RunInputs(run, perf, fake_results(False), read_json(run.manifest_path)),
                          run.path)
    md = report.markdown.read_text()
    assert "| committed transactions / s | 100.0 |" in md
    assert "| data_entries | 5.00 | 5,000 | entries |" in md
    assert "| metadata_fsyncs | absent | absent |" in md
    assert "| fsyncs | absent | absent |" in md
    assert "| lost-write | 2 | 2 |" in md and "| lost-write | 1 |" in md and "w0#17" in md
    assert "| txn-commit | 200 |" in md
    html = report.html.read_text()
    assert_self_contained(html, images=5)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html           # examples are escaped
    assert 'class="verdict-invalid"' in html
    assert sorted(p.name for p in run.plots_dir.glob("*.png")) == sorted(c.path.name for c in report.charts)
    for chart in report.charts:
        assert chart.path.read_bytes() == chart.png


@pytest.mark.parametrize("valid,css", [(True, "verdict-valid"), ("unknown", "verdict-unknown")])
def test_verdict_panel_states(tmp_path: Path, valid: object, css: str) -> None:
    run = RunDir(tmp_path / "r")
    perf = fake_perf(run.path)
    html = write_report(RUN_REPORT, RunInputs(run, perf, fake_results(valid), {}), run.path).html.read_text()
    assert f'class="{css}"' in html
    if valid == "unknown":
        assert "no drain-complete phase event" in html
    html = write_report(RUN_REPORT, RunInputs(run, perf, None, {}), run.path).html.read_text()
    assert "analysis/results.json is missing" in html


def entries(tmp_path: Path, paths: dict[str, dict]) -> list[RunEntry]:
    out = []
    for name, kwargs in paths.items():
        run_dir = tmp_path / "runs" / name
        perf = fake_perf(run_dir, path=kwargs.pop("path", name), **kwargs)
        out.append(RunEntry(run_dir, perf, fake_results(True), {}))
    return out


def test_comparison_copies_each_runs_numbers_and_divides_by_v4(tmp_path: Path) -> None:
    runs = entries(tmp_path, {"v5": {"scale": 2.0, "metadata": False, "capacity": None},
                              "v4": {"scale": 1.0}, "v4-batched": {"scale": 1.5}})
    compare = build_comparison(runs, out_dir=tmp_path, kind="bench", matrix_id="m1")
    assert compare["order"] == ["v4", "v4-batched", "v5"] and compare["baseline"] == "v4"
    for entry in runs:
        row = compare["paths"][entry.perf["path"]]
        assert row["committed_txn_per_s"] == entry.perf["committed_txn_per_s"]
        assert row["msgs_per_s"] == entry.perf["msgs_per_s"]
        assert row["io_per_txn"] == entry.perf["io_per_txn"]
        for op, lat in entry.perf["latency_ms"].items():
            for key in ("p50", "p95", "p99", "max"):
                assert row["latency_ms"][op].get(key) == lat.get(key)
        assert row["perf_json"] == f"runs/{entry.run_dir.name}/analysis/perf.json"
        assert row["verdict"]["valid"] is True
    v5 = compare["ratios_vs_baseline"]["v5"]
    assert v5["committed_txn_per_s"] == ratio(200.0, 100.0) == 2.0
    assert v5["io_per_txn"]["metadata_fsyncs"] is None             # absent in v5: no ratio
    assert compare["paths"]["v5"]["io_per_txn"]["metadata_fsyncs"] is None
    assert compare["paths"]["v5"]["load_generator"]["capacity_txn_per_s"] is None
    assert compare["paths"]["v4"]["load_generator"]["capacity_txn_per_s"] == 5000.0

    written = write_report(COMPARE_REPORT, compare, tmp_path)
    assert written.json is not None
    assert json.loads(written.json.read_text())["paths"]["v5"]["committed_txn_per_s"] == 200.0
    md = written.markdown.read_text()
    assert "| v5 | 200.0 | 2.00\u00d7 |" in md
    assert re.search(r"\| metadata_fsyncs \| [\d.]+ \| [\d.]+ \| absent \|", md)
    assert_self_contained(written.html.read_text(), images=5)


RACES = {"ack_conflicts": 7, "ack_steals": 9, "end_txn_resends": 3, "race_losses": 5, "acked_in_two_txns": 11,
         "timeout_commits": {"count": 4, "ok": 2, "fail": 1, "info": 1, "after": 2, "after_ok": 1},
         "foreign_aborts": {"count": 6, "ok": 2, "fail": 4, "info": 0, "both_ok": 0}}


def test_racing_decisions_reach_perf_the_run_report_and_the_comparison(tmp_path: Path) -> None:
    """Issue #43: every run says how many ack races, commits at the timeout, END_TXN resends and second
    clients' aborts it made, in perf.json, compare.json and both reports, beside the ack conflicts."""
    run = RunDir(tmp_path / "runs" / "v4")
    perf = fake_perf(run.path, races=RACES)
    races = perf["races"]
    assert races["ack_races"] == 18 and races["ack_conflicts"] == 7 and races["acked_in_two_txns"] == 11
    assert races["end_txn_resends"] == 3 and races["ack_steals"] == 9
    assert races["timeout_commits"]["after_ok"] == 1 and races["foreign_aborts"]["fail"] == 4
    md = write_report(RUN_REPORT, RunInputs(run, perf, fake_results(True), read_json(run.manifest_path)),
                      run.path).markdown.read_text()
    row = "| 18 | 7 | 11 | 9 | 4 (2 ok / 1 fail / 1 info); 2 past it, 1 committed | 3 | 6 (2 ok / 4 fail / 0 info); both ok: 0 |"
    assert row in md
    quiet = fake_perf(tmp_path / "runs" / "v5", path="v5")     # a run whose status predates the counters
    assert quiet["races"]["ack_races"] is None and quiet["races"]["end_txn_resends"] is None
    compare = build_comparison([RunEntry(run.path, perf, fake_results(True), {}),
                                RunEntry(tmp_path / "runs" / "v5", quiet, fake_results(True), {})],
                               out_dir=tmp_path, kind="chaos", matrix_id="m1")
    assert compare["paths"]["v4"]["races"]["ack_races"] == 18
    assert compare["paths"]["v4"]["races"]["timeout_commits"] == RACES["timeout_commits"]
    written = write_report(COMPARE_REPORT, compare, tmp_path)
    assert written.json is not None
    assert json.loads(written.json.read_text())["paths"]["v4"]["races"]["foreign_aborts"]["count"] == 6
    md = written.markdown.read_text()
    assert f"| v4 {row}" in md
    assert "| v5 | absent | absent | absent | absent | absent | absent | absent |" in md


def test_baseline_without_v4_and_runs_sharing_a_path(tmp_path: Path) -> None:
    runs = entries(tmp_path, {"a": {"path": "v5", "scale": 1.0}, "b": {"path": "v5", "scale": 3.0}})
    compare = build_comparison(runs, out_dir=tmp_path)
    assert compare["order"] == ["a", "b"] and compare["baseline"] == "a"
    assert compare["ratios_vs_baseline"]["b"]["committed_txn_per_s"] == 3.0
    assert ratio(1, 0) is None and ratio(None, 1) is None and ratio(True, 1) is None


def test_anomalies_the_scenario_expects_are_marked_with_the_reason(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run-v4")
    perf = fake_perf(run.path)
    manifest = {"path": "v4", "config": {"checks": {"expected": [
        {"paths": ["v4"], "anomalies": ["lost-write"], "reason": "markers refused by a terminated topic"}]}}}
    md = write_report(RUN_REPORT, RunInputs(run, perf, fake_results(False), manifest), run.path).markdown.read_text()
    assert "| lost-write | 2 | 2 | expected |" in md
    assert "markers refused by a terminated topic" in md
    plain = write_report(RUN_REPORT, RunInputs(run, perf, fake_results(False),
                                               {"path": "v5", "config": manifest["config"]}), run.path)
    assert "| lost-write | 2 | 2 | unexpected |" in plain.markdown.read_text()


def test_comparison_says_when_a_path_is_invalid_only_as_the_scenario_expects(tmp_path: Path) -> None:
    config = {"checks": {"expected": [{"paths": ["v4"], "anomalies": ["lost-write", "aborted-read"],
                                       "reason": "markers refused by a terminated topic"}]}}
    runs = []
    for name in ("v4", "v5"):
        run_dir = tmp_path / "runs" / name
        runs.append(RunEntry(run_dir, fake_perf(run_dir, path=name), fake_results(False),
                             {"path": name, "config": config}))
    compare = build_comparison(runs, out_dir=tmp_path, kind="chaos", matrix_id="m1")
    assert compare["paths"]["v4"]["verdict"]["only_expected"] is True
    assert compare["paths"]["v5"]["verdict"]["only_expected"] is False
    md = write_report(COMPARE_REPORT, compare, tmp_path).markdown.read_text()
    assert "INVALID, as the scenario expects" in md and "lost-write 2 (expected)" in md
    assert "expected: markers refused by a terminated topic" in md


def test_runs_sharing_a_path_are_named_by_the_setting_that_differs(tmp_path: Path) -> None:
    runs = entries(tmp_path, {"a": {"path": "v5"}, "b": {"path": "v5"}, "c": {"path": "v4"}})
    polls = {"a": 100, "b": 20}
    for run in runs[:2]:
        cast(dict[str, Any], run.manifest).update(config={"name": run.run_dir.name, "seed": 1, "load": {"users": 16}, "cluster": {
            "settings": {"metadataStoreSessionTimeoutMillis": 6000,
                         "txnbenchDispatchHorizonPollMillis": polls[run.run_dir.name]}}})
    compare = build_comparison(runs, out_dir=tmp_path)
    assert compare["order"] == ["v4", "v5 txnbenchDispatchHorizonPollMillis=20",   # numbers sort as numbers
                                "v5 txnbenchDispatchHorizonPollMillis=100"]
    assert compare["baseline"] == "v4"


def test_runs_sharing_a_path_keep_their_run_ids_when_too_much_differs(tmp_path: Path) -> None:
    runs = entries(tmp_path, {"a": {"path": "v5"}, "b": {"path": "v5"}})
    for n, run in enumerate(runs):
        cast(dict[str, Any], run.manifest).update(config={"load": {"users": n}, "phases": {"steady_s": n}, "workload": {"keys": n}})
    assert build_comparison(runs, out_dir=tmp_path)["order"] == ["a", "b"]


def test_the_comparison_flags_runs_whose_participants_shapes_differ(tmp_path: Path) -> None:
    """Equal topologies: v4 partitions = v5 segments; a comparison of unequal ones says so in red."""
    shape = {"per_topic": 2, "topics": 4, "topics_per_txn": 2, "messages_per_txn": 4, "acks_per_txn": 2}
    runs = entries(tmp_path, {"v4": {}, "v5": {}})
    for run in runs:
        cast(dict[str, Any], run.manifest).update(participants=dict(shape))
    fair = build_comparison(runs, out_dir=tmp_path / "fair")
    assert fair["shape_mismatch"] == []
    md = write_report(COMPARE_REPORT, fair, tmp_path / "fair").markdown.read_text()
    assert "## Fair comparison" in md and "NOT A FAIR COMPARISON" not in md
    assert "## Cost ledger" in md and "## Critical-path depth" in md

    cast(dict[str, Any], runs[0].manifest).update(participants={**shape, "per_topic": 1})   # an unpartitioned v4 topic
    unfair = build_comparison(runs, out_dir=tmp_path / "unfair")
    assert unfair["shape_mismatch"] == ["per_topic differs: v4 1, v5 2"]
    written = write_report(COMPARE_REPORT, unfair, tmp_path / "unfair")
    assert "NOT A FAIR COMPARISON" in written.markdown.read_text()
    assert re.search(r'<td class="[^"]*\bbad">1</td>', written.html.read_text())   # the differing shape, red


def test_reports_name_planted_bugs_at_the_top(tmp_path: Path) -> None:
    runs = entries(tmp_path, {"v4": {"path": "v4"}, "v5": {"path": "v5"}})
    cast(dict[str, Any], runs[1].manifest).update(planted_bugs=["txnbenchBugV5GcRetentionInMillis"])
    compare = build_comparison(runs, out_dir=tmp_path)
    assert compare["paths"]["v5"]["planted_bugs"] == ["txnbenchBugV5GcRetentionInMillis"]
    assert compare["paths"]["v4"]["planted_bugs"] == []
    md = write_report(COMPARE_REPORT, compare, tmp_path).markdown.read_text()
    first = md.split("\n\n")[1]
    assert "PLANTED BUGS ON" in first and "v5: txnbenchBugV5GcRetentionInMillis" in first

    run = RunDir(tmp_path / "run-planted")
    perf = fake_perf(run.path, metadata=False)
    manifest = {**read_json(run.manifest_path), "planted_bugs": ["txnbenchBugV4ReplayKeepsLastPartitions"]}
    report = write_report(RUN_REPORT, RunInputs(run, perf, fake_results(False), manifest), run.path)
    for text in (report.markdown.read_text(), report.html.read_text()):
        assert "PLANTED BUGS ON" in text and "txnbenchBugV4ReplayKeepsLastPartitions" in text


def test_the_matrix_own_v4_is_the_baseline_beside_an_lts_v4(tmp_path: Path) -> None:
    """A pulsar bench adds v4 on 4.0.8 (folder v4-pulsar-4.0.8): the matrix's own v4 stays the baseline,
    and the two v4 runs are labelled by the release, not by the matrix's list of paths."""
    runs = []
    for folder, version in (("v4-pulsar-4.0.8", "4.0.8"), ("v4", "5.0.1")):
        run_dir = tmp_path / "runs" / folder
        manifest = {"path": "v4", "config": {"paths": ["v4"] if version == "4.0.8" else ["v4", "v5"],
                                             "cluster": {"pulsar_version": version}}}
        runs.append(RunEntry(run_dir, fake_perf(run_dir, path="v4", scale=1.0), fake_results(True), manifest))
    compare = build_comparison(runs, out_dir=tmp_path)
    assert compare["order"] == ["v4 pulsar_version=4.0.8", "v4 pulsar_version=5.0.1"]
    assert compare["baseline"] == "v4 pulsar_version=5.0.1"
