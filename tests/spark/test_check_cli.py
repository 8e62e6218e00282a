"""`txnbench check` end to end: exit statuses, results.json, golden histories."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analysis.check import check_run
from harness.history.integrity import RECORD_KEY, record_history
from harness.results import RunDir
from orchestrator.cli import main
from tests.spark.dsl import History

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"


@pytest.fixture(autouse=True, params=["duckdb", "spark"])
def checker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both checkers (analysis.check.checker_engine): same exit statuses,
    same results.json, same golden results."""
    monkeypatch.setenv("TXNBENCH_CHECKER", request.param)
    if request.param == "spark":
        request.getfixturevalue("spark")
    return str(request.param)


def _results(run: Path) -> dict[str, Any]:
    return json.loads((run / "analysis" / "results.json").read_text())


def _mixed_history() -> History:
    h = History()
    h.process("w0/u1").open().sends("a", "b").commit()
    h.process("w0/u2").open().send("c").abort()
    h.process("w0/u3").open().send("d").commit(type="info")           # decided committed
    h.process("w0/u4").open().send("e").commit(type="info")           # decided aborted
    c = h.process("w1/c1")
    c.receive("a")
    c.open().ack("a").commit()
    return h


def test_valid_run_exits_0_with_full_results(spark: SparkSession, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-ok")
    assert main(["check", str(run)]) == 0
    assert "valid" in capsys.readouterr().out
    out = _results(run)
    assert out["valid"] is True and out["anomalies"] == {} and out["unknown_reasons"] == []
    assert set(out["checks"]) == {
        "aborted-read", "dirty-read", "lost-write", "partial-txn", "duplicate", "unexpected", "lost-ack",
        "stuck-ack", "ctp-duplicate", "ctp-loss", "nonmonotonic", "stalled-commit", "undelivered", "txn-id-reuse",
        "double-ack", "unresolved-txn"}
    assert all(c["status"] == "ran" and c["count"] == 0 for c in out["checks"].values())
    assert out["transactions"] == {"committed": 2, "aborted": 1, "unknown-committed": 1, "unknown-aborted": 1,
                                   "unknown": 0}
    assert out["operations"]["send"] == {"ok": 5} and out["operations"]["txn-commit"] == {"info": 2, "ok": 2}
    assert out["operations"]["receive"] == {"ok": 1} and out["operations"]["read"] == {"ok": 3}
    assert out["info_causes"] == {"txn-commit": {"TestError": 2}}
    history = out["history"]
    assert history["lines"] == 38 and history["torn_tails"] == [] and history["drain_complete"] is True
    assert history["drain_subscriptions"] == [{"topic": "t1", "subscription": "s"}]
    assert out["config"] == {"stall_after_s": 10.0, "stall_after_source": "default (manifest has no "
                             "config.checks.stall_after_s)", "txn_timeout_s": 30.0, "abort_bound_s": 5.0}
    assert out["checker"]["events_per_s"] > 0


def test_anomalies_exit_1_and_list_only_the_classes_found(spark: SparkSession, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    run = _mixed_history().drain(reads={"t1": ["a", "c", "d"]}).write(tmp_path / "run-bad")
    assert main(["check", str(run)]) == 1
    assert "INVALID" in capsys.readouterr().out
    out = _results(run)
    assert out["valid"] is False
    assert {k: v["count"] for k, v in out["anomalies"].items()} == {
        "aborted-read": 1, "lost-write": 1, "partial-txn": 1}
    assert out["anomalies"]["lost-write"]["examples"][0]["value"] == "b"


def test_no_drain_complete_exits_2_with_reasons(spark: SparkSession, tmp_path: Path) -> None:
    run = _mixed_history().phase("drain").read("t1", "a", "b", "d").write(tmp_path / "run-nodrain")
    assert main(["check", str(run)]) == 2
    out = _results(run)
    assert out["valid"] == "unknown"
    assert any("drain-complete" in r for r in out["unknown_reasons"])
    skipped = {k for k, v in out["checks"].items() if v["status"] == "skipped"}
    assert skipped == {"lost-write", "partial-txn", "duplicate", "stuck-ack", "ctp-duplicate", "ctp-loss",
                       "nonmonotonic", "undelivered"}
    assert out["transactions"]["unknown"] == 1      # "e": nothing to decide it by


def test_anomalies_win_over_doubts(spark: SparkSession, tmp_path: Path) -> None:
    h = _mixed_history()
    h.process("w9/c").receive("c")                    # an aborted read, no drain at all
    run = h.write(tmp_path / "run-bad-nodrain")
    assert main(["check", str(run)]) == 1
    out = _results(run)
    assert out["valid"] is False and "aborted-read" in out["anomalies"] and out["doubts"]


def test_torn_tail_is_ignored_and_reported(spark: SparkSession, tmp_path: Path) -> None:
    run = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-torn")
    with (run / "history" / "w1.jsonl").open("ab") as f:
        f.write(b'{"schema":1,"run":"test-run","writer":"w1","proc')
    assert main(["check", str(run)]) == 0
    out = _results(run)
    assert out["history"]["torn_tails"] == ["w1.jsonl"] and out["history"]["lines"] == 38


def test_malformed_line_exits_2_and_names_it(spark: SparkSession, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-malformed")
    w0 = run / "history" / "w0.jsonl"
    lines = w0.read_bytes().splitlines(keepends=True)
    w0.write_bytes(lines[0] + b'{"schema": 1, "broken\n' + b"".join(lines[1:]))
    assert main(["check", str(run)]) == 2
    err = capsys.readouterr().err
    assert "w0.jsonl: line 2" in err
    out = _results(run)
    assert out["valid"] == "unknown" and "w0.jsonl: line 2" in out["error"]
    assert all(c["status"] == "skipped" for c in out["checks"].values())


def test_completion_without_invocation_exits_2(spark: SparkSession, tmp_path: Path) -> None:
    h = _mixed_history()
    h.emit("w0", "w0/u9", "ok", "send", value="zz", topic="t1")
    run = h.drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-orphan")
    assert main(["check", str(run)]) == 2
    assert "has no invocation before it" in _results(run)["error"]


def test_missing_or_empty_run_folder_is_one_line_exit_2(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no such run folder" in err
    (tmp_path / "empty").mkdir()
    assert main(["check", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no history to check" in err


def test_stall_threshold_comes_from_the_manifest(spark: SparkSession, tmp_path: Path) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit(took_s=3)
    run = h.drain(reads={"t1": ["a"]}).write(tmp_path / "run-stall", stall_after_s=2)
    out = check_run(run)
    assert out["valid"] is False and out["anomalies"]["stalled-commit"]["count"] == 1
    assert out["config"] == {"stall_after_s": 2.0, "stall_after_source": "manifest", "txn_timeout_s": 30.0,
                             "abort_bound_s": 5.0}
    assert out == _results(run)


def _stable(results: dict[str, Any]) -> dict[str, Any]:
    out = dict(results)
    out.pop("checker")
    out["history"] = {k: v for k, v in results["history"].items() if k not in ("directory", "source")}
    return out


@pytest.mark.parametrize(("name", "status"), [("clean", 0), ("anomalous", 1)])
def test_golden_histories(spark: SparkSession, tmp_path: Path, name: str, status: int) -> None:
    run = tmp_path / name
    shutil.copytree(GOLDEN / name, run)
    (run / "expected-results.json").unlink()
    assert main(["check", str(run)]) == status
    expected = json.loads((GOLDEN / name / "expected-results.json").read_text())
    assert _stable(_results(run)) == expected
    planted = json.loads((GOLDEN / name / "planted.json").read_text())["expected"]
    assert {k: v["count"] for k, v in expected["anomalies"].items()} == planted


def test_a_spark_failure_is_one_line_with_the_fix(checker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark.errors import PySparkException

    import analysis.check

    def out_of_memory(*_args: object, **_kwargs: object) -> dict[str, Any]:
        raise PySparkException(message="java.lang.OutOfMemoryError: Java heap space")

    monkeypatch.setattr(analysis.check, "_check", out_of_memory)
    monkeypatch.setenv("TXNBENCH_CHECKER", "spark")
    run = _mixed_history().write(tmp_path / "run-oom")
    assert main(["check", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Java heap space" in err and "TXNBENCH_SPARK_DRIVER_MEMORY" in err


def test_a_duckdb_failure_is_said_and_spark_gives_the_verdict(checker: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import duckdb

    import analysis.check

    def out_of_memory(*_args: object, **_kwargs: object) -> dict[str, Any]:
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of size 256.0 KiB")

    monkeypatch.setattr(analysis.check, "check_history", out_of_memory)
    monkeypatch.setenv("TXNBENCH_CHECKER", "duckdb")
    run = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-oom")
    assert main(["check", str(run)]) == 0
    assert "could not allocate" in capsys.readouterr().err
    used = _results(run)["checker"]
    assert used["engine"] == "spark"
    assert "could not allocate" in used["instead_of_duckdb"] and "TXNBENCH_DUCKDB_MEMORY" in used["instead_of_duckdb"]


def test_a_history_arrow_cannot_vouch_for_is_checked_by_spark_saying_why(checker: str, tmp_path: Path) -> None:
    run = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-reordered")
    w0 = run / "history" / "w0.jsonl"
    lines = w0.read_bytes().splitlines(keepends=True)
    w0.write_bytes(lines[1] + lines[0] + b"".join(lines[2:]))      # a writer's lines out of index order
    out = check_run(run)
    if checker == "duckdb":
        assert out["checker"]["engine"] == "spark" and "out of order" in out["checker"]["instead_of_duckdb"]
    else:
        assert "instead_of_duckdb" not in out["checker"]


def test_every_instance_beyond_the_examples_goes_into_a_file_a_recheck_replaces(tmp_path: Path) -> None:
    h = History()
    h.process("w0/u1").open().sends(*[f"v{n}" for n in range(60)]).commit()
    run = h.drain(reads={"t1": []}).write(tmp_path / "run")
    entry = check_run(run)["anomalies"]["lost-write"]
    assert entry["count"] == 60 and len(entry["examples"]) == 50
    assert entry["instances"] == "analysis/instances/lost-write.jsonl"
    lines = (run / entry["instances"]).read_text().splitlines()
    assert sorted(json.loads(line)["value"] for line in lines) == sorted(f"v{n}" for n in range(60))
    # checked again after the values turned up: no anomaly, and no file of the old one's instances
    shutil.rmtree(run)
    h = History()
    h.process("w0/u1").open().sends(*[f"v{n}" for n in range(60)]).commit()
    h.drain(reads={"t1": [f"v{n}" for n in range(60)]}).write(tmp_path / "run")
    (run / "analysis" / "instances").mkdir(parents=True)
    (run / "analysis" / "instances" / "lost-write.jsonl").write_text("{}\n")
    assert check_run(run)["anomalies"] == {} and not (run / "analysis" / "instances").exists()


# ---- a damaged history is no anomaly (issue #43) ------------------------------------------------

OLD_MANIFEST = Path(__file__).resolve().parents[1] / "data" / "old-manifests" / "chaos-v4.json"


def _recorded(run: Path) -> Path:
    """What the orchestrator does as a run ends: record its history files in the manifest."""
    RunDir(run).update_manifest(**{RECORD_KEY: record_history(run / "history")})
    return run


def _valid_run(tmp_path: Path, name: str) -> Path:
    return _recorded(_mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / name))


def _damage_line(out: str) -> str:
    """The one stdout line of a check that found damage."""
    lines = [line for line in out.splitlines() if line.startswith("unknown:")]
    assert len(lines) == 1, out
    return lines[0]


def test_instances_of_a_check_written_outside_the_run_name_their_file_where_it_is(tmp_path: Path) -> None:
    h = History()
    h.process("w0/u1").open().sends(*[f"v{n}" for n in range(60)]).commit()
    run = h.drain(reads={"t1": []}).write(tmp_path / "run")
    entry = check_run(run, out_dir=tmp_path / "elsewhere")["anomalies"]["lost-write"]
    assert Path(entry["instances"]) == (tmp_path / "elsewhere" / "instances" / "lost-write.jsonl").resolve()
    assert len(Path(entry["instances"]).read_text().splitlines()) == 60


def test_a_history_cut_at_half_its_bytes_is_unknown_naming_the_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: half of w0.jsonl reads like a writer that died, whose missing operations
    would be judged as the cluster's anomalies. Against the run's record it is damage."""
    run = _valid_run(tmp_path, "run-cut")
    w0 = run / "history" / "w0.jsonl"
    data = w0.read_bytes()
    w0.write_bytes(data[:len(data) // 2])
    line = data[:len(data) // 2].count(b"\n") + 1
    assert main(["check", str(run)]) == 2
    said = capsys.readouterr()
    head = _damage_line(said.out)
    assert f"history/w0.jsonl: line {line}: cut in the middle of this line" in head
    assert "INVALID" not in said.out and "\n" not in said.err.strip()
    out = _results(run)
    assert out["valid"] == "unknown" and out["anomalies"] == {}
    assert out["history"]["integrity"] == "damaged"
    assert out["history"]["damage"] == [{"file": "w0.jsonl", "line": line, "problem": out["history"]["damage"][0]
                                         ["problem"]}]
    assert all(c["status"] == "skipped" for c in out["checks"].values())


def test_a_corrupt_line_in_the_middle_of_a_recorded_history_is_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _valid_run(tmp_path, "run-corrupt")
    w0 = run / "history" / "w0.jsonl"
    lines = w0.read_bytes().splitlines(keepends=True)
    lines[5] = lines[5].replace(b'"type":', b'"type"', 1)
    w0.write_bytes(b"".join(lines))
    assert main(["check", str(run)]) == 2
    assert "history/w0.jsonl: line 6: not the line the run wrote: not valid JSON" in _damage_line(
        capsys.readouterr().out)


def test_a_worker_history_the_manifest_names_that_is_missing_is_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _valid_run(tmp_path, "run-missing")
    (run / "history" / "w1.jsonl").unlink()
    assert main(["check", str(run)]) == 2
    assert "history/w1.jsonl: missing: the run wrote" in _damage_line(capsys.readouterr().out)
    # a run from before the record: a remote load worker the manifest names is looked for too
    legacy = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-legacy")
    RunDir(legacy).update_manifest(load_workers={"hosts": [{"host": "h1", "writers": ["w1", "r0"]}], "lost": []})
    assert main(["check", str(legacy)]) == 2
    assert "history/r0.jsonl: missing: the manifest names this writer" in _damage_line(capsys.readouterr().out)


def test_a_torn_last_line_the_run_left_is_still_forgiven(spark: SparkSession, tmp_path: Path) -> None:
    run = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-torn-recorded")
    with (run / "history" / "w1.jsonl").open("ab") as f:       # killed mid-write, before the run ended
        f.write(b'{"schema":1,"run":"test-run","writer":"w1","proc')
    _recorded(run)
    assert main(["check", str(run)]) == 0
    out = _results(run)
    assert out["history"]["torn_tails"] == ["w1.jsonl"] and out["history"]["integrity"] == "verified"


def test_a_check_never_replaces_the_runs_recorded_result(spark: SparkSession, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's second half: the run said valid (results.json, manifest, report); a check of the
    damaged history writes its own result beside it and says so."""
    run = _valid_run(tmp_path, "run-recorded")
    assert check_run(run)["valid"] is True                   # the run's own analysis
    recorded = (run / "analysis" / "results.json").read_bytes()
    w0 = run / "history" / "w0.jsonl"
    w0.write_bytes(w0.read_bytes()[:100])
    assert main(["check", str(run)]) == 2
    said = capsys.readouterr().out
    assert (run / "analysis" / "results.json").read_bytes() == recorded
    [folder] = [p for p in (run / "analysis").iterdir() if p.name.startswith("check-")]
    assert json.loads((folder / "results.json").read_text())["valid"] == "unknown"
    assert str(folder / "results.json") in _damage_line(said)
    assert f"the run's recorded result, {run / 'analysis' / 'results.json'} (valid), is kept" in said
    # checked again, repaired: another folder of its own, the recorded result still untouched
    _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "fresh")
    w0.write_bytes((tmp_path / "fresh" / "history" / "w0.jsonl").read_bytes())
    assert main(["check", str(run)]) == 0
    assert len([p for p in (run / "analysis").iterdir() if p.name.startswith("check-")]) == 2
    assert (run / "analysis" / "results.json").read_bytes() == recorded


def test_a_run_whose_manifest_predates_the_record_is_checked_as_before(spark: SparkSession,
                                                                         tmp_path: Path) -> None:
    run = _mixed_history().drain(reads={"t1": ["a", "b", "d"]}).write(tmp_path / "run-old", manifest=False)
    shutil.copy(OLD_MANIFEST, run / "manifest.json")
    assert main(["check", str(run)]) == 0
    out = _results(run)
    assert out["valid"] is True and out["history"]["integrity"] == "unrecorded"
