"""The synthetic history generator: contract-valid output, and every planted anomaly found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.check import check_run
from analysis.checks import AnomalyClass
from harness.history import read_history_dir
from harness.history.schema import Op
from tools.synth import SynthConfig, generate


def test_synthetic_histories_follow_the_contract(tmp_path: Path) -> None:
    summary = generate(SynthConfig(events=3000, writers=2, plant=tuple(c.value for c in AnomalyClass)),
                       tmp_path / "run", jobs=1)
    ops, scan = read_history_dir(tmp_path / "run" / "history")
    assert scan.torn_tails == [] and len(ops) == summary["events"]
    by_writer: dict[str, list[int]] = {}
    for line in ops:
        Op.from_dict(line)                                   # every line is a schema-1 op
        by_writer.setdefault(line["writer"], []).append(line["index"])
    assert set(by_writer) == {"w0", "w1", "drain-w0", "drain-w1", "run"}
    for indexes in by_writer.values():
        assert indexes == list(range(len(indexes)))          # 0, 1, 2 ... in file order
    times = [line["time_ns"] for line in ops if line["writer"] == "w0"]
    assert times == sorted(times)                            # a writer's lines follow its clock
    assert set(summary["expected"]) == {c.value for c in AnomalyClass}
    starts = [line for line in ops if line["f"] == "phase" and line["extra"]["name"] == "subscription-start"]
    assert {(s["topic"], s["subscription"]) for s in starts} == {
        (f"persistent://public/txnbench/{w}-t{i}", sub) for w in ("w0", "w1") for i, sub in ((0, "ctp"), (1, "audit"))}
    first_send = min(line["time_ns"] for line in ops if line["f"] == "send")
    assert max(s["time_ns"] for s in starts) < first_send     # every send is owed to every subscription
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["checks"]["stall_after_s"] == 10.0


def test_every_planted_class_is_found_with_the_count_planted(spark: object, tmp_path: Path) -> None:
    run = tmp_path / "small"
    summary = generate(SynthConfig(events=700, writers=1, seed=5, plant=tuple(c.value for c in AnomalyClass)),
                       run, jobs=1)
    assert set(summary["expected"]) == {c.value for c in AnomalyClass}
    out = check_run(run)
    assert {k: v["count"] for k, v in out["anomalies"].items()} == summary["expected"]
    doubled = [e for e in out["anomalies"]["double-ack"]["examples"] if e["subscription"] == "audit"]
    assert [e["txns"] for e in doubled] == [summary["planted"]["double-ack"][0]["txns"]]


def test_a_clean_synthetic_history_is_valid_with_every_value_and_transaction_judged(spark: object,
                                                                                    tmp_path: Path) -> None:
    """The benchmark's histories (tools.bench.checker) print their verdict beside their time, so a
    fast wrong answer shows: it must be valid, not unknown. A consumer's transaction whose commit
    ended `info` had no coordinator reading, and left unresolved-txn unjudged."""
    generate(SynthConfig(events=2000), tmp_path / "run", jobs=1)
    out = check_run(tmp_path / "run")
    assert out["valid"] is True, out["unknown_reasons"]
    assert out["transactions"]["unknown-committed"] + out["transactions"]["unknown-aborted"] > 0


def test_generate_refuses_a_used_folder(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("")
    with pytest.raises(FileExistsError):
        generate(SynthConfig(events=100), tmp_path / "run", jobs=1)
    with pytest.raises(ValueError, match="unknown anomaly classes"):
        generate(SynthConfig(events=100, plant=("lost-everything",)), tmp_path / "other", jobs=1)


@pytest.mark.slow
def test_a_million_events_with_every_class_planted(spark: object, tmp_path: Path) -> None:
    run = tmp_path / "big"
    summary = generate(SynthConfig(events=1_000_000, writers=2, plant=tuple(c.value for c in AnomalyClass)),
                       run, jobs=1)   # no fork next to the running JVM
    out = check_run(run)
    assert out["valid"] is False and out["history"]["lines"] == summary["events"]
    assert {k: v["count"] for k, v in out["anomalies"].items()} == summary["expected"]
    assert out["history"]["source"] == "parquet" and out["checker"]["events_per_s"] > 0
