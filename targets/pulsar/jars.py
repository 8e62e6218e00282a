"""Resolving and caching the jars of a Pulsar release with Maven.

Theory of operation. `maven/pom.xml` pins what to resolve; `ensure_jars(release)` runs
`mvn -Dpulsar.version=V -Djars.dir=<cache>/<V>/lib package` once, which copies the
broker's, the bookie's, ZooKeeper's and pulsar-perf's classpath into the cache (and, for
5.0.1, BookKeeper 4.18.2's jars in place of 4.18.0's: see the pom). A stamp file written last (`classpath-<pom digest>.json`: the
release's components and every jar's name) marks a complete cache: a later call with the same pom returns at
once, and an interrupted download is simply redone. Maven's own local repository
(`~/.m2`) caches the downloads underneath, so CI's second run copies, not downloads.

The same mechanism resolves other poms beside the release's: `ensure_jars(release,
pom=CLIENT_POM, name="client")` resolves only the Java client (`maven/client/pom.xml`, for
the Java transaction check, `targets/pulsar/txn_check.py`) into `client-lib-<digest>/`, stamped
`client-classpath-<digest>.json`.

The cache is `.txnbench/pulsar/` under the current folder (git-ignored), or
`$TXNBENCH_PULSAR_CACHE`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import EnvironmentProblem, MissingTool
from harness.results import write_json_atomic
from targets.cache_lock import building
from targets.pulsar.versions import PulsarRelease

POM = Path(__file__).parent / "maven" / "pom.xml"
#: Only the Java client (4.x: `pulsar-client`; 5.x: `pulsar-client-v5`, which brings the v4 API too)
CLIENT_POM = Path(__file__).parent / "maven" / "client" / "pom.xml"
CACHE_ENV = "TXNBENCH_PULSAR_CACHE"
DEFAULT_CACHE = Path(".txnbench/pulsar")
STAMP = "classpath.json"
MVN_TIMEOUT_S = 1800


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV, str(DEFAULT_CACHE))).resolve()


@dataclass(frozen=True)
class Classpath:
    """A resolved release: the folder of its jars and their names (for manifests)."""

    release: PulsarRelease
    lib: Path

    @property
    def jars(self) -> list[str]:
        return sorted(p.name for p in self.lib.glob("*.jar"))

    @property
    def java_classpath(self) -> str:
        return f"{self.lib}/*"

    def component_versions(self) -> dict[str, str]:
        """The versions of the jars a report should name (pulsar, bookkeeper, zookeeper, netty)."""
        wanted = {"pulsar-broker": "pulsar", "bookkeeper-server": "bookkeeper", "zookeeper": "zookeeper",
                  "netty-common": "netty"}
        out: dict[str, str] = {}
        for name in self.jars:
            for prefix, label in wanted.items():
                rest = name.removeprefix(prefix + "-")
                if rest != name and rest[:1].isdigit() and rest.endswith(".jar") and "tests" not in rest:
                    out[label] = rest.removesuffix(".jar")
        return out


def pom_digest(pom: Path = POM) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()[:16]


def mvn_binary() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MissingTool("the pulsar target resolves Apache Pulsar's jars with Maven, and `mvn` is not on "
                          "PATH; install it (`apt-get install maven`, or maven.apache.org) and run again", "mvn")
    return mvn


def _run_mvn(argv: list[str], log: Path, what: str, say: Callable[[str], None]) -> None:
    started = time.monotonic()
    with log.open("ab") as out:
        out.write(f"\n==== {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            last = started
            while proc.poll() is None:
                time.sleep(1)
                if time.monotonic() - started > MVN_TIMEOUT_S:
                    proc.kill()
                    raise EnvironmentProblem(f"{what}: Maven took more than {MVN_TIMEOUT_S} s; see {log}")
                if time.monotonic() - last >= 15:
                    last = time.monotonic()
                    say(f"  ... {what}: {time.monotonic() - started:.0f} s, {_downloaded(log)} files downloaded")
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
    if proc.returncode != 0:
        raise EnvironmentProblem(f"{what} failed (mvn exit {proc.returncode}): {_first_error(log)}; full log: {log}")


def _downloaded(log: Path) -> int:
    try:
        return log.read_text(errors="replace").count("Downloaded from")
    except OSError:
        return 0


def _first_error(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    errors = [line.removeprefix("[ERROR] ").strip() for line in lines if line.startswith("[ERROR]") and len(line) > 10]
    return errors[0][:600] if errors else (lines[-1] if lines else "no output")


def _cached(release: PulsarRelease, lib: Path, stamp: Path, digest: str) -> Classpath | None:
    if stamp.is_file():
        with contextlib.suppress(OSError, ValueError):   # an unreadable stamp: rebuild
            recorded = json.loads(stamp.read_text())
            if recorded.get("pom_digest") == digest and lib.is_dir():
                return Classpath(release, lib)
    return None


def ensure_jars(release: PulsarRelease, say: Callable[[str], None] | None = None,
                root: Path | None = None, *, pom: Path = POM, name: str = "") -> Classpath:
    """The release's classpath, resolved with Maven on first use and reused afterwards.

    `pom` and `name` pick another pom (e.g. `CLIENT_POM`, name `client`): its jars go to
    `<name>-lib-<digest>/`, beside the release's own.
    """
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    folder = (root or cache_root()) / release.version
    digest = pom_digest(pom)
    prefix = f"{name}-" if name else ""
    # one folder per pom: a changed pom resolves beside the old jars, which a running cluster may still read
    lib = folder / f"{prefix}lib-{digest}"
    stamp = folder / f"{prefix}{STAMP.removesuffix('.json')}-{digest}.json"
    if (cached := _cached(release, lib, stamp, digest)) is not None:
        return cached
    mvn = mvn_binary()
    what = f"Apache Pulsar {release.version}'s {name + ' ' if name else ''}jars"
    with building(folder / f"{prefix}lib-{digest}.lock", what, say, wait_s=MVN_TIMEOUT_S + 60):
        if (cached := _cached(release, lib, stamp, digest)) is not None:   # built while we waited
            return cached
        shutil.rmtree(lib, ignore_errors=True)
        log = folder / f"{prefix}maven.log"
        say(f"resolving {what} with Maven into {lib} (first use: a few minutes; progress in {log})")
        started = time.monotonic()
        _run_mvn([mvn, "-B", "-f", str(pom), f"-Dpulsar.version={release.version}", f"-Djars.dir={lib}",
                  "package"], log, f"resolving {what}", say)
        classpath = Classpath(release, lib)
        if not classpath.jars:
            raise EnvironmentProblem(f"Maven resolved no jar for Pulsar {release.version}; see {log}")
        write_json_atomic(stamp, {"pulsar_version": release.version, "pom_digest": digest,
                                  "components": classpath.component_versions(), "jars": classpath.jars})
        say(f"{what}: {len(classpath.jars)} jars in {time.monotonic() - started:.0f} s")
    return classpath
