"""The second kind of finding: a bug of a tool beside the broker (pulsar-perf, Oxia), reproduced in Python.

Why a kind of its own: `finding.Finding` is a Java program on Pulsar's client, which is how a
bug of the broker is shown without txnbench in the loop. Two findings are not bugs of the
broker: pulsar-perf, Pulsar's own load tool, ignores `-txnRate` (it is run as it ships, from
the release's jars), and Oxia v0.14.0's WAL breaks under concurrent writers (no Pulsar runs at
all). Their reproductions are the tool itself driven from here (`perf_txnrate.py`,
`oxia_race.py`); no txnbench client and no checker is in either loop.

A `ToolFinding`'s reproduction yields the same JSON lines a Java program prints (`info`,
`try` with `shows`, `error`, `done`), so the verdict, the printed observation, the per-try rate
of a race and the files kept (`program.jsonl`, `verdict.json` in
`results/findings/<time>-<name>/`) are `finding.py`'s: exit 1 the bug shows, 0 it does not, 2
it could not run. `TOOL_FINDINGS` is the registry; `finding_command.py` runs both kinds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, TxnbenchError
from harness.txn_paths import TxnPath
from targets.pulsar.finding import FINDINGS_DOCS, SETUP_BUDGET_S, Outcome, describe, summary


@dataclass(frozen=True)
class ToolRun:
    """What a reproduction is given: its folder, its tries and, when it needs one, a running cluster."""

    folder: Path
    tries: int
    say: Callable[[str], None]
    tag: str                          # unique per run: topic names
    cluster: Any = None               # a started PulsarCluster, or None
    release: Any = None               # its versions.PulsarRelease, or None


Reproduction = Callable[[ToolRun], Iterator[dict[str, Any]]]


@dataclass(frozen=True)
class ToolFinding:
    """One finding about a tool: what it is, what runs, and its reproduction."""

    name: str                         # the stem of docs/findings/<name>.md
    what: str                         # one line: the bug
    tool: str                         # what is reproduced ("pulsar-perf", "Oxia v0.14.0")
    reproduce: Reproduction
    release: str = ""                 # the Pulsar release it runs on (cluster and jars); "" when none
    txn_path: TxnPath | None = None
    tries: int = 1
    race: bool = False
    brokers: int = 1
    needs_perf: bool = False          # the release's pulsar-testclient (not every release's is served)

    @property
    def doc(self) -> Path:
        return FINDINGS_DOCS / f"{self.name}.md"

    def system(self, version: str) -> str:
        """What ran, for the summary line."""
        return f"{self.tool} of Pulsar {version}" if self.release else self.tool


# ---- the reproductions ---------------------------------------------------------------------------


def _pulsar_perf(run: ToolRun) -> Iterator[dict[str, Any]]:
    from targets.pulsar import perf_txnrate
    from targets.pulsar.jars import ensure_jars
    from targets.pulsar.java import find_java

    classpath = ensure_jars(run.release, run.say)
    java, major = find_java(run.release.min_java)
    yield {"kind": "info", "name": "pulsar-perf", "value": f"pulsar-testclient {run.release.version}, one thread, "
           f"one message per transaction, -time {perf_txnrate.plan(run.release, run.tag, None).duration_s} s"}
    yield from perf_txnrate.reproduce(perf_txnrate.bound_run(run.cluster, classpath, str(java), major, run.say),
                                      run.release, run.folder, tries=run.tries, tag=run.tag)


#: Oxia's own defaults (every core): the race shows within a second on two (the target runs it on one)
OXIA_WRITERS, OXIA_SECONDS = 8, 30.0


def _oxia(run: ToolRun) -> Iterator[dict[str, Any]]:
    from targets.pulsar import oxia_race

    yield {"kind": "info", "name": "oxia standalone",
           "value": f"v0.14.0 on every core (Oxia's defaults), {OXIA_WRITERS} writers, up to {OXIA_SECONDS:g} s a try"}
    shown = 0
    for n in range(1, run.tries + 1):
        line = oxia_race.judge_try(n, oxia_race.reproduce(run.folder / f"oxia-try-{n}", writers=OXIA_WRITERS,
                                                          seconds=OXIA_SECONDS, env={}))
        shown += bool(line["shows"])
        yield line
    yield {"kind": "done", "tries": run.tries, "shown": shown}


TOOL_FINDINGS: dict[str, ToolFinding] = {f.name: f for f in (
    ToolFinding(
        name="pulsar-perf-txnrate-ignored", tool="pulsar-perf", release="4.0.8", txn_path=TxnPath.V4,
        reproduce=_pulsar_perf, needs_perf=True,
        what="pulsar-perf transaction -txnRate N does not limit the rate: each thread calls the shared "
             "RateLimiter.tryAcquire() and drops its answer (pulsar-testclient 4.0.8 and 5.0.1)"),
    ToolFinding(
        name="oxia-v0.14.0-wal-offset-race", tool="Oxia v0.14.0", reproduce=_oxia, tries=3, race=True,
        what="oxia standalone v0.14.0 fails every write after two concurrent writes reach its WAL out of offset "
             "order (\"N+1 can not immediately follow N-1\"; oxia-db/oxia#738, fixed in v0.14.2)"),
)}


# ---- running one ---------------------------------------------------------------------------------


def run_tool_finding(finding: ToolFinding, *, tries: int | None = None, version: str | None = None,
                     results: Path = Path("results"), say: Callable[[str], None] = print,
                     brokers: int | None = None) -> Outcome:
    """A fresh cluster at the finding's release (or `version`) when it needs one, its reproduction,
    the cluster down; the verdict and the lines kept as a Java finding's are."""
    from targets.pulsar import versions
    from targets.pulsar.cluster import PulsarCluster, PulsarSpec

    chosen = (version or finding.release) if finding.release else ""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    folder = (results / "findings" / f"{stamp}-{finding.name}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    tries = tries or finding.tries
    outcome = Outcome(finding.name, chosen, folder=folder, system=finding.system(chosen))
    say(f"{finding.name}: {finding.what}")
    where = (f"Pulsar {chosen}, path {finding.txn_path.value if finding.txn_path else '-'}, "
             f"{brokers or finding.brokers} broker(s)" if chosen else f"{finding.tool}, no Pulsar")
    say(f"  {where}, {tries} tr{'ies' if tries > 1 else 'y'}; output in {folder}")
    if version and not finding.release:
        say(f"  --pulsar-version {version} ignored: no Pulsar runs in this finding")
    cluster = None
    try:
        release = versions.release(chosen) if chosen else None
        if release is not None and finding.txn_path is not None:
            if finding.needs_perf and not release.perf:
                raise ConfigError("--pulsar-version", chosen, "the Maven mirror does not serve its pulsar-testclient",
                                  "`txnbench releases`, column perf")
            cluster = PulsarCluster(PulsarSpec(txn_path=finding.txn_path, version=chosen,
                                               brokers=brokers or finding.brokers, directory=folder / "cluster",
                                               parent_pid=os.getpid(), ready_timeout_s=SETUP_BUDGET_S * 2, say=say))
            cluster.up()
        run = ToolRun(folder=folder, tries=tries, say=say, tag=stamp.replace("-", ""), cluster=cluster,
                      release=release)
        for line in finding.reproduce(run):
            outcome.lines.append(line)
            for said in describe(line):
                say(said)
    except (TxnbenchError, ValueError, OSError) as err:
        outcome.problem = str(err)
    finally:
        if cluster is not None:
            try:
                cluster.collect_logs(folder / "logs")
            finally:
                cluster.down()
    (folder / "program.jsonl").write_text("".join(json.dumps(line) + "\n" for line in outcome.lines))
    (folder / "verdict.json").write_text(json.dumps(outcome.to_json(), indent=2) + "\n")
    say(summary(outcome))
    return outcome
