"""The Java transaction check: Pulsar's own Java client runs transactions against a cluster.

Why: the Python `pulsar-client` has no transaction API, so without this only our own client
(`harness/client`) ever runs a transaction against the embedded brokers, and a command our
broker answers differently from real Pulsar would go unseen. Pulsar's Java client has one.

Theory of operation. The program's source is ours, in `txncheck/` (`Scenario.java`: the
steps and expectations; `TxnCheckV4.java` on the v4 API, `TxnCheckV5.java` on the v5 API of
scalable topics). `ensure_program(release)`:

1. resolves only the client's jars with Maven, through `jars.ensure_jars` with
   `jars.CLIENT_POM` (cached once per pom digest, with progress): 4.0.8 `pulsar-client`,
   5.0.1 `pulsar-client-v5` (which brings `pulsar-client-original`, the v4 API);
2. finds a JDK (a `java` with `javac` beside it) new enough for the jars' class files;
3. compiles the sources with that `javac` into
   `<cache>/<version>/txn-check-<digest>/classes` (digest of the sources, the pom and the
   Java major), stamped last, so later calls return at once.

`run_check(...)` starts the program on one cluster's service URL and two topics; it prints
JSON lines (`Report.java` says which), parsed into a `CheckOutcome` a test asserts on.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import EnvironmentProblem, MissingTool
from harness.results import write_json_atomic
from harness.txn_paths import TxnPath
from targets.cache_lock import building
from targets.pulsar import java as java_finder
from targets.pulsar.jars import CLIENT_POM, Classpath, cache_root, ensure_jars, pom_digest
from targets.pulsar.versions import PulsarRelease

SOURCES = Path(__file__).parent / "txncheck"
V4_SOURCES = ("JsonLines.java", "Report.java", "Args.java", "Scenario.java", "TxnCheckV4.java")
V5_SOURCES = ("TxnCheckV5.java",)
COMPILE_TIMEOUT_S = 300
RUN_TIMEOUT_S = 240
#: Class-file major version minus this is the Java release that reads it (61 -> 17).
CLASS_MAJOR_OFFSET = 44


@dataclass(frozen=True)
class TxnCheckProgram:
    """A compiled check for one release: the JDK to run it and its classpath."""

    release: PulsarRelease
    java: Path
    java_major: int
    classes: Path
    client: Classpath

    @property
    def classpath(self) -> str:
        return f"{self.classes}:{self.client.java_classpath}"

    def main_class(self, txn_path: TxnPath) -> str:
        if txn_path is TxnPath.V5:
            if not self.release.scalable_transactions:
                raise ValueError(f"Pulsar {self.release.version}'s client has no scalable-topic (v5) API")
            return "TxnCheckV5"
        return "TxnCheckV4"


@dataclass
class CheckOutcome:
    """What one run of the program printed; `failures()` is empty when it all passed."""

    returncode: int
    lines: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("kind") == kind]

    def failures(self) -> list[str]:
        """Every failed step and check, and a missing end, in one readable line each."""
        out = [f"step `{s['name']}` failed: {s.get('error')}" for s in self.of("step") if not s["ok"]]
        out += [f"check `{c['name']}`: expected {c['expected']}, got {c['got']}"
                for c in self.of("check") if not c["ok"]]
        done = self.of("done")
        if not done:
            out.append(f"the program ended without its `done` line (exit {self.returncode}); stderr: "
                       f"{self.stderr[-2000:]}")
        elif self.returncode != 0 and not out:
            out.append(f"exit {self.returncode} after {done[-1]}")
        if done and done[-1].get("checks", 0) == 0 and not out:
            out.append("no check ran")
        return out


def required_java(client: Classpath) -> int:
    """The Java release the client's class files need, read from `pulsar-client-api`'s classes."""
    for jar in sorted(client.lib.glob("pulsar-client-api-*.jar")):
        with zipfile.ZipFile(jar) as archive:
            for name in archive.namelist():
                if name.endswith(".class") and not name.startswith("META-INF/"):
                    header = archive.read(name)[:8]
                    return int.from_bytes(header[6:8], "big") - CLASS_MAJOR_OFFSET
    raise EnvironmentProblem(f"no pulsar-client-api jar in {client.lib}; remove that folder and run again")


def _jdks() -> Iterator[Path]:
    """The `java`s that have a `javac` beside them (a JRE cannot compile the check)."""
    for java in java_finder.java_candidates():
        if (java.resolve().parent / "javac").is_file() or (java.parent / "javac").is_file():
            yield java


def find_jdk(min_major: int) -> tuple[Path, int]:
    try:
        return java_finder.find_java(min_major, _jdks())
    except EnvironmentProblem as err:
        raise MissingTool(f"the Java transaction check compiles its program, so it needs a JDK (javac), "
                          f"not only a JRE: {err}", f"a JDK {min_major}+ (javac)") from None


def _javac(java: Path) -> Path:
    for folder in (java.parent, java.resolve().parent):
        if (folder / "javac").is_file():
            return folder / "javac"
    raise MissingTool(f"no javac beside {java}; install a JDK (e.g. `apt-get install openjdk-17-jdk-headless`)",
                      "javac")


def _source_files(release: PulsarRelease) -> list[Path]:
    names = V4_SOURCES + (V5_SOURCES if release.scalable_transactions else ())
    return [SOURCES / name for name in names]


def program_digest(release: PulsarRelease, java_major: int, sources: Sequence[Path] | None = None) -> str:
    h = hashlib.sha256(f"{release.version}:{pom_digest(CLIENT_POM)}:{java_major}".encode())
    for source in _source_files(release) if sources is None else sources:
        h.update(source.name.encode() + b"\0" + source.read_bytes())
    return h.hexdigest()[:16]


def ensure_program(release: PulsarRelease, say: Callable[[str], None] | None = None,
                   root: Path | None = None, *, sources: Sequence[Path] | None = None,
                   name: str = "txn-check") -> TxnCheckProgram:
    """The check compiled for `release`'s client: resolved and compiled on first use, then reused.

    `sources` and `name` compile another program the same way (a finding's reproduction,
    `targets/pulsar/finding.py`) into `<version>/<name>-<digest>/`."""
    try:
        client = ensure_jars(release, say, root, pom=CLIENT_POM, name="client")
    except MissingTool as err:
        raise MissingTool(f"the Java transaction check needs Pulsar {release.version}'s Java client: {err}",
                          err.tool) from None
    except EnvironmentProblem as err:
        raise EnvironmentProblem(f"the Java transaction check needs Pulsar {release.version}'s Java client: {err}") \
            from None
    java, major = find_jdk(required_java(client))
    folder = (root or cache_root()) / release.version / f"{name}-{program_digest(release, major, sources)}"
    classes, stamp = folder / "classes", folder / "compiled.json"
    if not stamp.is_file() or not classes.is_dir():
        with building(folder.with_name(folder.name + ".lock"), f"{name} (Java) for {release.version}",
                      say or (lambda text: print(text, file=sys.stderr, flush=True)),
                      wait_s=COMPILE_TIMEOUT_S + 60):
            if not stamp.is_file() or not classes.is_dir():   # not compiled meanwhile by another process
                _compile(release, java, major, client, folder, sources)
    return TxnCheckProgram(release=release, java=java, java_major=major, classes=classes, client=client)


def _compile(release: PulsarRelease, java: Path, major: int, client: Classpath, folder: Path,
             sources: Sequence[Path] | None = None) -> None:
    """Compiles into a scratch folder renamed to `classes` when complete, then writes the stamp:
    an interrupted compile leaves nothing that looks compiled."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(prefix="classes-", dir=folder))
    files = [str(s) for s in (_source_files(release) if sources is None else sources)]
    argv = [str(_javac(java)), "-nowarn", "-encoding", "UTF-8", "-d", str(scratch), "-cp", client.java_classpath,
            *files]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise EnvironmentProblem(f"compiling {folder.name} with {argv[0]} failed: "
                                 f"{(done.stderr or done.stdout)[-2000:]}")
    scratch.rename(folder / "classes")
    write_json_atomic(folder / "compiled.json", {"release": release.version, "java_major": major, "sources": files})


def run_check(program: TxnCheckProgram, *, service_url: str, txn_path: TxnPath, topics: tuple[str, str],
              run: str, listener: str | None = None, timeout_s: float = RUN_TIMEOUT_S,
              log: Path | None = None) -> CheckOutcome:
    """Runs the check once against `service_url` on two existing topics; its parsed output."""
    argv = [str(program.java), "-Xmx256m", "-cp", program.classpath, program.main_class(txn_path),
            "--service-url", service_url, "--topic-a", topics[0], "--topic-b", topics[1], "--run", run]
    if listener:
        argv += ["--listener", listener]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        outcome = CheckOutcome(returncode=-1, lines=_parse(out), stderr=f"timed out after {timeout_s} s")
    else:
        outcome = CheckOutcome(returncode=done.returncode, lines=_parse(done.stdout), stderr=done.stderr)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("\n".join(json.dumps(line) for line in outcome.lines) + "\n---- stderr\n" + outcome.stderr)
    return outcome


def _parse(stdout: str) -> list[dict[str, Any]]:
    out = []
    for text in stdout.splitlines():
        if text.startswith("{"):
            try:
                out.append(json.loads(text))
            except ValueError:
                continue
    return out
