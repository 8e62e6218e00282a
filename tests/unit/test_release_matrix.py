"""The release matrix's plan and release diff, without processes (orchestrator/release_matrix.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.txn_paths import TxnPath
from orchestrator.cli import build_parser
from orchestrator.release_matrix import (
    Cell,
    CellResult,
    choose_releases,
    plan,
    release_diff,
    render_markdown,
    version_key,
)
from targets.pulsar.versions import RELEASES, runnable

ALL = (TxnPath.V4, TxnPath.V4_BATCHED, TxnPath.V5)


def test_versions_order_numerically() -> None:
    assert sorted(["4.0.8", "2.10.5", "2.11.0", "3.0.0"], key=version_key) == ["2.10.5", "2.11.0", "3.0.0", "4.0.8"]


def test_each_release_runs_the_paths_it_has_oldest_first() -> None:
    cells = plan([RELEASES["5.0.1"], RELEASES["2.10.5"], RELEASES["2.11.0"]], ALL)
    assert [(c.version, c.txn_path.value) for c in cells] == [
        ("2.10.5", "v4"),                                   # PIP-160 shipped in 2.11
        ("2.11.0", "v4"), ("2.11.0", "v4-batched"),
        ("5.0.1", "v4"), ("5.0.1", "v4-batched"), ("5.0.1", "v5")]   # PIP-473 is 5.0's
    assert cells[0].folder == "2.10.5-v4"


def test_by_default_every_release_that_runs_here_and_only_those() -> None:
    assert choose_releases(None) == runnable()
    refused = [v for v, r in RELEASES.items() if not r.checked.runs]
    for version in refused:
        with pytest.raises(ConfigError, match="does not run here"):
            choose_releases([version])


def result(version: str, path: TxnPath, verdict: str, **anomalies: int) -> CellResult:
    return CellResult(Cell(version, path), "complete", verdict, 1 if anomalies else 0,
                      {k.replace("_", "-"): v for k, v in anomalies.items()}, sorted(k.replace("_", "-") for k in anomalies))


def test_the_release_diff_names_what_a_newer_release_no_longer_shows() -> None:
    results = [result("3.0.0", TxnPath.V4, "invalid", lost_write=5, stuck_ack=1),
               result("2.11.0", TxnPath.V4, "invalid", lost_write=3, stuck_ack=2, aborted_read=1),
               result("4.0.8", TxnPath.V4, "invalid", lost_write=7),
               result("4.0.8", TxnPath.V4_BATCHED, "valid"),
               result("5.0.1", TxnPath.V4, "unknown")]            # no verdict: not compared
    diffs = release_diff(results)
    assert diffs == [
        {"path": "v4", "older": "2.11.0", "newer": "3.0.0", "gone": {"aborted-read": 1}, "new": {}},
        {"path": "v4", "older": "3.0.0", "newer": "4.0.8", "gone": {"stuck-ack": 1}, "new": {}}]
    text = render_markdown("chaos", 7, results, diffs)
    assert "`v4` 2.11.0 -> 3.0.0: gone aborted-read 1; new nothing" in text
    assert "| 4.0.8 | v4 | invalid | **lost-write 7** |" in text


def test_the_command_line_parses_and_defaults_to_the_pulsar_target() -> None:
    args = build_parser().parse_args(["release-matrix", "--releases", "2.10.5", "5.0.1", "--duration", "60",
                                      "--seed", "3"])
    assert args.releases == ["2.10.5", "5.0.1"] and args.target == "pulsar" and args.scenario == "chaos"
    assert args.duration == 60 and args.seed == 3


def test_matrices_run_apart_combine_into_one_release_diff(tmp_path: Path) -> None:
    """The nightly runs one job per release; `--from` makes one report of them."""
    from orchestrator.release_matrix import combine

    for version, anomalies in (("3.0.0", {"stuck-ack": 2, "lost-write": 1}), ("2.11.0", {"stuck-ack": 1})):
        folder = tmp_path / f"x-release-matrix-{version}"
        folder.mkdir()
        runs = [result(version, TxnPath.V4, "invalid", **{k.replace("-", "_"): v for k, v in anomalies.items()}).to_json()]
        (folder / "release-matrix.json").write_text(json.dumps({"scenario": "chaos", "seed": 7, "runs": runs}))
    out = tmp_path / "combined"
    assert combine(sorted(tmp_path.glob("x-*")), out) == 0
    plain = json.loads((out / "release-matrix.json").read_text())
    assert [r["release"] for r in plain["runs"]] == ["2.11.0", "3.0.0"]
    assert plain["release_diff"] == [{"path": "v4", "older": "2.11.0", "newer": "3.0.0", "gone": {},
                                      "new": {"lost-write": 1}}]
    with pytest.raises(ConfigError, match=r"release-matrix\.json"):
        combine([tmp_path / "nothing"], out)


def test_with_coverage_each_cell_says_how_many_recovery_methods_it_entered(tmp_path: Path) -> None:
    """--coverage: the cell's figure comes from the run's coverage.json and survives --from."""
    from orchestrator.release_matrix import cell_result, recovery_reached

    run = tmp_path / "run"
    (run / "coverage").mkdir(parents=True)
    (run / "coverage" / "coverage.json").write_text(json.dumps(
        {"recovery": {"entered": 38, "listed": 43, "percent": 88.4}}))
    measured = recovery_reached(run)
    assert measured == {"entered": 38, "listed": 43, "percent": 88.4}
    assert recovery_reached(tmp_path / "never-measured") is None
    (run / "coverage" / "coverage.json").write_text("{not json")
    assert recovery_reached(run) is None
    cell = result("5.0.1", TxnPath.V4, "valid")
    cell.recovery = measured
    assert cell_result(cell.to_json()).recovery == measured
    text = render_markdown("chaos", 7, [cell, result("2.10.5", TxnPath.V4, "valid")], [])
    assert "| 5.0.1 | v4 | valid | none | none | nothing | 38/43 (88.4%) |" in text
    assert "| 2.10.5 | v4 | valid | none | none | nothing | not measured |" in text
    args = build_parser().parse_args(["release-matrix", "--coverage"])
    assert args.coverage is True


def test_a_cell_run_again_replaces_the_earlier_run_and_the_report_says_so(tmp_path: Path) -> None:
    """A release re-run after a harness fix (`--releases 2.10.5` alone) joins the matrix through
    `--from` without showing the release twice; the earlier run is listed as replaced."""
    from orchestrator.release_matrix import combine

    first, again = tmp_path / "a-release-matrix", tmp_path / "b-release-matrix"
    for folder, runs in ((first, [result("2.10.5", TxnPath.V4, "unknown"), result("2.11.0", TxnPath.V4, "valid")]),
                         (again, [result("2.10.5", TxnPath.V4, "invalid", lost_write=3)])):
        folder.mkdir()
        (folder / "release-matrix.json").write_text(json.dumps(
            {"scenario": "chaos", "seed": 7, "runs": [r.to_json() for r in runs]}))
    out = tmp_path / "combined"
    assert combine([first, again], out) == 0
    plain = json.loads((out / "release-matrix.json").read_text())
    assert [(r["release"], r["verdict"]) for r in plain["runs"]] == [("2.10.5", "invalid"), ("2.11.0", "valid")]
    assert [(r["release"], r["verdict"]) for r in plain["replaced"]] == [("2.10.5", "unknown")]
    assert "2.10.5 v4: unknown" in (out / "release-matrix.md").read_text()


def test_what_the_drain_observed_of_the_broker_is_counted_and_enters_the_release_diff(tmp_path: Path) -> None:
    """2.10.5-3.2 answer GET_LAST_MESSAGE_ID past every entry a reader is given (stale ends,
    orchestrator/load/undeliverable.py); 4.0 does not. The matrix counts the drain's observations per run
    and the release diff names the one a newer release no longer shows."""
    from orchestrator.release_matrix import drain_observations

    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    events = [{"f": "phase", "type": "ok", "extra": {"name": "drain"}},
              {"f": "phase", "type": "ok", "extra": {"name": "drain-complete", "lost_entries": [],
                                                     "undeliverable_ends": [{"partition": "p0"}, {"partition": "p1"}],
                                                     "live_undeliverable_ends": [{"partition": "p0"}],
                                                     "held_horizons": [{"partition": "p2"}],
                                                     "last_id_refused": ["ap-2"]}}]
    (run / "history" / "run.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert drain_observations(run) == {"stale-end": 3, "held-horizon": 1, "last-id-refused": 1}
    assert drain_observations(tmp_path / "missing") == {}
    old, new = result("3.2.0", TxnPath.V4, "valid"), result("4.0.8", TxnPath.V4, "valid")
    old.observations = {"stale-end": 3}
    assert release_diff([old, new]) == [{"path": "v4", "older": "3.2.0", "newer": "4.0.8",
                                         "gone": {"drain: stale-end": 3}, "new": {}}]
    assert "| 3.2.0 | v4 | valid | none | none | stale-end 3 |" in render_markdown("chaos", 7, [old, new], [])


def test_each_cell_says_how_much_of_the_fault_timeline_ran_and_the_diff_warns_when_cells_differ(
        tmp_path: Path) -> None:
    """A release whose heals are slower ran fewer windows when the phase was cut at the plan's end
    (7 of 37 on 2.10.5, 9 on 4.0.8, 2026-12-03): the table shows it, and a release diff between
    cells that did not run the same timeline says so beside the classes it names."""
    from orchestrator.release_matrix import cell_result, combine, fault_windows

    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"faults_progress": {
        "windows": 37, "started": 37, "max_late_s": 290.0, "last_late_s": 288.5, "unreached": [],
        "overrun_s": 275.4}}))
    assert fault_windows(run) == {"started": 37, "planned": 37, "overrun_s": 275.4}
    assert fault_windows(tmp_path / "missing") is None
    old, new = result("2.10.5", TxnPath.V4, "invalid"), result("4.0.8", TxnPath.V4, "invalid")
    old.anomalies, new.anomalies = {"lost-ack": 9}, {}
    old.windows = {"started": 7, "planned": 37, "overrun_s": None}
    new.windows = fault_windows(run)
    assert cell_result(new.to_json()).windows == new.windows
    diffs = release_diff([old, new])
    assert diffs[0]["windows"] == {"older": "7/37", "newer": "37/37"}
    text = render_markdown("chaos", 7, [old, new], diffs)
    assert "| 2.10.5 | v4 | invalid | lost-ack 9 | **7/37** | nothing |" in text
    assert "| 4.0.8 | v4 | invalid | none | 37/37 (+275.4 s) | nothing |" in text
    assert "gone lost-ack 9; new nothing (not the same chaos: fault windows run 7/37 and 37/37)" in text
    new.windows = dict(old.windows)
    assert "windows" not in release_diff([old, new])[0]
    # a matrix written before the column: --from reads the windows from the run's folder
    matrix = tmp_path / "matrix"
    matrix.mkdir()
    plain = {**result("4.0.8", TxnPath.V4, "valid").to_json(), "folder": str(run)}
    del plain["windows"]
    (matrix / "release-matrix.json").write_text(json.dumps({"scenario": "chaos", "seed": 7, "runs": [plain]}))
    combine([matrix], tmp_path / "out")
    combined = json.loads((tmp_path / "out" / "release-matrix.json").read_text())
    assert combined["runs"][0]["windows"] == {"started": 37, "planned": 37, "overrun_s": 275.4}
