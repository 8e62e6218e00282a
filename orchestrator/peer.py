"""`txnbench peer`: Pulsar's own `pulsar-perf transaction` beside txnbench, on one cluster, one report.

Theory of operation. One real Pulsar cluster (the `pulsar` target) is started once. The
scenario is mapped to pulsar-perf flags and bent to match them (targets/pulsar/perf_args.py
says how and why; every bend goes into the report). pulsar-perf runs first, on its own
topics, its JVM's CPU sampled and the brokers scraped before and after
(targets/pulsar/perf.py); then the matched scenario runs as an ordinary txnbench run on
the same cluster (`RunOptions.target`: the run neither starts nor stops it), with its
history, checks and perf.json; then pulsar-perf once more on topics of its own (unless
`--no-perf-after`), so the report brackets txnbench between two pulsar-perf runs and says
how far the cluster drifted meanwhile. Last, analysis/peer puts them into
`results/<peer_id>/peer.{json,md,html}`; the txnbench run folder sits beside them and
pulsar-perf's files in `pulsar-perf/` and `pulsar-perf-after/`. The cluster is stopped on every way out, also on
Ctrl-C or an error; nothing of it outlives the command.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.peer.brokers import read_texts
from analysis.peer.compare import build_peer, perf_side, txnbench_side
from analysis.peer.pulsar_perf import parse_log, read_result
from analysis.peer.render import to_html, to_markdown
from harness.config import RunConfig
from harness.cpus import CpuSetError, CpuSplit, pin_process, split_off, usable_cpus
from harness.errors import EnvironmentProblem
from harness.results import (
    RunStatus,
    create_unique_dir,
    utc_stamp,
    write_json_atomic,
    write_text_atomic,
)
from harness.target import ClusterInfo, ProcessControl
from harness.txn_paths import TxnPath
from orchestrator.outcome import RunOptions, say
from orchestrator.run import PULSAR_READY_TIMEOUT_S, Run
from targets.pulsar.cluster import PulsarCluster, PulsarSpec
from targets.pulsar.jars import ensure_jars
from targets.pulsar.java import find_java
from targets.pulsar.perf import LOG_NAME, MAIN_CLASS, PerfRun, run_perf
from targets.pulsar.perf_args import PerfPlan, plan_peer
from targets.pulsar.versions import release

#: where the measured pulsar-perf run writes its files
PERF_DIR = "pulsar-perf"
#: where the second pulsar-perf run (after txnbench) writes its files, beside `pulsar-perf/`
PERF_AFTER_DIR = "pulsar-perf-after"
#: where the unmeasured pulsar-perf run that warms the cluster up writes its files
PERF_WARMUP_DIR = "pulsar-perf-warmup"
#: seconds of that run by default: a fresh cluster on one core climbed from 61 to 445 txn/s over its
#: first 100 s and ran 1,000-1,300 txn/s after some minutes (2026-11-28, 4.0.8, `--load-cpus 1`)
CLUSTER_WARMUP_S = 120
#: a warm-up whose last this many 10 s intervals completed no transaction has stalled the cluster
#: (Pulsar 5.0.1's v5 under pulsar-perf's V5 load went 13.6 txn/s to 0 for good, 2026-11-27 and -28)
STALLED_INTERVALS = 3


class SharedCluster:
    """A started PulsarCluster lent to one run: `up` only reports it, `down` leaves it running."""

    name = "pulsar"

    def __init__(self, cluster: PulsarCluster) -> None:
        self.cluster = cluster
        self.components = cluster.components

    def up(self) -> ClusterInfo:
        return self.cluster.info()

    def down(self) -> None:
        """The peer command stops the cluster after both tools ran."""

    def info(self) -> ClusterInfo:
        return self.cluster.info()

    def scrape_metrics(self) -> dict[str, str]:
        return self.cluster.scrape_metrics()

    def collect_logs(self, dest: Path) -> None:
        self.cluster.collect_logs(dest)

    def process_control(self) -> ProcessControl | None:
        return self.cluster.process_control()

    def versions(self) -> dict[str, str]:
        return self.cluster.versions()


def main_peer(config: RunConfig, args: argparse.Namespace) -> int:
    """Run both tools on one cluster and write the comparison; exit 0 when both produced a rate."""
    chosen = release(config.cluster.pulsar_version)
    split = _cpu_split(getattr(args, "load_cpus", None))
    stamp = utc_stamp()
    peer_dir = create_unique_dir(args.results, f"{stamp}-peer-{config.name}-{config.path.value}-{chosen.version}")
    plan = plan_peer(config, chosen, tag=stamp.replace("-", ""))
    if split is not None:
        plan = dataclasses.replace(plan, notes=(*plan.notes, split.describe() + " (--load-cpus)"))
    for note in plan.notes:
        say(f"[peer] matched: {note}")
    cluster_dir = Path(tempfile.mkdtemp(prefix="txnbench-peer-"))
    cluster = PulsarCluster(PulsarSpec(
        txn_path=config.path, version=chosen.version, brokers=config.cluster.brokers,
        settings=dict(config.cluster.settings), directory=cluster_dir, parent_pid=os.getpid(),
        ready_timeout_s=max(config.cluster.ready_timeout_s, PULSAR_READY_TIMEOUT_S), say=say))
    load_cpus = split.load if split is not None else None
    usable = usable_cpus()
    try:
        if split is not None:   # the cluster's servers inherit the orchestrator's CPUs
            pin_process(os.getpid(), split.cluster)
        info = cluster.up()
        classpath = ensure_jars(chosen, say)
        java, major = find_java(chosen.min_java)
        runs = PerfRuns(plan.perf, peer_dir, say, functools.partial(
            run_perf, java=str(java), java_major=major, classpath=classpath, service_url=info.service_url,
            admin_url=info.admin_url, listener_name=info.listener_name, scrape=cluster.scrape_metrics, say=say,
            cpus=load_cpus))
        runs.warm_up(_cluster_warmup_s(args))
        perf_run = runs.measured()
        # analysed after the cluster is stopped: Spark and four idle JVMs do not share 2 cores well
        outcome = Run(plan.config, RunOptions(results_root=peer_dir, command="peer", analyze=False,
                                              target=SharedCluster(cluster), load_cpus=load_cpus)).execute()
        if getattr(args, "perf_after", True):
            runs.after()
    finally:
        try:
            cluster.down()
        finally:
            shutil.rmtree(cluster_dir, ignore_errors=True)
            if split is not None:   # the analysis below gets every CPU again
                pin_process(os.getpid(), usable)
    if outcome.status is RunStatus.COMPLETE:
        from analysis.pipeline import analyze_run

        say("[peer] analysis of the txnbench run")
        analyze_run(outcome.run_dir.path)
    java_cmd = f"java -cp '.txnbench/pulsar/{chosen.version}/lib/*' {MAIN_CLASS} client.conf"
    write_json_atomic(peer_dir / "peer-plan.json", {
        "plan": plan.perf.to_json(), "notes": list(plan.notes), "run_dir": outcome.run_dir.path.name,
        "cluster": {"target": "pulsar", "release": chosen.version, "brokers": config.cluster.brokers,
                    "components": cluster.components, "service_url": info.service_url},
        "cpus": split.to_json() if split is not None else None,
        "cluster_warmup_s": _cluster_warmup_s(args),
        "commands": {
            "peer": "txnbench " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["peer"] else "txnbench peer",
            "pulsar-perf": java_cmd + " " + shlex.join(plan.perf.argv(info.service_url, info.admin_url,
                                                                       info.listener_name)),
            "txnbench run": f"{outcome.run_dir.path.name} (scenario {plan.config.name}, matched as below)",
            **({"pulsar-perf after txnbench": "the same, on topics and a subscription suffixed `-after`"}
               if (peer_dir / PERF_AFTER_DIR / "run.json").is_file() else {})}})
    doc = write_peer_report(peer_dir)
    say(to_markdown(doc).split("\n## Commands")[0])
    print(peer_dir)
    sides = doc["sides"]
    if sides["pulsar-perf"]["ended_txn_per_s"] is None:
        raise EnvironmentProblem(f"pulsar-perf reported no rate; see {perf_run.log_path}")
    return 0 if sides["txnbench"].get("committed_txn_per_s") is not None else 2


@dataclass(frozen=True)
class PerfRuns:
    """The pulsar-perf runs of one comparison on one started cluster, each on topics of its own:
    the unmeasured warm-up, the measured run, and the run after txnbench that brackets it.
    `run` is `run_perf` with the cluster's and the JVM's arguments bound (a test passes a fake)."""

    plan: PerfPlan
    peer_dir: Path
    say: Callable[[str], None]
    run: Callable[..., PerfRun]

    def _on_own_topics(self, suffix: str) -> PerfPlan:
        return dataclasses.replace(self.plan, producer_topics=tuple(f"{t}-{suffix}" for t in self.plan.producer_topics),
                                   subscription=f"{self.plan.subscription}-{suffix}")

    def warm_up(self, seconds: int) -> None:
        """The JVMs compile their hot code under the first load: on few cores that takes minutes, and
        a measured run on a cold cluster times the compiler (the first run of a bracket read a quarter
        of the last, 2026-11-28), so the same load runs unmeasured first. 0 seconds: no warm-up."""
        if seconds <= 0:
            return
        self.say(f"[peer] warming the cluster up: pulsar-perf for {seconds} s, not measured")
        warm = dataclasses.replace(self._on_own_topics("warmup"), warmup_s=0, steady_s=seconds)
        out_dir = self.peer_dir / PERF_WARMUP_DIR
        log_path = out_dir.resolve() / LOG_NAME
        try:
            self.run(warm, out_dir=out_dir)
        except EnvironmentProblem as err:   # a stalled pulsar-perf can hang past its time and be killed
            self._refuse_stalled(log_path, err)
            raise
        self._refuse_stalled(log_path, None)

    def _refuse_stalled(self, log_path: Path, cause: EnvironmentProblem | None) -> None:
        stalled = stalled_rates(log_path)
        if stalled is None:
            return
        known = (" Pulsar 5.0.1's v5 path on ZooKeeper does this under pulsar-perf's load "
                 "(docs/findings/pulsar-perf-txnrate-ignored.md)." if self.plan.txn_path is TxnPath.V5 else "")
        raise EnvironmentProblem(
            f"the cluster stalled under pulsar-perf's warm-up: its last {STALLED_INTERVALS} intervals ran "
            f"{', '.join(f'{r:g}' for r in stalled)} txn/s (its log: {log_path}), so no comparison can be "
            f"measured on it.{known} Try another release or path, or --cluster-warmup 0 to measure a cold "
            "cluster") from cause

    def measured(self) -> PerfRun:
        out_dir = self.peer_dir / PERF_DIR
        done = self.run(self.plan, out_dir=out_dir)
        write_json_atomic(out_dir / "run.json", done.to_json())
        self.say(f"[peer] pulsar-perf done (exit {done.exit_code}); now txnbench on the same cluster")
        return done

    def after(self) -> PerfRun | None:
        """pulsar-perf again after txnbench: the same command swung 934-1,249 txn/s between runs on
        one machine (2026-11-27), so a ratio against one run says little without the drift. None
        when it failed: the two runs before it stand, and the report is left unbracketed."""
        self.say("[peer] pulsar-perf again after txnbench (the bracket: how far the cluster drifted)")
        out_dir = self.peer_dir / PERF_AFTER_DIR
        try:
            done = self.run(self._on_own_topics("after"), out_dir=out_dir)
        except EnvironmentProblem as err:
            self.say(f"[peer] the second pulsar-perf run failed, so the report has no bracket: {err}")
            return None
        write_json_atomic(out_dir / "run.json", done.to_json())
        return done


def stalled_rates(log_path: Path) -> list[float] | None:
    """The rates of a pulsar-perf run's last STALLED_INTERVALS interval lines when every one of them is
    0 (its transactions stopped completing), else None (a run too short to tell, or still moving)."""
    try:
        intervals, _ = parse_log(log_path.read_text(errors="replace"))
    except OSError:
        return None
    last = [line.rate for line in intervals[-STALLED_INTERVALS:]]
    return last if len(last) == STALLED_INTERVALS and not any(last) else None


def _cluster_warmup_s(args: argparse.Namespace) -> int:
    chosen = getattr(args, "cluster_warmup", None)
    return CLUSTER_WARMUP_S if chosen is None else int(chosen)


def _cpu_split(load_cpus: frozenset[int] | None) -> CpuSplit | None:
    """The CPUs of `--load-cpus` and the rest for the cluster; a list that cannot work stops here,
    before a cluster is started."""
    if load_cpus is None:
        return None
    try:
        return split_off(load_cpus, usable_cpus())
    except CpuSetError as err:
        raise EnvironmentProblem(f"--load-cpus: {err}") from None


def write_peer_report(peer_dir: Path) -> dict[str, Any]:
    """peer.{json,md,html} from what the peer folder holds (so a report can be rebuilt after a fix)."""
    saved = json.loads((peer_dir / "peer-plan.json").read_text())
    plan, perf_dir = saved["plan"], peer_dir / PERF_DIR
    perf = _perf_side(perf_dir, plan)
    after_dir = peer_dir / PERF_AFTER_DIR
    perf_after = _perf_side(after_dir, plan) if (after_dir / "run.json").is_file() else None
    doc = build_peer(peer_id=peer_dir.name, cluster=saved["cluster"], plan=plan, notes=saved["notes"], perf=perf,
                     txnbench=txnbench_side(peer_dir / saved["run_dir"]), commands=saved["commands"],
                     perf_after=perf_after)
    write_json_atomic(peer_dir / "peer.json", doc)
    write_text_atomic(peer_dir / "peer.md", to_markdown(doc))
    write_text_atomic(peer_dir / "peer.html", to_html(doc))
    return doc


def _perf_side(perf_dir: Path, plan: dict[str, Any]) -> dict[str, Any]:
    perf_run = json.loads((perf_dir / "run.json").read_text())
    hgrm = perf_dir / perf_run["hgrm"] if perf_run.get("hgrm") else None
    result = read_result((perf_dir / perf_run["log"]).read_text(errors="replace"),
                         hgrm.read_text() if hgrm else None, plan["warmup_s"], plan["steady_s"])
    return perf_side(result, perf_run, read_texts(perf_dir / "metrics", "before"),
                     read_texts(perf_dir / "metrics", "after"), plan["abort"])
