"""The Java transaction check's pure parts: its client pom, cache, JDK search and output parsing.

No process starts here (the fake `java`s are shell scripts); tests/cluster and tests/pulsar
run the program against clusters.
"""

from __future__ import annotations

import stat
import threading
import time
import zipfile
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from harness.txn_paths import TxnPath
from targets.pulsar import jars, txn_check
from targets.pulsar import java as java_finder
from targets.pulsar.jars import Classpath
from targets.pulsar.txn_check import CheckOutcome, TxnCheckProgram
from targets.pulsar.versions import PULSAR_4_LTS, PULSAR_5


def fake_jdk(folder: Path, version: str, *, javac: bool) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2025-01-01\' >&2\n')
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    if javac:
        (folder / "bin" / "javac").write_text("#!/bin/sh\n")
    return java


def test_the_client_pom_resolves_pulsar_client_and_on_5_the_v5_client() -> None:
    text = jars.CLIENT_POM.read_text()
    assert "<client.artifactId>pulsar-client</client.artifactId>" in text   # 4.x: the shaded client
    assert "<id>pulsar-5.0.1</id>" in text and "<client.artifactId>pulsar-client-v5</client.artifactId>" in text
    assert jars.pom_digest(jars.CLIENT_POM) != jars.pom_digest(jars.POM)


def test_the_client_jars_have_their_own_cache_beside_the_release(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    digest = jars.pom_digest(jars.CLIENT_POM)
    lib = tmp_path / "4.0.8" / f"client-lib-{digest}"
    lib.mkdir(parents=True)
    (lib / "pulsar-client-4.0.8.jar").write_bytes(b"")
    (tmp_path / "4.0.8" / f"client-classpath-{digest}.json").write_text(f'{{"pom_digest": "{digest}"}}')
    monkeypatch.setenv("PATH", str(tmp_path))   # no mvn: reuse must not need it
    classpath = jars.ensure_jars(PULSAR_4_LTS, say=lambda _: None, root=tmp_path, pom=jars.CLIENT_POM,
                                 name="client")
    assert classpath.lib == lib
    with pytest.raises(EnvironmentProblem, match="`mvn` is not on PATH"):   # the release's own jars: not cached
        jars.ensure_jars(PULSAR_4_LTS, say=lambda _: None, root=tmp_path)


def test_a_missing_mvn_is_named_with_its_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match=r"Java transaction check needs Pulsar 5\.0\.1's Java client: .*"
                                                 r"`mvn` is not on PATH; install it"):
        txn_check.ensure_program(PULSAR_5, say=lambda _: None, root=tmp_path)


def test_the_java_needed_is_read_from_the_client_class_files(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "pulsar-client-api-5.0.1.jar", "w") as jar:
        jar.writestr("META-INF/versions/9/module-info.class", b"\xca\xfe\xba\xbe\x00\x00\x00\x35")
        jar.writestr("org/apache/pulsar/client/api/PulsarClient.class", b"\xca\xfe\xba\xbe\x00\x00\x00\x3d")
    assert txn_check.required_java(Classpath(PULSAR_5, tmp_path)) == 17
    with pytest.raises(EnvironmentProblem, match="no pulsar-client-api jar"):
        txn_check.required_java(Classpath(PULSAR_5, tmp_path / "empty"))


def test_the_check_needs_a_jdk_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jre = fake_jdk(tmp_path / "jre21", "21.0.2", javac=False)
    old = fake_jdk(tmp_path / "jdk11", "11.0.2", javac=True)
    monkeypatch.setattr(java_finder, "java_candidates", lambda: iter([jre, old]))
    with pytest.raises(EnvironmentProblem, match=r"needs a JDK \(javac\).*needs Java 17\+; found .*Java 11"):
        txn_check.find_jdk(17)
    jdk = fake_jdk(tmp_path / "jdk21", "21.0.2", javac=True)
    monkeypatch.setattr(java_finder, "java_candidates", lambda: iter([jre, old, jdk]))
    assert txn_check.find_jdk(17) == (jdk, 21)


def test_v5_needs_a_release_with_the_scalable_topic_client(tmp_path: Path) -> None:
    program = TxnCheckProgram(PULSAR_4_LTS, Path("java"), 17, tmp_path, Classpath(PULSAR_4_LTS, tmp_path))
    assert program.main_class(TxnPath.V4_BATCHED) == "TxnCheckV4"
    with pytest.raises(ValueError, match="no scalable-topic"):
        program.main_class(TxnPath.V5)


def _lines(*checks: bool, done: bool = True, step_error: str | None = None) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"kind": "step", "name": "open t1", "ok": True, "ms": 3}]
    if step_error:
        out.append({"kind": "step", "name": "commit t1", "ok": False, "error": step_error})
    out += [{"kind": "check", "name": f"c{i}", "ok": ok, "expected": ["a"], "got": [] if not ok else ["a"]}
            for i, ok in enumerate(checks)]
    if done:
        out.append({"kind": "done", "checks": len(checks), "failed": checks.count(False)})
    return out


def test_the_outcome_names_every_failed_step_and_check() -> None:
    assert CheckOutcome(0, _lines(True, True)).failures() == []
    assert CheckOutcome(1, _lines(True, False)).failures() == ["check `c1`: expected ['a'], got []"]
    failed = CheckOutcome(1, _lines(step_error="TransactionNotFound")).failures()
    assert failed == ["step `commit t1` failed: TransactionNotFound"]
    assert "no check ran" in CheckOutcome(0, _lines()).failures()[0]
    assert "without its `done` line" in CheckOutcome(1, _lines(True, done=False), stderr="boom").failures()[0]


def test_the_parser_keeps_json_lines_and_skips_log_noise() -> None:
    parsed = txn_check._parse('SLF4J(W): No SLF4J providers\n{"kind": "done", "checks": 1, "failed": 0}\n{torn')
    assert parsed == [{"kind": "done", "checks": 1, "failed": 0}]


def test_two_callers_at_once_compile_the_check_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """CI, 2026-11-27: two pytest workers compiled the same check into one folder at once; one
    ran the other's half-written classes (`NoClassDefFoundError: Report$StepFailed`)."""
    client = Classpath(PULSAR_5, tmp_path / "client-lib")
    monkeypatch.setattr(txn_check, "ensure_jars", lambda *args, **kwargs: client)
    monkeypatch.setattr(txn_check, "required_java", lambda _: 17)
    monkeypatch.setattr(txn_check, "find_jdk", lambda _: (Path("java"), 17))
    compiles: list[Path] = []

    def slow_compile(release: object, java: Path, major: int, classpath: Classpath, folder: Path,
                     sources: object = None) -> None:
        compiles.append(folder)
        folder.mkdir(parents=True, exist_ok=True)
        time.sleep(0.3)
        (folder / "classes").mkdir()
        (folder / "compiled.json").write_text("{}")

    monkeypatch.setattr(txn_check, "_compile", slow_compile)
    programs: list[TxnCheckProgram] = []
    callers = [threading.Thread(target=lambda: programs.append(txn_check.ensure_program(PULSAR_5, root=tmp_path)))
               for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    assert len(compiles) == 1 and len(programs) == 2
    assert programs[0].classes == programs[1].classes == compiles[0] / "classes"
