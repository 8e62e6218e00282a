"""After a covered run: the JaCoCo dumps merged, reported, and placed in time.

Theory of operation. `targets.pulsar.jacoco.CoverageCollector` leaves, in a run's
`coverage/` folder, one exec file per dump (`parts/`, what ran since the dump before) and
their index (`dumps.jsonl`). `build(coverage_dir, release)` then runs two Java programs:

1. CoverageTimeline (`jacoco_timeline/CoverageTimeline.java`, ours, compiled once against
   org.jacoco.core into `.txnbench/pulsar/jacoco/timeline-<digest>/`): for every part,
   which methods of the recovery list's classes it reached; the methods those classes have
   in this release (so a listed name that is not there is named as such); and the parts
   merged, per JVM life (`<service>-<life>.exec`) and in all (`jacoco.exec`).
2. `jacococli report` over `jacoco.exec` with the release's transaction classes
   (`recovery_methods.TRANSACTION_CODE`, copied out of the release's jars into
   `classes/`): `jacoco.xml` and JaCoCo's own HTML report under `html/`.

The parts are deleted afterwards (the lives' files hold the same data; keep them with
`TXNBENCH_KEEP_COVERAGE_PARTS=1`). Reading the XML and judging the list is
`orchestrator/pulsar_coverage.py`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import EnvironmentProblem
from targets.pulsar.jacoco import (
    PARTS_DIR,
    TIMELINE_SOURCE,
    JacocoJars,
    compile_program,
    ensure_jacoco,
    read_index,
)
from targets.pulsar.jars import Classpath, ensure_jars
from targets.pulsar.recovery_methods import TRANSACTION_JARS, RecoveryMethod, is_transaction_code
from targets.pulsar.versions import PulsarRelease

SOURCE = TIMELINE_SOURCE
KEEP_PARTS_ENV = "TXNBENCH_KEEP_COVERAGE_PARTS"
JAVA_TIMEOUT_S = 600
MERGED = "jacoco.exec"
XML = "jacoco.xml"
HTML = "html"
CLASSES = "classes"


# ---- class files (no JVM needed) ------------------------------------------------------------------

def class_methods(data: bytes) -> list[str]:
    """The method names a class file declares (`<init>` and javac's `lambda$...` included)."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack(">H", data[8:10])[0]
    utf8: dict[int, str] = {}
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        pos += 1
        if tag == 1:
            n = struct.unpack(">H", data[pos:pos + 2])[0]
            utf8[index] = data[pos + 2:pos + 2 + n].decode("utf-8", errors="replace")
            pos += 2 + n
        elif tag in (3, 4, 9, 10, 11, 12, 17, 18):
            pos += 4
        elif tag in (5, 6):                       # long and double take two slots
            pos += 8
            index += 1
        elif tag in (7, 8, 16, 19, 20):
            pos += 2
        elif tag == 15:
            pos += 3
        else:
            raise ValueError(f"unknown constant-pool tag {tag}")
        index += 1
    pos += 6                                      # access flags, this class, super class
    pos += 2 + 2 * struct.unpack(">H", data[pos:pos + 2])[0]

    def members() -> list[str]:
        nonlocal pos
        names = []
        count = struct.unpack(">H", data[pos:pos + 2])[0]
        pos += 2
        for _ in range(count):
            _access, name_index, _descriptor, attributes = struct.unpack(">HHHH", data[pos:pos + 8])
            pos += 8
            for _ in range(attributes):
                pos += 6 + struct.unpack(">I", data[pos + 2:pos + 6])[0]
            names.append(utf8.get(name_index, "?"))
        return names

    members()                                     # the fields
    return members()


def transaction_jars(classpath: Classpath) -> list[Path]:
    version = classpath.release.version
    return [classpath.lib / f"{name}-{version}.jar" for name in TRANSACTION_JARS
            if (classpath.lib / f"{name}-{version}.jar").is_file()]


def find_class(jars: Iterable[Path], internal_name: str) -> tuple[Path, bytes] | None:
    for jar in jars:
        with zipfile.ZipFile(jar) as archive:
            try:
                return jar, archive.read(internal_name + ".class")
            except KeyError:
                continue
    return None


def missing_methods(methods: Iterable[RecoveryMethod], jars: Sequence[Path]) -> list[str]:
    """The listed methods a release's jars do not have (class or method), as `Class.method`."""
    missing = []
    for method in methods:
        found = find_class(jars, method.internal_class)
        if found is None or method.method not in class_methods(found[1]):
            missing.append(method.key + ("" if found else " (no such class)"))
    return missing


def extract_transaction_classes(jars: Iterable[Path], dest: Path) -> int:
    """Copy the release's transaction classes (recovery_methods.TRANSACTION_CODE) into `dest`."""
    count = 0
    for jar in jars:
        with zipfile.ZipFile(jar) as archive:
            for name in archive.namelist():
                if name.endswith(".class") and is_transaction_code(name.removesuffix(".class")):
                    target = dest / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(name))
                    count += 1
    return count


