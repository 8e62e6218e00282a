"""The second kind of finding (a tool beside the broker: pulsar-perf, Oxia), without a cluster or a socket.

The reproductions run the real tools (`txnbench finding pulsar-perf-txnrate-ignored`,
`txnbench finding oxia-v0.14.0-wal-offset-race`, recorded in the finding files); here: the
registry names every finding file, the command lists and runs both kinds alike, each
reproduction's decision (the measured rate against the asked one and the control; a WAL
offset error or another failure) is the `try` line the verdict reads, and a tool finding's run
gives the Java kind's exit codes, printed lines and files.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import EnvironmentProblem
from orchestrator.cli import build_parser
from targets.pulsar import finding as fx
from targets.pulsar import finding_command as cmd
from targets.pulsar import oxia_race, perf_txnrate, versions
from targets.pulsar import tool_finding as tf
from targets.pulsar.finding import COULD_NOT_RUN, NOT_SHOWN, SHOWS, Outcome, judge
from targets.pulsar.perf import PerfRun

# ---- the registry: every finding file has a reproduction -----------------------------------------


def test_every_finding_file_has_a_reproduction_named_in_its_reproduce_section() -> None:
    docs = {p for p in fx.FINDINGS_DOCS.glob("*.md") if p.name != "README.md"}
    by_doc: dict[Path, list[str]] = {}
    for name, finding in cmd.registry().items():
        by_doc.setdefault(finding.doc, []).append(name)
    assert docs <= set(by_doc), f"without `txnbench finding`: {sorted(p.name for p in docs - set(by_doc))}"
    for doc in docs:
        assert any(f"txnbench finding {name}" in doc.read_text() for name in by_doc[doc]), doc.name


def test_tool_findings_name_their_files_and_a_release_that_runs_them() -> None:
    assert not set(tf.TOOL_FINDINGS) & set(fx.FINDINGS), "one name, one finding"
    for name, finding in tf.TOOL_FINDINGS.items():
        assert finding.name == name and finding.doc.is_file()
        assert finding.race == (finding.tries > 1)
        if finding.release:
            release = versions.RELEASES[finding.release]
            assert finding.txn_path is not None and release.supports(finding.txn_path)
            assert release.perf or not finding.needs_perf


def test_list_shows_both_kinds_and_keeps_the_java_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.main_finding(build_parser().parse_args(["finding", "--list"])) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert set(lines) == set(fx.FINDINGS) | set(tf.TOOL_FINDINGS)
    assert "pulsar-perf 4.0.8 deterministic, 1 try" in lines["pulsar-perf-txnrate-ignored"]
    assert "Oxia v0.14.0      race, 3 tries" in lines["oxia-v0.14.0-wal-offset-race"]
    assert "Pulsar 4.0.8   v4   race, 5 tries" in lines["v4-commit-marker-skipped-on-bundle-unload"]


def test_an_unknown_name_lists_both_kinds() -> None:
    with pytest.raises(fx.ConfigError, match=r"oxia-v0\.14\.0-wal-offset-race"):
        cmd.get("no-such-finding")


# ---- pulsar-perf: the measured rate against the asked one ----------------------------------------


def prom(**per_coordinator: float) -> str:
    return "".join(f'pulsar_txn_committed_total{{cluster="c",coordinator_id="{c}"}} {v}\n'
                   for c, v in per_coordinator.items()) + "# HELP x\nother_total 5\n"


def test_the_brokers_committed_transactions_are_summed_and_a_rate_taken_over_the_perf_time() -> None:
    before = {"broker-0": prom(**{"0": 1.0}), "broker-1": prom(**{"1": 0.0, "2": 0.0}), "bookie": prom(**{"9": 99.0})}
    after = {"broker-0": prom(**{"0": 2000.0}), "broker-1": prom(**{"1": 1500.0, "2": 1001.0}),
             "bookie": prom(**{"9": 0.0})}
    assert perf_txnrate.committed(before) == 1.0 and perf_txnrate.committed(after) == 4501.0
    assert perf_txnrate.committed_rate(before, after, 45) == pytest.approx(100.0)
    assert perf_txnrate.committed({"broker-0": "other_total 1\n"}) is None
    assert perf_txnrate.committed_rate({}, after, 45) is None


@pytest.mark.parametrize(("achieved", "control", "shows"), [
    (127.4, 91.3, True),          # the finding's runs: the limit ignored
    (4.5, 91.3, True),            # above twice the asked 2 txn/s
    (2.1, 91.3, False),           # held, and the control shows the cluster could go far faster
    (2.1, 6.0, None),             # held, but so slow a cluster cannot tell a held limit from its own pace
])
def test_a_try_shows_the_bug_when_the_rate_is_not_held(achieved: float, control: float, shows: bool | None) -> None:
    line = perf_txnrate.judge_try(1, 2, achieved, control)
    assert line["kind"] == "try" and line["shows"] is shows
    assert f"-txnRate 2: {achieved:.1f} committed txn/s" in line["summary"]
    assert f"without -txnRate {control:.1f} txn/s" in line["summary"]


def test_the_limited_run_asks_for_the_rate_and_the_control_does_not() -> None:
    release = versions.RELEASES["4.0.8"]
    limited = perf_txnrate.plan(release, "t-1", perf_txnrate.ASKED_RATE).argv("pulsar://h:1", "http://h:2", None)
    control = perf_txnrate.plan(release, "t-control", None).argv("pulsar://h:1", "http://h:2", None)
    assert limited[limited.index("-txnRate") + 1] == "2" and "-txnRate" not in control
    assert limited[limited.index("-threads") + 1] == "1" and limited[limited.index("-nmp") + 1] == "1"
    assert limited[limited.index("--topics-p") + 1] != control[control.index("--topics-p") + 1]
    assert "--client-api" in perf_txnrate.plan(versions.RELEASES["5.0.1"], "t", 2).argv("p", "h", None)


def fake_perf(rates: dict[str, float]) -> Any:
    """`run_perf` that leaves the metric files a run of that many committed txn/s would."""
    def run(plan: Any, *, out_dir: Path) -> PerfRun:
        rate = rates["control" if plan.txn_rate is None else "limited"]
        (out_dir / "metrics").mkdir(parents=True)
        (out_dir / "metrics" / "before-broker-0.prom").write_text(prom(**{"0": 10.0}))
        (out_dir / "metrics" / "after-broker-0.prom").write_text(prom(**{"0": 10.0 + rate * plan.duration_s}))
        return PerfRun(argv=[], out_dir=out_dir, log_path=out_dir / "pulsar-perf.log", exit_code=0)
    return run


def test_the_control_then_each_try_as_the_java_programs_lines(tmp_path: Path) -> None:
    lines = list(perf_txnrate.reproduce(fake_perf({"control": 91.3, "limited": 127.4}), versions.RELEASES["4.0.8"],
                                        tmp_path, tries=2, tag="t"))
    assert [line["kind"] for line in lines] == ["info", "try", "try", "done"]
    assert lines[0]["value"] == "91.3 committed txn/s"
    assert lines[1]["achieved_txn_per_s"] == pytest.approx(127.4) and lines[1]["control_txn_per_s"] == 91.3
    seen = Outcome("pulsar-perf-txnrate-ignored", "4.0.8", lines=lines)
    assert judge(seen) == SHOWS and seen.rate == 1.0
    held = list(perf_txnrate.reproduce(fake_perf({"control": 91.3, "limited": 2.0}), versions.RELEASES["4.0.8"],
                                       tmp_path / "held", tries=1, tag="t"))
    assert judge(Outcome("x", "4.0.8", lines=held)) == NOT_SHOWN


def test_brokers_without_the_counter_could_not_run(tmp_path: Path) -> None:
    def run(plan: Any, *, out_dir: Path) -> PerfRun:
        return PerfRun(argv=[], out_dir=out_dir, log_path=out_dir / "x")    # no metrics files

    lines = list(perf_txnrate.reproduce(run, versions.RELEASES["4.0.8"], tmp_path, tries=1, tag="t"))
    assert judge(Outcome("x", "4.0.8", lines=lines)) == COULD_NOT_RUN


# ---- Oxia: a WAL offset error, another failure, none ---------------------------------------------


WAL = "UNKNOWN: oxia: failed to append to wal: 178 can not immediately follow 176: oxia: invalid next offset in wal"


@pytest.mark.parametrize(("error", "wal_errors", "shows"), [
    (WAL, 3, True), (None, 2, True), (WAL, 0, True),
    (None, 0, False),                                     # 30 s of writes, none failed
    ("UNAVAILABLE: connection refused", 0, None),         # a failure, but not this bug: unjudged
])
def test_an_oxia_try_shows_the_bug_on_the_wal_offset_error(error: str | None, wal_errors: int,
                                                           shows: bool | None) -> None:
    line = oxia_race.judge_try(2, oxia_race.Observation(8, 0.3, 178, error, wal_errors))
    assert (line["n"], line["shows"], line["puts"]) == (2, shows, 178)
    assert line["examples"] == ([error] if error else [])


def test_the_tool_keeps_its_command_line_over_the_moved_reproduction() -> None:
    from tools.repro import oxia_wal_offset_race

    assert oxia_wal_offset_race.reproduce is oxia_race.reproduce and oxia_wal_offset_race.WAL_ERROR in WAL


# ---- running a tool finding: the Java kind's contract --------------------------------------------


def fake_finding(lines: list[dict[str, Any]], raises: Exception | None = None, tries: int = 2) -> tf.ToolFinding:
    def reproduce(run: tf.ToolRun) -> Iterator[dict[str, Any]]:
        assert run.cluster is None and run.release is None and run.tries == tries
        yield from lines
        if raises is not None:
            raise raises

    return tf.ToolFinding(name="fake-tool-bug", what="w", tool="Tool 1.0", reproduce=reproduce, tries=tries,
                          race=tries > 1)


def attempt(n: int, shows: bool | None) -> dict[str, Any]:
    return {"kind": "try", "n": n, "shows": shows, "summary": f"s{n}", "examples": []}


@pytest.mark.parametrize(("lines", "raises", "expected"), [
    ([attempt(1, True), attempt(2, False), {"kind": "done", "tries": 2, "shown": 1}], None, SHOWS),
    ([attempt(1, False), attempt(2, False), {"kind": "done", "tries": 2, "shown": 0}], None, NOT_SHOWN),
    ([attempt(1, False)], EnvironmentProblem("pulsar-perf exited 1"), COULD_NOT_RUN),
    ([attempt(1, True)], EnvironmentProblem("try 2 failed"), SHOWS),
    ([], None, COULD_NOT_RUN),
])
def test_a_tool_finding_gives_the_exit_codes_lines_and_files_of_a_java_one(
        tmp_path: Path, lines: list[dict[str, Any]], raises: Exception | None, expected: int) -> None:
    said: list[str] = []
    outcome = tf.run_tool_finding(fake_finding(lines, raises), results=tmp_path, say=said.append,
                                  version="5.0.1")
    assert outcome.exit_code == expected and outcome.system == "Tool 1.0"
    assert outcome.folder is not None
    verdict = json.loads((outcome.folder / "verdict.json").read_text())
    assert verdict["exit_code"] == expected and verdict["system"] == "Tool 1.0"
    assert len((outcome.folder / "program.jsonl").read_text().splitlines()) == len(lines)
    assert said[-1] == fx.summary(outcome) and said[-1].startswith("fake-tool-bug on Tool 1.0: ")
    assert any("--pulsar-version 5.0.1 ignored" in s for s in said)
    if expected == SHOWS and len(outcome.tries) == 2:
        assert "the bug shows: 1 of 2 tries (50%)" in said[-1]
        assert "try 1: BUG SHOWS: s1" in said and "try 2: not shown: s2" in said


def test_all_runs_both_kinds_and_the_tool_ones_ignore_program_args(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    java = fx.Finding(name="j", release="4.0.8", txn_path=fx.TxnPath.V4, main_class="M", what="w")
    tool = fake_finding([])
    monkeypatch.setattr(fx, "FINDINGS", {"j": java})
    monkeypatch.setattr(tf, "TOOL_FINDINGS", {tool.name: tool})
    ran: list[str] = []

    def java_run(finding: fx.Finding, **kw: Any) -> Outcome:
        ran.append(f"java {finding.name} {kw['args']}")
        return Outcome(finding.name, "4.0.8", lines=[attempt(1, False), {"kind": "done"}])

    def tool_run(finding: tf.ToolFinding, **kw: Any) -> Outcome:
        ran.append(f"tool {finding.name} {kw['tries']}")
        return Outcome(finding.name, "", lines=[attempt(1, True)], system=finding.tool)

    monkeypatch.setattr(fx, "run_finding", java_run)
    monkeypatch.setattr(tf, "run_tool_finding", tool_run)
    args: argparse.Namespace = build_parser().parse_args(["finding", "--all", "--tries", "3", "--program-args=-x"])
    assert cmd.main_finding(args) == SHOWS
    assert ran == ["java j ('-x',)", "tool fake-tool-bug 3"]
    out = capsys.readouterr().out
    assert "--program-args ignored" in out and "fake-tool-bug on Tool 1.0: the bug shows: 1 of 1 tries" in out
