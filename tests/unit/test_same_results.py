"""`python -m tools.bench.same_results`: two checks of one history are the same, or where they differ."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tools.bench.same_results import compare, load, main

RESULTS: dict[str, Any] = {
    "schema": 1, "run_id": "r1", "valid": False, "unknown_reasons": [],
    "anomalies": {"lost-write": {"count": 2, "examples": [{"value": "w0-v1"}, {"value": "w0-v7"}]}},
    "checks": {"lost-write": {"status": "ran", "reason": None, "count": 2},
               "duplicate": {"status": "ran", "reason": None, "count": 0}},
    "operations": {"send": {"ok": 10}}, "transactions": {"committed": 4, "aborted": 1},
    "info_causes": {}, "config": {"stall_after_s": 10.0},
    "history": {"directory": "results/r1/history", "lines": 40, "source": "jsonl"},
    "checker": {"elapsed_s": 12.5, "events_per_s": 3.2, "spark_master": "local[*]", "shuffle_partitions": 1},
}


def write_check(folder: Path, results: dict[str, Any], instances: dict[str, list[dict[str, Any]]] | None = None
                ) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results))
    for name, rows in (instances or {}).items():
        (folder / "instances").mkdir(exist_ok=True)
        (folder / "instances" / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def test_how_the_check_ran_may_differ_and_nothing_else(tmp_path: Path) -> None:
    faster = copy.deepcopy(RESULTS)
    faster["checker"] = {"elapsed_s": 3.0, "events_per_s": 13.3, "spark_master": "spark://127.0.0.1:7077",
                         "shuffle_partitions": 13}
    faster["history"]["source"] = "parquet-cache"
    base, other = load(write_check(tmp_path / "a", RESULTS)), load(write_check(tmp_path / "b", faster))
    assert compare(base, other) == []


def test_a_different_count_or_example_is_named_by_its_path(tmp_path: Path) -> None:
    other_results = copy.deepcopy(RESULTS)
    other_results["checks"]["duplicate"]["count"] = 1
    other_results["anomalies"]["lost-write"]["examples"][1]["value"] = "w0-v8"
    del other_results["transactions"]["aborted"]
    base, other = load(write_check(tmp_path / "a", RESULTS)), load(write_check(tmp_path / "b", other_results))
    assert compare(base, other) == [
        'anomalies.lost-write.examples[1].value: "w0-v7" -> "w0-v8"',
        "checks.duplicate.count: 0 -> 1",
        "transactions.aborted: 1 -> (missing)",
    ]


def test_a_number_of_another_type_is_a_difference(tmp_path: Path) -> None:
    # JSON's 1 and 1.0 are equal in Python: a count written as a float is still a change of the file.
    other_results = copy.deepcopy(RESULTS)
    other_results["operations"]["send"]["ok"] = 10.0
    base, other = load(write_check(tmp_path / "a", RESULTS)), load(write_check(tmp_path / "b", other_results))
    assert compare(base, other) == ["operations.send.ok: 10 -> 10.0"]


def test_instances_are_compared_line_by_line_and_a_missing_file_is_named(tmp_path: Path) -> None:
    rows = [{"value": f"w0-v{i}"} for i in range(3)]
    base = load(write_check(tmp_path / "a", RESULTS, {"lost-write.jsonl": rows, "duplicate.jsonl": rows}))
    other = load(write_check(tmp_path / "b", RESULTS, {"lost-write.jsonl": [*rows[:2], {"value": "w0-v9"}]}))
    assert compare(base, other) == [
        "instances/duplicate.jsonl: 3 lines -> (missing)",
        'instances/lost-write.jsonl[2].value: "w0-v2" -> "w0-v9"',
    ]


def test_the_command_takes_files_folders_and_run_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_check(tmp_path / "run" / "analysis", RESULTS)
    recheck = write_check(tmp_path / "run" / "analysis" / "check-20261201-000000", RESULTS)
    assert main([str(tmp_path / "run"), str(recheck), str(recheck / "results.json")]) == 0
    assert capsys.readouterr().out.count("same: ") == 2


def test_the_command_exits_1_and_prints_the_differences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other_results = copy.deepcopy(RESULTS)
    other_results["valid"] = True
    write_check(tmp_path / "a", RESULTS)
    write_check(tmp_path / "b", other_results)
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT" in out and "valid: false -> true" in out


def test_a_copy_of_the_run_elsewhere_is_compared_with_its_directory_ignored(tmp_path: Path) -> None:
    moved = copy.deepcopy(RESULTS)
    moved["history"]["directory"] = "/elsewhere/r1/history"
    write_check(tmp_path / "a", RESULTS)
    write_check(tmp_path / "b", moved)
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--ignore", "history.directory"]) == 0


@pytest.mark.parametrize("broken", ["missing", "not-json", "not-an-object", "bad-instances"])
def test_an_unreadable_input_exits_2_and_says_what_to_pass(tmp_path: Path, broken: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    write_check(tmp_path / "a", RESULTS)
    target = tmp_path / "b"
    if broken == "not-json":
        target.mkdir()
        (target / "results.json").write_text("{torn")
    elif broken == "not-an-object":
        target.mkdir()
        (target / "results.json").write_text("[1, 2]")
    elif broken == "bad-instances":
        write_check(target, RESULTS)
        (target / "instances").mkdir()
        (target / "instances" / "lost-write.jsonl").write_text('{"value": "w0-v1"}\n{torn\n')
    assert main([str(tmp_path / "a"), str(target)]) == 2
    err = capsys.readouterr().err
    assert {"missing": "no results.json there", "not-json": "not readable as JSON",
            "not-an-object": "not a results object", "bad-instances": "not readable as JSON lines"}[broken] in err


def test_a_recheck_with_instances_is_the_same_as_the_recorded_check(tmp_path: Path) -> None:
    # Each names its instances file by its own folder: where the check wrote, not what it found.
    rows = [{"value": f"w0-v{i}"} for i in range(60)]
    recorded, rechecked = copy.deepcopy(RESULTS), copy.deepcopy(RESULTS)
    recorded["anomalies"]["lost-write"]["instances"] = "analysis/instances/lost-write.jsonl"
    rechecked["anomalies"]["lost-write"]["instances"] = "analysis/check-20261201-000000/instances/lost-write.jsonl"
    base = load(write_check(tmp_path / "run" / "analysis", recorded, {"lost-write.jsonl": rows}))
    other = load(write_check(tmp_path / "run" / "analysis" / "check-20261201-000000", rechecked,
                             {"lost-write.jsonl": rows}))
    assert compare(base, other) == []
    del rechecked["anomalies"]["lost-write"]["instances"]
    other = load(write_check(tmp_path / "elsewhere", rechecked, {"lost-write.jsonl": rows}))
    assert compare(base, other) == ['anomalies.lost-write.instances: "lost-write.jsonl" -> (missing)']