# ---- the timeline program --------------------------------------------------------------------------

def ensure_timeline_program(jars: JacocoJars, say: Callable[[str], None]) -> tuple[Path, Path]:
    """(java, classes folder) of CoverageTimeline, compiled on first use with a JDK 17+."""
    from targets.pulsar.txn_check import find_jdk

    h = hashlib.sha256(SOURCE.read_bytes())
    for jar in jars.core_classpath:
        h.update(jar.name.encode())
    classes = compile_program(SOURCE, jars.core_classpath, jars.lib.parent / f"timeline-{h.hexdigest()[:16]}", say)
    return find_jdk(17)[0], classes


@dataclass
class Timeline:
    """What CoverageTimeline answered."""

    inventory: dict[str, list[str]] = field(default_factory=dict)   # class -> ["name#desc", ...]
    parts: dict[str, list[str]] = field(default_factory=dict)       # part path -> ["cls#name#desc", ...]


def run_timeline(java: Path, program: Path, jars: JacocoJars, spec_lines: Sequence[str], work: Path) -> Timeline:
    spec = work / "timeline-spec.tsv"
    spec.write_text("\n".join(spec_lines) + "\n")
    classpath = os.pathsep.join([str(program), *(str(p) for p in jars.core_classpath)])
    done = subprocess.run([str(java), "-Xmx512m", "-cp", classpath, "CoverageTimeline", str(spec)],
                          capture_output=True, text=True, timeout=JAVA_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise EnvironmentProblem(f"CoverageTimeline failed (exit {done.returncode}): {done.stderr[-2000:]}")
    out = Timeline()
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        data = json.loads(line)
        if "inventory" in data:
            out.inventory[data["inventory"]] = data["methods"]
        elif "part" in data:
            out.parts[data["part"]] = data["methods"]
    return out


def jacoco_report(java: Path, jars: JacocoJars, exec_file: Path, classes: Path, xml: Path, html: Path,
                  name: str) -> None:
    argv = [str(java), "-jar", str(jars.cli), "report", str(exec_file), "--classfiles", str(classes),
            "--xml", str(xml), "--html", str(html), "--name", name, "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=JAVA_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise EnvironmentProblem(f"jacococli report failed (exit {done.returncode}): "
                                 f"{(done.stderr or done.stdout)[-2000:]}")


# ---- one run -------------------------------------------------------------------------------------

@dataclass
class Built:
    """What `build` made in a run's coverage folder."""

    directory: Path
    xml: Path
    html: Path
    merged: Path
    lives: dict[str, Path]                       # "broker-0-2" -> its merged exec file
    index: list[dict[str, Any]]                  # dumps.jsonl
    timeline: Timeline
    missing: list[str]                           # listed methods this release does not have
    jacoco_version: str
    classes: int


def build(coverage_dir: Path, release: PulsarRelease, methods: Sequence[RecoveryMethod], *,
          say: Callable[[str], None] | None = None, title: str = "") -> Built:
    """Merge, time and report one run's dumps (see the module's docstring)."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    jars = ensure_jacoco(say)
    classpath = ensure_jars(release, say)
    txn_jars = transaction_jars(classpath)
    if not txn_jars:
        raise EnvironmentProblem(f"no pulsar-broker jar in {classpath.lib}")
    java, program = ensure_timeline_program(jars, say)
    index = read_index(coverage_dir)
    dumps = sorted((e for e in index if e.get("event") == "dump" and e.get("ok") and e.get("file")),
                   key=lambda e: (e["to_ms"], e["service"], e["life"], e["seq"]))
    lives: dict[str, list[Path]] = {}
    for entry in dumps:
        lives.setdefault(f"{entry['service']}-{entry['life']}", []).append(coverage_dir / entry["file"])
    merged = coverage_dir / MERGED
    spec = [f"class\t{jar}\t{m.internal_class}" for m in methods
            if (found := find_class(txn_jars, m.internal_class)) is not None for jar in (found[0],)]
    spec += [f"part\t{coverage_dir / e['file']}" for e in dumps]
    spec += [f"merge\t{coverage_dir / (life + '.exec')}\t" + "\t".join(map(str, files))
             for life, files in lives.items()]
    all_parts = [str(coverage_dir / e["file"]) for e in dumps]
    spec += ["merge\t" + "\t".join([str(merged), *all_parts])]
    timeline = run_timeline(java, program, jars, spec, coverage_dir)
    if not merged.is_file():     # no dump held anything: an empty exec file, so the report still runs
        merged.write_bytes(bytes([0x01, 0xC0, 0xC0, 0x10, 0x07]))
    classes = coverage_dir / CLASSES
    shutil.rmtree(classes, ignore_errors=True)
    count = extract_transaction_classes(txn_jars, classes)
    xml, html = coverage_dir / XML, coverage_dir / HTML
    shutil.rmtree(html, ignore_errors=True)
    jacoco_report(java, jars, merged, classes, xml, html,
                  title or f"Apache Pulsar {release.version}: transaction code")
    # keep what the parts said, by file name: the parts themselves go (the lives' files hold them)
    timeline.parts = {Path(k).relative_to(coverage_dir).as_posix(): v for k, v in timeline.parts.items()}
    if not os.environ.get(KEEP_PARTS_ENV):
        shutil.rmtree(coverage_dir / PARTS_DIR, ignore_errors=True)
    shutil.rmtree(classes, ignore_errors=True)
    (coverage_dir / "timeline-spec.tsv").unlink(missing_ok=True)
    return Built(directory=coverage_dir, xml=xml, html=html / "index.html", merged=merged,
                 lives={life: coverage_dir / f"{life}.exec" for life in lives}, index=index, timeline=timeline,
                 missing=missing_methods(methods, txn_jars), jacoco_version=jars.version, classes=count)


def merge_and_report(exec_files: Sequence[Path], release: PulsarRelease, directory: Path, *,
                     say: Callable[[str], None] | None = None, title: str = "") -> Path:
    """Several runs' `jacoco.exec` merged into `directory/jacoco.exec` and reported there (XML, HTML):
    a matrix's figure across its paths. Returns the XML's path."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    jars = ensure_jacoco(say)
    txn_jars = transaction_jars(ensure_jars(release, say))
    java, program = ensure_timeline_program(jars, say)
    directory.mkdir(parents=True, exist_ok=True)
    merged = directory / MERGED
    run_timeline(java, program, jars, ["merge\t" + "\t".join([str(merged), *map(str, exec_files)])], directory)
    (directory / "timeline-spec.tsv").unlink(missing_ok=True)
    classes = directory / CLASSES
    shutil.rmtree(classes, ignore_errors=True)
    extract_transaction_classes(txn_jars, classes)
    xml, html = directory / XML, directory / HTML
    shutil.rmtree(html, ignore_errors=True)
    jacoco_report(java, jars, merged, classes, xml, html,
                  title or f"Apache Pulsar {release.version}: transaction code, runs merged")
    shutil.rmtree(classes, ignore_errors=True)
    return xml
