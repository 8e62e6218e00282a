"""The table of Pulsar releases and `txnbench releases`, without Maven or a cluster.

`check_release` is driven with stand-ins for resolving and starting; tests/pulsar starts a
real old release (`test_oldest_release_real.py`).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from harness.txn_paths import PIP_160_BATCHED_WRITES, TxnPath
from orchestrator.cli import build_parser, main
from targets.pulsar import conf, jars, release_check
from targets.pulsar.cluster import PulsarSpec
from targets.pulsar.release_check import Seen, check_release, differences, row, why
from targets.pulsar.versions import (
    BATCHED_SETTINGS,
    DEFAULT_RELEASE,
    PARENT_BOM,
    RELEASES,
    Checked,
    listed,
    release,
    runnable,
)

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def test_every_line_from_2_10_is_in_the_table_with_the_java_it_needs() -> None:
    lines = {r.line.name for r in RELEASES.values()}
    assert {"2.10", "2.11", "3.0", "3.1", "3.2", "3.3", "4.0", "5.0"} <= lines
    for r in RELEASES.values():
        assert r.min_java == (21 if r.line.name.startswith("5.") else 17), r.version
    assert DEFAULT_RELEASE.version == "5.0.1" and DEFAULT_RELEASE in runnable()


def test_paths_follow_pip_160_and_pip_473() -> None:
    assert listed("2.10.5").line.paths() == (TxnPath.V4,)                      # PIP-160 shipped in 2.11.0
    assert listed("2.11.0").line.paths() == (TxnPath.V4, TxnPath.V4_BATCHED)
    assert listed("4.0.8").line.paths() == (TxnPath.V4, TxnPath.V4_BATCHED)
    assert listed("5.0.1").line.paths() == (TxnPath.V4, TxnPath.V4_BATCHED, TxnPath.V5)
    for r in runnable():   # what was recorded as starting is a path the line has
        assert set(r.checked.starts) <= {p.value for p in r.line.paths()}, r.version


def test_broker_settings_drop_what_a_line_lacks_and_add_what_it_needs() -> None:
    batched = conf.path_settings(TxnPath.V4_BATCHED)
    old = listed("2.10.5").line.broker_settings(batched)
    assert not BATCHED_SETTINGS & old.keys()   # 2.10 has no PIP-160 setting: none written
    assert old["transactionCoordinatorEnabled"] is True
    assert old["loadBalancerOverrideBrokerNicSpeedGbps"] == 10   # 2.10 to 3.1 refuse to start without it here
    assert listed("3.1.0").line.broker_settings({})["loadBalancerOverrideBrokerNicSpeedGbps"] == 10
    assert "loadBalancerOverrideBrokerNicSpeedGbps" not in listed("3.2.0").line.broker_settings({})
    assert listed("2.11.0").line.broker_settings({"loadBalancerOverrideBrokerNicSpeedGbps": 1}) == \
        {"loadBalancerOverrideBrokerNicSpeedGbps": 1}   # a setting given wins
    new = listed("4.0.8").line.broker_settings(batched)
    assert new == batched and set(PIP_160_BATCHED_WRITES) <= new.keys()
    assert "scalableTopicsEnabled" not in new
    v5 = conf.path_settings(TxnPath.V5)
    assert DEFAULT_RELEASE.line.broker_settings(v5) == v5


def test_release_takes_what_runs_and_says_why_the_others_do_not() -> None:
    assert release(None) is DEFAULT_RELEASE and release("4.0.8").version == "4.0.8"
    for r in runnable():
        assert release(r.version) is r
    with pytest.raises(ValueError, match=r"4\.0\.14 does not run here \(the mirror answers 404.*5\.0\.1.*"
                                         r"txnbench releases --check 4\.0\.14"):
        release("4.0.14")
    with pytest.raises(ValueError, match=r"9\.9\.9 is not in the pulsar target's table"):
        release("9.9.9")
    assert listed("4.0.14").version == "4.0.14"   # --check may still try it
    assert PulsarSpec(version="4.0.14", trial=True).release.version == "4.0.14"
    with pytest.raises(ValueError, match="does not run here"):
        _ = PulsarSpec(version="4.0.14").release


def _profiles() -> dict[str, ET.Element]:
    root = ET.parse(jars.POM).getroot()
    return {p.findtext("m:id", namespaces=POM_NS) or "": p for p in root.iterfind("m:profiles/m:profile", POM_NS)}


def test_the_pom_has_a_profile_per_resolved_release_with_the_pins_the_table_names() -> None:
    profiles = _profiles()
    for r in RELEASES.values():
        if not r.checked.resolves:
            continue
        profile = profiles.get(f"pulsar-{r.version}")
        assert profile is not None, f"maven/pom.xml has no profile for {r.version}"
        value = profile.findtext("m:activation/m:property/m:value", namespaces=POM_NS)
        assert value == r.version
        text = ET.tostring(profile, encoding="unicode")
        if r.pins.startswith(PARENT_BOM):   # Pulsar's parent POM as a BOM: the versions its build aligned
            assert "<ns0:artifactId>pulsar</ns0:artifactId>" in text and "<ns0:scope>import</ns0:scope>" in text
    pulsar5 = ET.tostring(profiles["pulsar-5.0.1"], encoding="unicode")
    for version in (DEFAULT_RELEASE.bookkeeper, DEFAULT_RELEASE.zookeeper, DEFAULT_RELEASE.netty):
        assert f">{version}<" in pulsar5, version
    for r in RELEASES.values():   # pulsar-testclient (pulsar-perf) only where the table says it is served
        text = ET.tostring(profiles[f"pulsar-{r.version}"], encoding="unicode") if r.checked.resolves else ""
        assert ("pulsar-testclient" in text) == r.perf, r.version


def seen(version: str, checked: str = "2099-01-01 00:00 UTC", **kw: object) -> Seen:
    return Seen(version=version, checked=checked, resolves=bool(kw.pop("resolves", True)), **kw)  # type: ignore[arg-type]


def test_a_row_shows_the_newer_facts_and_keeps_paths_a_check_did_not_try() -> None:
    r = listed("4.0.8")
    assert row(r, None).source == "recorded" and row(r, None).starts == r.checked.starts
    older = seen("4.0.8", checked="2000-01-01 00:00 UTC", starts=())
    assert row(r, older).source == "recorded"
    newer = row(r, seen("4.0.8", starts=("v4",)))   # --paths v4: v4-batched keeps its recorded outcome
    assert newer.source == "here" and newer.starts == ("v4", "v4-batched")
    failed = row(r, seen("4.0.8", starts=(), failed={"v4": "x", "v4-batched": "y"}, why_not="v4: x"))
    assert failed.starts == () and not failed.runs and failed.why_not == "v4: x"


def test_differences_name_what_changed_since_the_table() -> None:
    r = listed("4.0.8")
    assert differences(seen("4.0.8", starts=("v4", "v4-batched")), r) == []
    assert differences(seen("4.0.8", starts=("v4",)), r) == []   # only v4 was tried
    assert differences(seen("4.0.8", failed={"v4": "x"}), r) == ["starts on no path of v4, recorded v4"]
    assert differences(seen("4.0.14"), listed("4.0.14")) == ["resolves: yes, recorded no"]
    assert differences(seen("5.0.1", resolves=False), DEFAULT_RELEASE) == ["resolves: no, recorded yes"]


def test_why_keeps_one_line_with_the_telling_exception() -> None:
    err = EnvironmentProblem("broker-0 exited during start-up (code 1); see x.log; last lines:\n"
                             "2026 INFO starting\n2026 ERROR [main] o.a.p.b.PulsarService - Failed to start\n"
                             "java.lang.IllegalStateException: Unable to read VM NIC speed.")
    assert why(err) == ("broker-0 exited during start-up (code 1); see x.log; last lines: ... "
                        "2026 ERROR [main] o.a.p.b.PulsarService - Failed to start")
    assert why(EnvironmentProblem("x" * 1000)) == "x" * release_check.WHY_CHARS
    maven = EnvironmentProblem("resolving Apache Pulsar 5.0.0's jars failed (mvn exit 1): Failed to execute goal on "
                               "project txnbench-pulsar-jars: Could not resolve dependencies for project "
                               "io.txnbench:txnbench-pulsar-jars:pom:1: Could not find artifact "
                               "org.apache.pulsar:pulsar-broker:jar:5.0.0 in central; full log: x")
    assert why(maven) == ("resolving Apache Pulsar 5.0.0's jars failed (mvn exit 1): Could not find artifact "
                          "org.apache.pulsar:pulsar-broker:jar:5.0.0 in central; full log: x")


def test_check_release_resolves_then_starts_each_path(tmp_path: Path) -> None:
    r = listed("4.0.8")
    started: list[TxnPath] = []

    def start(rel: object, txn_path: TxnPath, directory: Path, say: object) -> None:
        started.append(txn_path)
        if txn_path is TxnPath.V4_BATCHED:
            raise EnvironmentProblem("no transaction committed on the v4-batched path")

    out = check_release(r, directory=tmp_path / "c", say=lambda _: None,
                        resolve=lambda rel, say: {**r.components(), "java": "17"}, start=start)
    assert started == [TxnPath.V4, TxnPath.V4_BATCHED]
    assert out.resolves and out.starts == ("v4",) and out.failed == {"v4-batched": "no transaction committed on "
                                                                                      "the v4-batched path"}
    assert out.why_not.startswith("v4-batched: ") and out.note == ""
    assert differences(out, r) == ["starts on v4 of v4 v4-batched, recorded v4 v4-batched"]


def test_check_release_records_what_does_not_resolve_and_a_classpath_that_differs(tmp_path: Path) -> None:
    def refuse(rel: object, say: object) -> dict[str, str]:
        raise EnvironmentProblem("resolving Apache Pulsar 4.0.14's jars failed (mvn exit 1): Could not find "
                                 "artifact org.apache.pulsar:pulsar-broker:jar:4.0.14")

    def boom(*_: object) -> None:
        raise AssertionError("nothing starts when nothing resolved")

    out = check_release(listed("4.0.14"), say=lambda _: None, resolve=refuse, start=boom)
    assert not out.resolves and "pulsar-broker:jar:4.0.14" in out.why_not
    r = listed("3.3.2")
    other = check_release(r, [TxnPath.V4, TxnPath.V5], directory=tmp_path, say=lambda _: None,
                          resolve=lambda rel, say: {**r.components(), "zookeeper": "3.8.4"},
                          start=lambda *_: None)
    assert other.starts == ("v4",)   # v5 is not a path 3.3 has: not tried
    assert other.note == f"classpath differs from the table: zookeeper 3.8.4 (table: {r.zookeeper})"


def test_checks_are_kept_beside_each_other(tmp_path: Path) -> None:
    path = tmp_path / "releases.json"
    assert release_check.load_seen(path) == {}
    first = seen("2.10.5", starts=("v4",), components={"pulsar": "2.10.5"})
    release_check.save_seen(path, first)
    release_check.save_seen(path, seen("4.0.14", resolves=False, why_not="404"))
    loaded = release_check.load_seen(path)
    assert loaded["2.10.5"] == first and not loaded["4.0.14"].resolves
    path.write_text("not json")
    assert release_check.load_seen(path) == {}


def test_the_cli_parses_releases_and_its_check() -> None:
    args = build_parser().parse_args(["releases", "--check", "2.10.5", "3.3.2", "--paths", "v4", "v4-batched"])
    assert args.check and args.versions == ["2.10.5", "3.3.2"] and args.paths == ["v4", "v4-batched"]
    args = build_parser().parse_args(["releases"])
    assert not args.check and args.versions == [] and args.paths is None and not args.json
    with pytest.raises(SystemExit):
        build_parser().parse_args(["releases", "--check", "--paths", "v6"])


def test_releases_lists_the_table_and_refuses_bad_input(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path))
    assert main(["releases"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:6] == ["release", "line", "Java", "BookKeeper", "ZooKeeper", "netty"]
    assert "5.0.1 *" in out and "4.0.14: the mirror answers 404" in out
    assert main(["releases", "--json", "2.10.5"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [e["version"] for e in listing] == ["2.10.5"] and listing[0]["paths"] == ["v4"]
    assert main(["releases", "9.9.9"]) == 2
    assert "not in the pulsar target's table" in capsys.readouterr().err
    assert main(["releases", "--paths", "v4"]) == 2   # --paths only with --check


def test_releases_check_records_each_outcome_and_exits_1_when_it_differs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path))
    calls: list[tuple[str, object]] = []

    def fake_check(rel: object, paths: object, **_: object) -> Seen:
        version = rel.version   # type: ignore[attr-defined]
        calls.append((version, paths))
        recorded: Checked = rel.checked   # type: ignore[attr-defined]
        return seen(version, resolves=recorded.resolves, starts=recorded.starts)

    monkeypatch.setattr(release_check, "check_release", fake_check)
    assert main(["releases", "--check", "4.0.8", "2.10.6", "--paths", "v4"]) == 0
    assert calls == [("4.0.8", [TxnPath.V4]), ("2.10.6", [TxnPath.V4])]
    out = capsys.readouterr().out
    assert "(here)" in out and set(release_check.load_seen(release_check.cache_path())) == {"4.0.8", "2.10.6"}
    monkeypatch.setattr(release_check, "check_release",
                        lambda rel, paths, **_: seen(rel.version, resolves=False, why_not="404"))
    assert main(["releases", "--check", "4.0.8"]) == 1
    assert "4.0.8: resolves: no, recorded yes" in capsys.readouterr().err
