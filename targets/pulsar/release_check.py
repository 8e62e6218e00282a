"""`txnbench releases`: which Apache Pulsar releases resolve and start here, and since when.

Theory of operation. The facts recorded in `versions.RELEASES` (committed: what was seen
when the table was last updated) are shown beside what `--check` saw on this machine, kept in
`<jar cache>/releases.json` (`.txnbench/pulsar/releases.json` by default). Per release, the
newer of the two is shown, and says which it is.

`check_release(release, paths)` resolves the release's jars with the project's own mechanism
(`jars.ensure_jars`, so the pins of `maven/pom.xml` apply), then, per path the release has,
starts a real cluster of it (`PulsarCluster.up`: ready means one transaction committed through
the proxied client addresses) and stops it at once. One cluster at a time, in a folder of its
own (`.txnbench/pulsar/check-cluster/`); every start is stopped by pid, also on a failure or Ctrl-C.
What failed is kept in one line: the first line of the error and the first exception or ERROR
line of the log tail it quotes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import textwrap
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import TxnbenchError
from harness.results import write_json_atomic
from harness.txn_paths import TxnPath
from targets.pulsar.jars import cache_root, ensure_jars
from targets.pulsar.versions import RELEASES, Checked, PulsarRelease, listed

CACHE_NAME = "releases.json"
CHECK_DIR = "check-cluster"   # under the jar cache: .txnbench/pulsar/check-cluster
WHY_CHARS = 400
MAVEN_BOILERPLATE = (r"Failed to execute goal on project [\w.-]+: ",
                     r"Could not resolve dependencies for project [\w.-]+:[\w.-]+:\w+:[\w.-]+: ")
#: A start (ZooKeeper, a bookie, two brokers, one transaction) takes 20-90 s here; a first use
#: also resolves the jars. Past this the release does not start.
START_TIMEOUT_S = 300.0


def cache_path(root: Path | None = None) -> Path:
    return (root or cache_root()) / CACHE_NAME


def check_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / CHECK_DIR


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class Seen:
    """One `--check` of one release on this machine."""

    version: str
    checked: str                          # "YYYY-MM-DD HH:MM UTC"
    resolves: bool
    starts: tuple[str, ...] = ()          # paths on which a transaction committed
    failed: Mapping[str, str] = field(default_factory=dict)   # path -> why it did not start
    why_not: str = ""                     # why it did not resolve, or the first failed path's reason
    components: Mapping[str, str] = field(default_factory=dict)
    note: str = ""                        # e.g. a classpath that differs from the table's versions

    @property
    def tried(self) -> tuple[str, ...]:
        return (*self.starts, *self.failed)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "checked": self.checked, "resolves": self.resolves,
                "starts": list(self.starts), "failed": dict(self.failed), "why_not": self.why_not,
                "components": dict(self.components), "note": self.note}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Seen:
        return cls(version=str(data["version"]), checked=str(data["checked"]), resolves=bool(data["resolves"]),
                   starts=tuple(data.get("starts") or ()), failed=dict(data.get("failed") or {}),
                   why_not=str(data.get("why_not") or ""), components=dict(data.get("components") or {}),
                   note=str(data.get("note") or ""))


def load_seen(path: Path) -> dict[str, Seen]:
    """What earlier checks saw, by version; an unreadable or foreign file is no record."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        data = json.loads(path.read_text())
        return {v: Seen.from_json(entry) for v, entry in (data.get("releases") or {}).items()}
    return {}


def save_seen(path: Path, seen: Seen) -> None:
    """Record one check, keeping the others'."""
    records = load_seen(path)
    records[seen.version] = seen
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"schema": 1, "releases": {v: s.to_json() for v, s in records.items()}})


@dataclass(frozen=True)
class Row:
    """One line of the listing: the release and the newest facts known of it."""

    release: PulsarRelease
    resolves: bool
    starts: tuple[str, ...]
    checked: str                          # "" when never checked
    source: str                           # "recorded" (versions.py) or "here" (the cache)
    why_not: str
    note: str = ""

    @property
    def runs(self) -> bool:
        return self.resolves and bool(self.starts)


def row(release: PulsarRelease, seen: Seen | None) -> Row:
    """The newer of the recorded facts and this machine's check (a check of the same day wins)."""
    recorded: Checked = release.checked
    if seen is not None and seen.checked[:10] >= recorded.date:
        # paths the check did not try (`--paths`) keep their recorded outcome
        kept = tuple(p for p in recorded.starts if p not in seen.tried) if seen.resolves else ()
        starts = tuple(p.value for p in TxnPath if p.value in (*seen.starts, *kept))
        return Row(release, seen.resolves, starts, seen.checked, "here", seen.why_not, seen.note)
    return Row(release, recorded.resolves, recorded.starts, recorded.date, "recorded", recorded.why_not)


def rows(seen: Mapping[str, Seen], versions: Iterable[str] | None = None) -> list[Row]:
    chosen = list(versions) if versions else list(RELEASES)
    return [row(listed(v), seen.get(v)) for v in chosen]


