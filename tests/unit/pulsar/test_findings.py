"""`txnbench finding`: the registry, the command line and the verdict, without a cluster.

The reproductions themselves run real Pulsar (`txnbench finding NAME`, and the smoke test's
strict expected failures); here: every registry entry names a finding file, a program whose
source exists and a release that has its path; the command parses as documented; the verdict
is read from the program's JSON lines (1 the bug shows, 0 it does not, 2 it could not run);
a program's request to restart a broker reaches the right one; broker log lines are quoted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError
from harness.target import ServiceRole
from harness.txn_paths import TxnPath
from orchestrator.cli import build_parser
from targets.pulsar import finding as fx
from targets.pulsar import finding_command, tool_finding, versions
from targets.pulsar.finding import COULD_NOT_RUN, NOT_SHOWN, SHOWS, Outcome, judge


def outcome(*lines: dict[str, Any], problem: str = "") -> Outcome:
    return Outcome("x", "4.0.8", lines=list(lines), problem=problem)


def attempt(n: int, shows: bool) -> dict[str, Any]:
    return {"kind": "try", "n": n, "shows": shows, "summary": "s", "examples": []}


DONE = {"kind": "done", "tries": 1, "shown": 0}


# ---- the registry ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(fx.FINDINGS))
def test_every_finding_names_its_file_its_program_and_a_release_with_its_path(name: str) -> None:
    finding = fx.FINDINGS[name]
    assert finding.name == name and finding.doc.is_file(), f"docs/findings/{name}.md"
    for source in finding.sources():
        assert source.is_file(), source
        assert "(not fetched)" in source.read_text() or "Written by txnbench" in source.read_text()
    assert f"public final class {finding.main_class} " in (fx.REPRO_SOURCES / f"{finding.main_class}.java").read_text()
    release = versions.RELEASES[finding.release]
    assert release.supports(finding.txn_path)
    assert finding.tries >= 1 and finding.try_timeout_s > 0 and finding.brokers >= 1
    assert finding.race == (finding.tries > 1), "a race gets several tries and a rate, a deterministic bug one"
    assert all(isinstance(s, str) and s for s in finding.log_signs)


def test_an_unknown_finding_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="v4-commit-marker-skipped-on-bundle-unload"):
        fx.get("no-such-finding")


def test_the_program_gets_the_cluster_the_tries_and_the_findings_own_arguments() -> None:
    finding = fx.FINDINGS["v4-commit-marker-skipped-on-bundle-unload"]
    argv = fx.program_argv("/jdk/bin/java", "/c:/j", finding, service_url="pulsar://h:1,h:2",
                           admin_url="http://h:3", listener="external", tries=7)
    assert argv[:5] == ["/jdk/bin/java", "-Xmx384m", "-cp", "/c:/j", finding.main_class]
    pairs = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert pairs["--service-url"] == "pulsar://h:1,h:2" and pairs["--admin-url"] == "http://h:3"
    assert pairs["--tries"] == "7" and pairs["--listener"] == "external"


def test_one_finding_file_can_have_a_v4_and_a_v5_reproduction_by_one_program() -> None:
    v4 = fx.FINDINGS["empty-terminated-topic-rejects-readers"]
    v5 = fx.FINDINGS["v5-empty-merged-segment-rejects-readers"]
    assert v4.doc == v5.doc == fx.FINDINGS_DOCS / "empty-terminated-topic-rejects-readers.md"
    assert v4.main_class == v5.main_class and v4.sources() == v5.sources()
    assert (v4.txn_path, v5.txn_path) == (TxnPath.V4, TxnPath.V5)
    # the v4 shape runs on a release without the v5 path too (the managed ledger is the same since 4.0)
    assert versions.RELEASES["4.0.8"].supports(v4.txn_path) and not versions.RELEASES["4.0.8"].supports(v5.txn_path)
    argv = fx.program_argv("java", "cp", v5, service_url="pulsar://h:1", admin_url="http://h:2", listener=None,
                           tries=1)
    pairs = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert pairs["--segments"] == "true" and "--listener" not in pairs
    assert "--segments" not in fx.program_argv("java", "cp", v4, service_url="pulsar://h:1", admin_url="http://h:2",
                                               listener=None, tries=1)


# ---- the command line --------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["finding", *argv])


def test_finding_name_tries_and_release_parse() -> None:
    args = parse("v4-commit-marker-skipped-on-bundle-unload", "--tries", "3", "--pulsar-version", "5.0.1")
    assert (args.name, args.tries, args.pulsar_version, args.all) == \
        ("v4-commit-marker-skipped-on-bundle-unload", 3, "5.0.1", False)
    assert parse("--all").all is True and parse("--all").name is None
    with pytest.raises(SystemExit):
        parse("x", "--tries", "0")


def test_a_name_and_all_together_or_neither_is_refused() -> None:
    with pytest.raises(ConfigError, match="name one finding or pass --all"):
        finding_command.main_finding(parse())
    with pytest.raises(ConfigError):
        finding_command.main_finding(parse("v4-commit-marker-skipped-on-bundle-unload", "--all"))


@pytest.mark.parametrize(("codes", "expected"), [
    ([SHOWS, NOT_SHOWN], SHOWS), ([NOT_SHOWN, NOT_SHOWN], NOT_SHOWN), ([SHOWS, COULD_NOT_RUN], COULD_NOT_RUN)])
def test_all_runs_every_finding_and_exits_by_the_worst(monkeypatch: pytest.MonkeyPatch, codes: list[int],
                                                       expected: int) -> None:
    names = [f"f{i}" for i in range(len(codes))]
    registry = {n: fx.Finding(name=n, release="4.0.8", txn_path=fx.TxnPath.V4, main_class="M", what="w")
                for n in names}
    monkeypatch.setattr(fx, "FINDINGS", registry)
    monkeypatch.setattr(tool_finding, "TOOL_FINDINGS", {})   # the tool kind: test_tool_findings.py
    lines = {NOT_SHOWN: [attempt(1, False), DONE], SHOWS: [attempt(1, True), DONE], COULD_NOT_RUN: []}
    ran: list[tuple[str, int | None, str | None]] = []

    def fake_run(finding: fx.Finding, *, tries: int | None, version: str | None, results: Path,
                 args: tuple[str, ...], brokers: int | None) -> Outcome:
        assert args == ("--fault", "restart") and brokers == 1
        ran.append((finding.name, tries, version))
        return Outcome(finding.name, "4.0.8", lines=list(lines[codes[names.index(finding.name)]]))

    monkeypatch.setattr(fx, "run_finding", fake_run)
    assert finding_command.main_finding(parse("--all", "--tries", "2", "--brokers", "1", "--program-args",
                                              "--fault restart")) \
        == expected
    assert ran == [(n, 2, None) for n in names]


# ---- the verdict -------------------------------------------------------------------------------


def test_a_try_that_shows_the_bug_is_exit_1_with_its_rate() -> None:
    seen = outcome(attempt(1, False), attempt(2, True), attempt(3, False), attempt(4, True), DONE)
    assert judge(seen) == SHOWS and seen.shown == 2 and seen.rate == 0.5
    assert "the bug shows: 2 of 4 tries (50%)" in fx.summary(seen)


def test_tries_that_never_show_it_are_exit_0() -> None:
    seen = outcome(attempt(1, False), attempt(2, False), DONE)
    assert judge(seen) == NOT_SHOWN and seen.rate == 0.0


@pytest.mark.parametrize("case", ["nothing", "error line", "problem", "unjudged try"])
def test_no_finished_try_or_a_failed_step_is_exit_2(case: str) -> None:
    seen = {"nothing": outcome(),
            "error line": outcome(attempt(1, False), {"kind": "error", "what": "set-up failed"}, DONE),
            "problem": outcome(attempt(1, False), problem="the program did not finish"),
            "unjudged try": outcome({"kind": "try", "n": 1, "shows": None}, DONE)}[case]
    assert judge(seen) == COULD_NOT_RUN
    assert "could not run" in fx.summary(seen)


def test_the_bug_showing_wins_over_a_later_failure() -> None:
    assert judge(outcome(attempt(1, True), {"kind": "error", "what": "try 2 set-up"}, DONE)) == SHOWS


def test_only_json_lines_with_a_kind_are_the_programs_output() -> None:
    assert fx.parse_line('{"kind":"try","n":1,"shows":true}\n') == {"kind": "try", "n": 1, "shows": True}
    for text in ("SLF4J: no binding", '{"no": "kind"}', "{broken", "[1]"):
        assert fx.parse_line(text) is None


def test_the_verdict_file_says_what_was_judged() -> None:
    data = outcome(attempt(1, True), attempt(2, False), DONE).to_json()
    assert (data["exit_code"], data["verdict"], data["tries"], data["shown"], data["rate"]) == \
        (1, "the bug shows", 2, 1, 0.5)
    json.dumps(data)


# ---- running a program (a tiny Python stand-in, not Java) ---------------------------------------


STAND_IN = r"""
import json, sys
print("a log line the harness ignores", flush=True)
print(json.dumps({"kind": "ask", "action": "restart-broker", "target": "http://127.0.0.1:9"}), flush=True)
answer = sys.stdin.readline().strip()
print(json.dumps({"kind": "try", "n": 1, "shows": answer == "done", "summary": answer, "examples": ["e"]}), flush=True)
print(json.dumps({"kind": "done", "tries": 1, "shown": 1}), flush=True)
sys.exit(1)
"""


def test_run_program_answers_asks_and_collects_the_lines(tmp_path: Path) -> None:
    asked: list[tuple[str, str]] = []
    said: list[str] = []

    def ask(action: str, target: str) -> str:
        asked.append((action, target))
        return "done"

    lines, code, _ = fx.run_program([sys.executable, "-c", STAND_IN], ask=ask, timeout_s=60, say=said.append,
                                    log=tmp_path / "program.jsonl")
    assert asked == [("restart-broker", "http://127.0.0.1:9")] and code == 1
    assert [line["kind"] for line in lines] == ["ask", "try", "done"] and lines[1]["shows"] is True
    assert any("BUG SHOWS" in s for s in said) and any("answered: done" in s for s in said)
    assert len((tmp_path / "program.jsonl").read_text().splitlines()) == 3


def test_a_program_past_its_time_is_killed_and_has_no_exit_status(tmp_path: Path) -> None:
    lines, code, _ = fx.run_program([sys.executable, "-c", "import time; time.sleep(30)"], ask=lambda a, t: "done",
                                    timeout_s=0.5, say=lambda s: None)
    assert lines == [] and code is None


class FakeService:
    def __init__(self, name: str, admin: str, service: str) -> None:
        self.name, self.admin_url, self.service_url = name, admin, service
        self.role, self.internal_urls = ServiceRole.BROKER, (service.replace("pulsar://", "pulsar://in-"),)


class FakeCluster:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.services = [FakeService("broker-0", "http://127.0.0.1:81", "pulsar://127.0.0.1:61"),
                         FakeService("broker-1", "http://127.0.0.1:82", "pulsar://127.0.0.1:62")]

    def info(self) -> Any:
        return argparse.Namespace(services=self.services, toxiproxy_url="http://127.0.0.1:8474")

    def stop(self, name: str) -> None:
        self.calls.append(f"stop {name}")

    def kill(self, name: str) -> None:
        self.calls.append(f"kill {name}")

    def start(self, name: str) -> None:
        self.calls.append(f"start {name}")


def test_a_broker_is_restarted_or_killed_by_its_admin_or_service_url() -> None:
    cluster = FakeCluster()
    assert fx.broker_action(cluster, "restart-broker", "http://127.0.0.1:82/") == "done"
    assert fx.broker_action(cluster, "kill-broker", "pulsar://127.0.0.1:61") == "done"
    assert cluster.calls == ["stop broker-1", "start broker-1", "kill broker-0", "start broker-0"]
    assert "no broker" in fx.broker_action(cluster, "kill-broker", "http://elsewhere:1")
    assert "unknown action" in fx.broker_action(cluster, "pause-broker", "http://127.0.0.1:81")


class FakeLinks:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, api_url: str, link: str, enabled: bool) -> None:
        assert api_url == "http://127.0.0.1:8474"
        self.calls.append(("enable" if enabled else "disable", link))


def test_a_brokers_metadata_link_is_cut_now_and_mended_in_the_background() -> None:
    """The program acts while the broker is cut off (past its metadata session), so the answer comes
    at once and the link is mended after the asked seconds; bad seconds are refused."""
    links = FakeLinks()
    answer = fx.broker_action(FakeCluster(), "cut-metadata:0.2", "http://127.0.0.1:82", set_link=links)
    assert answer == "done" and links.calls == [("disable", "broker-1-metadata")]
    deadline = time.monotonic() + 5
    while len(links.calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert links.calls == [("disable", "broker-1-metadata"), ("enable", "broker-1-metadata")]
    assert "outside" in fx.broker_action(FakeCluster(), "cut-metadata:600", "http://127.0.0.1:82", set_link=links)
    assert "wants seconds" in fx.broker_action(FakeCluster(), "cut-metadata:x", "http://127.0.0.1:82", set_link=links)


def test_the_link_other_brokers_reach_a_broker_through_is_cut_and_mended() -> None:
    """`cut-peers`: a coordinator on another broker cannot reach the broker's partitions (its
    END_TXN_ON_PARTITION waits), while clients still reach it on their own link."""
    links = FakeLinks()
    assert fx.broker_action(FakeCluster(), "cut-peers:0.2", "http://127.0.0.1:82", set_link=links) == "done"
    deadline = time.monotonic() + 5
    while len(links.calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert links.calls == [("disable", "brokers-broker-1"), ("enable", "brokers-broker-1")]
    assert "cut-peers wants seconds" in fx.broker_action(FakeCluster(), "cut-peers:x", "http://127.0.0.1:82",
                                                         set_link=links)
    assert fx.broker_action(FakeCluster(), "cut-ledger:1", "http://127.0.0.1:82", set_link=links).startswith(
        "unknown action")


def test_broker_log_lines_with_a_sign_are_quoted_and_counted(tmp_path: Path) -> None:
    (tmp_path / "broker-0.log").write_text("x\n03:07:39.199 ERROR endTxn error topic: [t-partition-1]\ny\n")
    (tmp_path / "broker-1.log").write_text("nothing here\n")
    (tmp_path / "ledger.log").write_text("endTxn error topic: not a broker\n")
    quoted = fx.quote_logs(tmp_path, ("endTxn error topic", "Successes to abort low water mark"))
    assert list(quoted) == ["broker-0.log"]
    assert quoted["broker-0.log"][0] == "1 x 'endTxn error topic'" and "t-partition-1" in quoted["broker-0.log"][1]


def test_the_brokers_ledger_link_is_delayed_now_and_restored_in_the_background() -> None:
    """`slow-ledger:MS,S`: every ledger write (a subscription's commit mark, a coordinator's log) takes
    MS ms longer for S seconds; the answer comes at once; bad values are refused."""
    calls: list[tuple[str, int | None]] = []

    def set_latency(url: str, link: str, latency_ms: int | None) -> None:
        calls.append((link, latency_ms))

    answer = fx.broker_action(FakeCluster(), "slow-ledger:3500,0.2", "http://127.0.0.1:82", set_latency=set_latency)
    assert answer == "done" and calls == [("brokers-ledger", 3500)]
    deadline = time.monotonic() + 5
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls == [("brokers-ledger", 3500), ("brokers-ledger", None)]
    assert "outside" in fx.broker_action(FakeCluster(), "slow-ledger:50000,5", "http://127.0.0.1:82",
                                         set_latency=set_latency)
    assert "wants a delay" in fx.broker_action(FakeCluster(), "slow-ledger:5", "http://127.0.0.1:82",
                                               set_latency=set_latency)