def render(table: Sequence[Row], cache: Path) -> str:
    """The listing as aligned text, then what each column means."""
    header = ("release", "line", "Java", "BookKeeper", "ZooKeeper", "netty", "paths", "perf", "resolves",
              "starts", "checked")
    lines: list[tuple[str, ...]] = [header]
    for r in table:
        rel = r.release
        lines.append((rel.version + (" *" if rel.version == _default() else ""), rel.line.name,
                      f"{rel.min_java}+", rel.bookkeeper or "-", rel.zookeeper or "-", rel.netty or "-",
                      " ".join(p.value for p in rel.line.paths()), "yes" if rel.perf else "no",
                      "yes" if r.resolves else "no", " ".join(r.starts) if r.starts else "no",
                      f"{r.checked or 'never'} ({r.source})"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    notes = [f"{r.release.version}: {r.why_not}" for r in table if r.why_not and not r.runs]
    notes += [f"{r.release.version}: {r.note}" for r in table if r.note]
    if notes:
        out += ["", "why not, and notes:"]
        for note in notes:
            out += textwrap.wrap(note, width=100, initial_indent="  ", subsequent_indent="      ",
                                 break_on_hyphens=False)
    legend = ("* the default release. paths: those the line has (v4-batched: PIP-160, 2.11 on; v5: PIP-473, "
              "5.0). perf: pulsar-perf is served (`txnbench peer`). starts: the paths on which a cluster committed "
              "a transaction. recorded: targets/pulsar/versions.py; here: `txnbench releases --check`, kept in "
              f"{cache}.")
    out += ["", *textwrap.wrap(legend, width=100, break_on_hyphens=False)]
    return "\n".join(out)


def to_json(table: Sequence[Row]) -> list[dict[str, Any]]:
    return [{"version": r.release.version, "line": r.release.line.name, "java": r.release.min_java,
             "components": r.release.components(), "paths": [p.value for p in r.release.line.paths()],
             "perf": r.release.perf, "pins": r.release.pins, "resolves": r.resolves, "starts": list(r.starts),
             "runs": r.runs, "checked": r.checked, "source": r.source, "why_not": r.why_not, "note": r.note}
            for r in table]


def _default() -> str:
    from targets.pulsar.versions import DEFAULT_RELEASE

    return DEFAULT_RELEASE.version


def why(err: BaseException) -> str:
    """One line of an error: its first line, and the first exception or ERROR line it quotes."""
    text = str(err).strip() or type(err).__name__
    for boilerplate in MAVEN_BOILERPLATE:   # Maven's own framing of what it could not find
        text = re.sub(boilerplate, "", text)
    first, *rest = text.splitlines()
    telling = next((line.strip() for line in rest if "Exception" in line or " ERROR " in line
                    or line.strip().startswith("Caused by")), "")
    return (first if not telling else f"{first} ... {telling}")[:WHY_CHARS]


def components_note(release: PulsarRelease, found: Mapping[str, str]) -> str:
    """Where the resolved classpath differs from the table's versions ("" when it does not)."""
    differ = [f"{name} {found.get(name, 'missing')} (table: {want})" for name, want in release.components().items()
              if found.get(name) != want]
    return "classpath differs from the table: " + ", ".join(differ) if differ else ""


Resolve = Callable[[PulsarRelease, Callable[[str], None]], Mapping[str, str]]
Start = Callable[[PulsarRelease, TxnPath, Path, Callable[[str], None]], None]


def resolve_jars(release: PulsarRelease, say: Callable[[str], None]) -> Mapping[str, str]:
    return ensure_jars(release, say).component_versions()


def start_and_stop(release: PulsarRelease, txn_path: TxnPath, directory: Path, say: Callable[[str], None]) -> None:
    """A real cluster of `release` on `txn_path` until one transaction commits; then stopped."""
    from targets.pulsar.cluster import PulsarCluster, PulsarSpec

    cluster = PulsarCluster(PulsarSpec(txn_path=txn_path, version=release.version, trial=True, directory=directory,
                                       parent_pid=os.getpid(), ready_timeout_s=START_TIMEOUT_S, say=say))
    try:
        cluster.up()   # stops what it started when it fails
    finally:
        cluster.down()


def check_release(release: PulsarRelease, paths: Sequence[TxnPath] | None = None, *,
                  directory: Path | None = None, say: Callable[[str], None] = print,
                  resolve: Resolve = resolve_jars, start: Start = start_and_stop) -> Seen:
    """Resolve `release` and start it on each of `paths` it has (default: all it has)."""
    checked = now_utc()
    directory = directory or check_dir()
    try:
        found = dict(resolve(release, say))
    except TxnbenchError as err:
        return Seen(release.version, checked, resolves=False, why_not=why(err))
    wanted = [p for p in (paths or release.line.paths()) if release.supports(p)]
    starts: list[str] = []
    failed: dict[str, str] = {}
    for txn_path in wanted:
        began = time.monotonic()
        say(f"{release.version} {txn_path.value}: starting a cluster")
        shutil.rmtree(directory, ignore_errors=True)
        try:
            start(release, txn_path, directory, say)
        except TxnbenchError as err:
            failed[txn_path.value] = why(err)
            say(f"{release.version} {txn_path.value}: did not start: {failed[txn_path.value]}")
            continue
        starts.append(txn_path.value)
        say(f"{release.version} {txn_path.value}: a transaction committed; stopped "
            f"({time.monotonic() - began:.0f} s)")
    shutil.rmtree(directory, ignore_errors=True)
    first_failure = next(iter(failed.items()), None)
    return Seen(release.version, checked, resolves=True, starts=tuple(starts), failed=failed,
                why_not=f"{first_failure[0]}: {first_failure[1]}" if first_failure else "",
                components=found, note=components_note(release, found))


def differences(seen: Seen, release: PulsarRelease) -> list[str]:
    """How a check differs from the recorded facts (empty: as recorded)."""
    recorded = release.checked
    out = []
    if seen.resolves != recorded.resolves:
        out.append(f"resolves: {'yes' if seen.resolves else 'no'}, recorded {'yes' if recorded.resolves else 'no'}")
    expected = [p for p in recorded.starts if p in seen.tried]
    if seen.resolves and recorded.resolves and set(seen.starts) != set(expected):
        out.append(f"starts on {' '.join(seen.starts) or 'no path'} of {' '.join(seen.tried)}, recorded "
                   f"{' '.join(expected) or 'none of them'}")
    if seen.note:
        out.append(seen.note)
    return out
