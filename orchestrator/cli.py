"""The `txnbench` command.

Each subcommand parses its arguments here and hands off to the module that
does the work; those modules are imported only when their command runs, so
`txnbench --help` is instant (PySpark, Locust and the cluster load only when used).
Errors a user can fix (`TxnbenchError`) become one line on stderr and their
exit status; Ctrl-C exits 130 after the callee has cleaned up.

Exit statuses: 0 success or a valid verdict, 1 an invalid verdict (anomalies),
2 bad input or an unknown verdict, 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from harness import __version__
from harness.config import RunConfig, Target, parse_setting_pairs
from harness.errors import ConfigError, TxnbenchError
from harness.interrupts import terminate_as_interrupt
from harness.txn_paths import TxnPath
from workloads.worker_args import add_worker_arguments

PATH_CHOICES = [p.value for p in TxnPath]
TARGET_CHOICES = ["embedded", "pulsar", "compose", "external"]
PULSAR_VERSION_HELP = ("pulsar target: the Apache Pulsar release to run (default 5.0.1; `txnbench releases` "
                       "lists every release that runs here, 2.10.5 to 5.0.1)")


def _cpu_list(text: str) -> frozenset[int]:
    from harness.cpus import CpuSetError, parse_cpu_list
    try:
        return parse_cpu_list(text)
    except CpuSetError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _user_levels(text: str) -> tuple[int, ...]:
    from analysis.sweep import parse_levels

    try:
        return parse_levels(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that indented lines (an epilog's example) stay as written, so they paste."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        return "\n".join(indent + line if line.startswith("  ") else fill(line, width, indent)
                         for line in text.split("\n"))


# The one example each command's help ends with; README.md shows the same lines
# (tests/unit/test_readme.py checks both).
EXAMPLES: dict[str, str] = {
    "txnbench": "txnbench bench --duration 20",
    "run": "txnbench run chaos-segments --path v5 --duration 30",
    "worker": "txnbench worker --master 10.0.0.5:5557 --processes 2",
    "bench": "txnbench bench --duration 20",
    "chaos": "txnbench chaos --scenario chaos-recovery --duration 60",
    "sweep": "txnbench sweep --users 4,48 --duration 20 --paths v4 v5",
    "selftest": "txnbench selftest --bugs txnbenchBugV5GcRetentionInMillis",
    "check": "txnbench check $(ls -1dt results/*-bench-bench | head -1)/runs/v5",
    "report": "M=$(ls -1dt results/*-bench-bench | head -1); txnbench report $M/runs/v4 $M/runs/v5 --out results/v4-vs-v5",
    "peer": "txnbench peer atomic-produce --path v4 --pulsar-version 4.0.8 --duration 30",
    "fidelity": "txnbench fidelity --duration 30",
    "finding": "txnbench finding v4-commit-marker-skipped-on-bundle-unload",
    "shrink": "txnbench shrink $(ls -1dt results/*-chaos-chaos | head -1)/runs/v4",
    "cluster": "txnbench cluster up --path v5 --brokers 3",
    "cluster up": "txnbench cluster up --target pulsar --path v5",
    "cluster status": "txnbench cluster status --json",
    "cluster down": "txnbench cluster down",
    "cluster heal": "txnbench cluster heal",
    "releases": "txnbench releases --check 2.10.5",
    "release-matrix": "txnbench release-matrix --releases 2.10.5 5.0.1",
}


def _epilog(command: str, before: str = "") -> str:
    return (before + "\n\n" if before else "") + "example:\n  " + EXAMPLES[command]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="txnbench",
        description="Benchmark and chaos-test Apache Pulsar transactions over the v4, "
                    "v4-batched and v5 paths.",
        epilog=_epilog("txnbench", "Exit status: 0 ok/valid, 1 anomalies found, 2 bad input or unknown verdict, "
                                   "130 interrupted."),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"txnbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="one run of a scenario on one path",
                         description="Run one scenario on one path; prints the run folder last.",
                         epilog=_epilog("run"), formatter_class=_HelpFormatter)
    run.add_argument("scenario", help="scenario name (scenarios/<name>.yaml) or file")
    run.add_argument("--path", choices=PATH_CHOICES, dest="txn_path",
                     help="transaction path (default: the scenario's)")
    run.add_argument("--target", choices=TARGET_CHOICES, help="where the cluster comes from")
    run.add_argument("--duration", type=_positive_float, metavar="S",
                     help="seconds of the main phase (steady, or faults for chaos scenarios)")
    run.add_argument("--pulsar-version", metavar="V", help=PULSAR_VERSION_HELP)
    run.add_argument("--service-url", help="pulsar:// URL of an external cluster")
    run.add_argument("--admin-url", help="http:// admin URL of an external cluster")
    run.add_argument("--seed", type=int, help="override the scenario's seed")
    run.add_argument("--users", type=_positive_int, help="override the number of Locust users")
    run.add_argument("--web-ui", action="store_true", help="serve Locust's web UI while running")
    run.add_argument("--remote-workers", type=int, metavar="N",
                     help="wait for N Locust workers from other hosts (load.remote_workers; see `txnbench worker`)")
    run.add_argument("--master", metavar="BIND:PORT",
                     help="where the Locust master listens for remote workers (load.master_bind:master_port; "
                          "default 127.0.0.1:5557)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="a cluster setting by its Pulsar name, over the scenario's (repeatable)")
    run.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                     help="results root (default: results/)")
    run.add_argument("--coverage", action="store_true",
                     help="measure code coverage: embedded, its services under coverage.py; pulsar, JaCoCo on "
                          "every broker and the bookie, reported per class and method of Pulsar's transaction "
                          "code with the recovery methods reached (targets/pulsar/recovery_methods.py): "
                          "<run>/coverage/coverage.md")
    run.add_argument("--allow-planted-bugs", action="store_true",
                     help="let --set switch on planted bugs (txnbenchBug...: deliberate faults of the self-test)")
    run.set_defaults(handler=_cmd_run)

    worker = sub.add_parser("worker", help="join a run from this host as N Locust workers",
                            description="Join a run whose scenario waits for remote workers (load.remote_workers): "
                                        "run N Locust workers here and ship their histories to the master.",
                            epilog=_epilog("worker"), formatter_class=_HelpFormatter)
    add_worker_arguments(worker)
    worker.set_defaults(handler=_cmd_worker)

    for name, default, what in (("bench", "bench", "the benchmark matrix over v4, v4-batched, v5"),
                                ("chaos", "chaos", "the chaos matrix: each path under faults"),
                                ("sweep", "bench", "a concurrency sweep: every path at several user counts")):
        writes = "sweep.* and levels/u<users>/compare.*" if name == "sweep" else "compare.*"
        matrix = sub.add_parser(name, help=what, description=f"Run {what}; writes {writes}",
                                epilog=_epilog(name), formatter_class=_HelpFormatter)
        matrix.add_argument("--duration", type=_positive_float, metavar="S",
                            help="seconds of each path's main phase")
        matrix.add_argument("--scenario", default=default, help=f"scenario (default: {default})")
        matrix.add_argument("--paths", nargs="+", choices=PATH_CHOICES, metavar="PATH",
                            help="paths to run (default: the scenario's)")
        matrix.add_argument("--target", choices=TARGET_CHOICES, help="where each run's cluster comes from")
        matrix.add_argument("--pulsar-version", metavar="V", help=PULSAR_VERSION_HELP)
        matrix.add_argument("--service-url", help="pulsar:// URL of an external cluster")
        matrix.add_argument("--admin-url", help="http:// admin URL of an external cluster")
        matrix.add_argument("--results", type=Path, default=Path("results"), metavar="DIR")
        matrix.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                            help="a cluster setting by its Pulsar name, over the scenario's (repeatable)")
        if name == "chaos":
            matrix.add_argument("--seed", type=int,
                                help="override the scenario's seed (a generated schedule is drawn from it)")
        if name in ("bench", "chaos"):
            matrix.add_argument("--coverage", action="store_true",
                                help="measure how much of the recovery code the runs reached: embedded, the "
                                     "services under coverage.py (embedded/recovery_code.py); pulsar, JaCoCo on "
                                     "every broker and the bookie (targets/pulsar/recovery_methods.py): "
                                     "coverage.md")
        if name in ("bench", "sweep"):
            matrix.add_argument("--no-capacity", action="store_true",
                                help="skip measuring the load generator against a null broker")
        if name == "sweep":
            matrix.add_argument("--users", type=_user_levels, default=(4, 16, 48), metavar="N,N,...",
                                help="user counts to run each path at (default: 4,16,48)")
        matrix.set_defaults(handler={"bench": _cmd_bench, "chaos": _cmd_chaos, "sweep": _cmd_sweep}[name])

    peer = sub.add_parser("peer", help="pulsar-perf transaction and txnbench on one real Pulsar cluster, one report",
                          description="Start one real Pulsar cluster (the pulsar target), run Pulsar's own "
                                      "`pulsar-perf transaction` with settings matched to the scenario, then the "
                                      "scenario itself on the same cluster; write results/<peer_id>/peer.{json,md,"
                                      "html}: committed txn/s, send/ack/commit latency, each load generator's CPU "
                                      "per 1000 transactions, broker-side counts, and what pulsar-perf cannot tell. "
                                      "Only atomic-produce scenarios map to pulsar-perf; v4 and v5 paths.",
                          epilog=_epilog("peer"), formatter_class=_HelpFormatter)
    peer.add_argument("scenario", help="an atomic-produce scenario (scenarios/<name>.yaml) or file")
    peer.add_argument("--path", choices=["v4", "v5"], dest="txn_path", help="transaction path (default: the scenario's)")
    peer.add_argument("--pulsar-version", metavar="V", help=PULSAR_VERSION_HELP)
    peer.add_argument("--duration", type=_positive_float, metavar="S",
                      help="seconds of the measured window of each tool (rounded up to 10 s intervals)")
    peer.add_argument("--users", type=_positive_int,
                      help="concurrent clients: txnbench users and pulsar-perf -threads (default: the scenario's)")
    peer.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="a broker setting by its Pulsar name, over the scenario's (repeatable)")
    peer.add_argument("--no-perf-after", dest="perf_after", action="store_false",
                      help="skip the second pulsar-perf run after txnbench (it brackets txnbench and measures the "
                           "cluster's drift; about two minutes)")
    peer.add_argument("--cluster-warmup", type=_non_negative_int, metavar="S",
                      help="seconds of unmeasured pulsar-perf load before the measured runs, so both tools meet "
                           "a cluster whose JVMs have compiled their hot code (default: 120; 0 skips it)")
    peer.add_argument("--load-cpus", type=_cpu_list, metavar="LIST",
                      help="pin both load generators (pulsar-perf's JVM, txnbench's load process) to these CPUs "
                           "(e.g. 1 or 2-3) and the cluster to the others, so neither tool's CPU is taken from "
                           "the cluster it measures (default: all share every CPU)")
    peer.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                      help="results root (default: results/)")
    peer.set_defaults(handler=_cmd_peer, target="pulsar")

    fidelity = sub.add_parser(
        "fidelity", help="bench, failover and chaos on embedded and on real Pulsar, side by side",
        description="Run the same scenarios (bench, failover, one chaos scenario) over the paths on the embedded "
                    "model and on real Pulsar (the pulsar target), or reuse matrices with --from, and write "
                    "results/<id>-fidelity-report/fidelity.{md,json,html}: per path committed txn/s, commit and "
                    "end-to-end latency, ledger entries, metadata writes and fsyncs per committed transaction, "
                    "critical-path depth, failover outage and replay, each with the metric behind it; throughput "
                    "ratios between paths; design-level gaps over 20% flagged; the system each conclusion rests on.",
        epilog=_epilog("fidelity", "Rebuild from matrices already run (no runs):\n"
                                   "  txnbench fidelity --from results/A-bench-bench results/B-chaos-failover"),
        formatter_class=_HelpFormatter)
    fidelity.add_argument("--from", dest="from_dirs", nargs="+", type=Path, metavar="DIR",
                          help="matrix or run folders to reuse (then only --systems are run again)")
    fidelity.add_argument("--systems", nargs="+", choices=["embedded", "pulsar"], metavar="SYSTEM",
                          help="systems to run (default: embedded and pulsar; none with --from)")
    fidelity.add_argument("--scenarios", nargs="+", choices=["bench", "failover", "chaos"],
                          default=["bench", "failover", "chaos"], metavar="NAME",
                          help="scenario groups to run (default: bench failover chaos)")
    fidelity.add_argument("--chaos-scenario", default="chaos", metavar="NAME",
                          help="the chaos scenario run (default: chaos)")
    fidelity.add_argument("--paths", nargs="+", choices=PATH_CHOICES, metavar="PATH",
                          help="paths to run (default: the scenarios')")
    fidelity.add_argument("--duration", type=_positive_float, metavar="S",
                          help="seconds of the bench's measured phase (default: the scenario's)")
    fidelity.add_argument("--faults-duration", type=_positive_float, default=30.0, metavar="S",
                          help="seconds of the failover and chaos faults phase (default: 30)")
    fidelity.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                          help="a cluster setting by its Pulsar name for every run (repeatable), e.g. "
                               "metadataStoreUrl=zk to run embedded v5 on ZooKeeper as the pulsar target does")
    fidelity.add_argument("--pulsar-lock", metavar="FILE",
                          help="hold an exclusive flock on FILE for each pulsar matrix, released in between "
                               "(default: $TXNBENCH_PULSAR_LOCK)")
    fidelity.add_argument("--results", type=Path, default=Path("results"), metavar="DIR")
    fidelity.set_defaults(handler=_cmd_fidelity)

    finding = sub.add_parser(
        "finding", help="reproduce a finding about Pulsar with Pulsar's own Java client (or the tool it is about)",
        description="Start a fresh pulsar-target cluster at the finding's release, run its reproduction (a Java "
                    "program on Pulsar's client, targets/pulsar/repro; no txnbench client or checker), print what "
                    "it observed and keep it in results/findings/<time>-<name>/. Exit 1 the bug shows, 0 it does "
                    "not, 2 it could not run; a race runs N tries and reports the rate. A finding about a tool "
                    "beside the broker runs that tool instead (pulsar-perf on the cluster; Oxia alone, no Pulsar).",
        epilog=_epilog("finding"), formatter_class=_HelpFormatter)
    finding.add_argument("name", nargs="?", metavar="NAME", help="the finding: its file stem in docs/findings/")
    finding.add_argument("--all", action="store_true",
                         help="every finding with a reproduction (exit 2 if any could not run, else 1 if any shows)")
    finding.add_argument("--list", action="store_true", help="list the findings with a reproduction and exit")
    finding.add_argument("--tries", type=_positive_int, metavar="N", help="tries (default: the finding's)")
    finding.add_argument("--pulsar-version", metavar="V",
                         help="run on this release instead of the finding's own (targets/pulsar/versions.py)")
    finding.add_argument("--brokers", type=_positive_int, metavar="N",
                         help="brokers in the cluster (default: the finding's, 2; 1 is a standalone's shape)")
    finding.add_argument("--program-args", metavar="ARGS",
                         help="more arguments for the finding's Java program, quoted as one (e.g. \"--fault restart\" "
                              "for the bundle-unload finding: its top comment lists them; a tool finding has none)")
    finding.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                         help="results root (default: results/)")
    finding.set_defaults(handler=_cmd_finding)

    shrink = sub.add_parser(
        "shrink", help="reduce a failing chaos run's faults to a small schedule that still fails",
        description="Read a failing chaos run's folder (results/<run_id> or results/<matrix>/runs/<path>): the "
                    "faults its nemesis injected, their targets and times, and the anomaly classes nobody expected. "
                    "Re-run its scenario (same seed, workload, cluster, target and release) with fewer faults: "
                    "first cut after the first unexpected anomaly, then delta debugging over the faults, then "
                    "each kept window halved. A candidate fails when a run shows the same classes unexpected. "
                    "Writes results/<run_id>-shrink/: shrink.json, shrink.md, shrunk.yaml (a scenario for "
                    "`txnbench run`) and each candidate's run; prints the scenario's path last. docs/shrink.md.",
        epilog=_epilog("shrink"), formatter_class=_HelpFormatter)
    shrink.add_argument("run_dir", type=Path, metavar="RUN", help="the failing run's folder")
    shrink.add_argument("--anomaly", action="append", metavar="CLASS",
                        help="keep only this unexpected class (repeatable; default: every one the run showed)")
    shrink.add_argument("--tries", type=_positive_int, default=1, metavar="N",
                        help="runs per candidate; one that fails keeps it (races; default 1)")
    shrink.add_argument("--max-runs", type=_positive_int, default=30, metavar="N",
                        help="runs in all, tries included (default 30)")
    shrink.add_argument("--budget", type=_positive_float, metavar="S",
                        help="seconds; no run starts after them (default: none, --max-runs bounds it)")
    shrink.add_argument("--margin", type=_positive_float, metavar="S",
                        help="seconds kept after the first unexpected anomaly, and after the last kept fault's "
                             "window before the faults phase ends (default 10; 30 on the pulsar target, whose "
                             "heals start JVMs)")
    shrink.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                        help="results root (default: results/)")
    shrink.set_defaults(handler=_cmd_shrink)

    selftest = sub.add_parser("selftest", help="run each planted bug with the scenario meant to catch it",
                              description="Prove the harness's power: each catalogued planted bug "
                                          "(orchestrator/planted.py) is run with its catching scenario and "
                                          "reported caught or missed; a clean baseline runs per scenario and "
                                          "path. Writes results/<selftest_id>/selftest.{json,md}; exit 0 when "
                                          "every bug is caught and every baseline clean, else 1.",
                              epilog=_epilog("selftest"), formatter_class=_HelpFormatter)
    selftest.add_argument("--bugs", nargs="+", metavar="ID", help="only these planted bugs (default: all)")
    selftest.add_argument("--paths", nargs="+", choices=PATH_CHOICES, metavar="PATH",
                          help="only the bugs that live on these paths")
    selftest.add_argument("--no-baseline", action="store_true", help="skip the clean baseline runs")
    selftest.add_argument("--baseline-from", type=Path, metavar="DIR",
                          help="judge the bugs against the baselines of an earlier `txnbench selftest` or "
                               "`txnbench chaos` results folder (with --no-baseline): a class that baseline "
                               "showed is no catch")
    selftest.add_argument("--with-chaos", action="store_true",
                          help="also run every bug under chaos.yaml alone, with its own baselines, and report "
                               "what it catches beside the tuned scenarios (make selftest does)")
    selftest.add_argument("--scenario", metavar="NAME",
                          help="run every bug under this one scenario instead of its own (e.g. chaos); "
                               "that figure then decides the exit status")
    selftest.add_argument("--duration", type=_positive_float, metavar="S",
                          help="seconds of each run's faults phase (default: the scenario's)")
    selftest.add_argument("--list", action="store_true", help="print the catalogue and exit")
    selftest.add_argument("--results", type=Path, default=Path("results"), metavar="DIR")
    selftest.set_defaults(handler=_cmd_selftest)

    check = sub.add_parser("check", help="check a run's history for anomalies",
                           description="Write RUN_DIR/analysis/results.json, or, when the run has "
                                       "one already (its recorded result, kept as it is), "
                                       "RUN_DIR/analysis/check-<UTC time>/results.json; exit 0 valid, "
                                       "1 anomalies, 2 unknown (also for a damaged history).",
                           epilog=_epilog("check"), formatter_class=_HelpFormatter)
    check.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    check.add_argument("--master", help="Spark master (default: $TXNBENCH_SPARK_MASTER or local[*])")
    check.add_argument("--checker", choices=("duckdb", "spark"),
                       help="which engine runs the checks (default: $TXNBENCH_CHECKER, else duckdb on this "
                            "machine and spark with a cluster --master; both give the same results)")
    check.set_defaults(handler=_cmd_check)

    report = sub.add_parser("report", help="(re)build reports; several runs give a comparison",
                            epilog=_epilog("report"), formatter_class=_HelpFormatter)
    report.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    report.add_argument("--out", type=Path, help="folder for a comparison of several runs")
    report.set_defaults(handler=_cmd_report)

    releases = sub.add_parser(
        "releases", help="the Apache Pulsar releases the pulsar target runs: what resolves and starts here",
        description="List the Apache Pulsar releases of the pulsar target (targets/pulsar/versions.py): per release "
                    "its line, Java, BookKeeper, ZooKeeper and netty, the paths it has, whether pulsar-perf is "
                    "served, whether it resolves from the Maven mirror and starts here, and when that was last "
                    "checked (and why not). --check tries them again: it resolves each release's jars and starts a "
                    "cluster of it on each path it has until one transaction commits, then stops it (one cluster "
                    "at a time, about a minute each; all of them: about half an hour), and records what it saw in "
                    ".txnbench/pulsar/releases.json. Exit status: 0, or 1 when a check differs from the table.",
        epilog=_epilog("releases"), formatter_class=_HelpFormatter)
    releases.add_argument("versions", nargs="*", metavar="VERSION", help="only these releases (default: every one)")
    releases.add_argument("--check", action="store_true",
                          help="resolve and start each release now, and record the outcome")
    releases.add_argument("--paths", nargs="+", choices=PATH_CHOICES, metavar="PATH",
                          help="with --check: start only these paths (default: every path each release has)")
    releases.add_argument("--json", action="store_true", help="the listing as JSON")
    releases.set_defaults(handler=_cmd_releases)

    rmatrix = sub.add_parser(
        "release-matrix", help="the same chaos and seed on every Pulsar release and path that runs here",
        description="Run one scenario (chaos by default) with one seed on each Apache Pulsar release the pulsar "
                    "target runs (`txnbench releases`), oldest first, on each path it has (v4 everywhere, "
                    "v4-batched from 2.11, v5 on 5.0); writes release-matrix.{json,md}: per release and path the "
                    "verdict, each anomaly class with its count and the reproduce command, and the release diff "
                    "(the classes a release shows that the next one does not). One chaos.yaml run is about 15 "
                    "minutes: all nine releases and their paths, about 4 hours; --duration shortens each.",
        epilog=_epilog("release-matrix"), formatter_class=_HelpFormatter)
    rmatrix.add_argument("--scenario", default="chaos", help="scenario (default: chaos)")
    rmatrix.add_argument("--releases", nargs="+", metavar="V",
                         help="only these releases (default: every one that runs here)")
    rmatrix.add_argument("--paths", nargs="+", choices=PATH_CHOICES, metavar="PATH",
                         help="paths to run where a release has them (default: the scenario's)")
    rmatrix.add_argument("--duration", type=_positive_float, metavar="S", help="seconds of each run's main phase")
    rmatrix.add_argument("--seed", type=int, help="override the scenario's seed (the same on every release)")
    rmatrix.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="a cluster setting by its Pulsar name, over the scenario's (repeatable)")
    rmatrix.add_argument("--coverage", action="store_true",
                         help="JaCoCo on every broker and the bookie of each run: how many of the release's listed "
                              "recovery methods it entered, per cell (targets/pulsar/recovery_methods.py)")
    rmatrix.add_argument("--results", type=Path, default=Path("results"), metavar="DIR")
    rmatrix.add_argument("--from", dest="from_dirs", nargs="+", type=Path, metavar="DIR",
                         help="run nothing: one report and release diff over release-matrix folders run apart "
                              "(e.g. one CI job per release), written to --out")
    rmatrix.add_argument("--out", type=Path, default=Path("results/release-matrix"), metavar="DIR",
                         help="with --from: where the combined report goes (default: results/release-matrix)")
    rmatrix.set_defaults(handler=_cmd_release_matrix, target="pulsar")

    cluster = sub.add_parser("cluster", help="start, inspect and stop a cluster by hand (embedded or pulsar)",
                             epilog=_epilog("cluster"), formatter_class=_HelpFormatter)
    cluster.add_argument("--dir", type=Path, default=None, metavar="DIR",
                         help="cluster state folder (default: .txnbench/cluster or $TXNBENCH_CLUSTER_DIR)")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    up = csub.add_parser("up", help="start the cluster in the background and wait until ready",
                         epilog=_epilog("cluster up"), formatter_class=_HelpFormatter)
    up.add_argument("--target", choices=["embedded", "pulsar"], default="embedded",
                    help="our reference cluster (default) or real Apache Pulsar from Maven Central jars")
    up.add_argument("--pulsar-version", metavar="V", help=PULSAR_VERSION_HELP)
    up.add_argument("--path", choices=PATH_CHOICES, default="v4", dest="txn_path")
    up.add_argument("--brokers", type=_positive_int, default=2)
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting by its Pulsar name (repeatable)")
    up.add_argument("--allow-planted-bugs", action="store_true",
                    help="let --set switch on planted bugs (deliberate faults of the self-test)")
    up.set_defaults(handler=_cmd_cluster_up)
    status = csub.add_parser("status", help="service URLs and process states",
                             epilog=_epilog("cluster status"), formatter_class=_HelpFormatter)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_cmd_cluster_status)
    down = csub.add_parser("down", help="stop every process the cluster started",
                           epilog=_epilog("cluster down"), formatter_class=_HelpFormatter)
    down.set_defaults(handler=_cmd_cluster_down)
    heal = csub.add_parser("heal", help="remove every fault still in effect",
                           epilog=_epilog("cluster heal"), formatter_class=_HelpFormatter)
    heal.set_defaults(handler=_cmd_cluster_heal)
    return parser


def scenario_from_args(args: argparse.Namespace) -> RunConfig:
    """The scenario named on the command line with the command line's overrides applied, validated."""
    from orchestrator import scenario

    return scenario.load(args.scenario, lambda config: _with_overrides(config, args))


def _with_overrides(config: RunConfig, args: argparse.Namespace) -> RunConfig:
    changes: dict[str, object] = {}
    if getattr(args, "txn_path", None):
        # one path runs, so only it is checked against the release: `run chaos --path v4` on 3.2.0
        # (the release matrix's reproduce command) was refused for chaos.yaml's v5
        changes["path"] = TxnPath(args.txn_path)
        changes["paths"] = (TxnPath(args.txn_path),)
    if getattr(args, "paths", None):
        changes["paths"] = tuple(TxnPath(p) for p in args.paths)
    if getattr(args, "target", None):
        changes["target"] = Target(args.target)
    if getattr(args, "seed", None) is not None:
        changes["seed"] = args.seed
    cluster = config.cluster
    if getattr(args, "service_url", None):
        cluster = dataclasses.replace(cluster, service_url=args.service_url)
    if getattr(args, "admin_url", None):
        cluster = dataclasses.replace(cluster, admin_url=args.admin_url)
    if getattr(args, "pulsar_version", None):
        cluster = dataclasses.replace(cluster, pulsar_version=args.pulsar_version)
    if getattr(args, "set", None):
        cluster = dataclasses.replace(cluster, settings={**cluster.settings, **parse_setting_pairs(args.set)})
    load = config.load
    if isinstance(getattr(args, "users", None), int):
        load = dataclasses.replace(load, users=args.users, spawn_rate=max(load.spawn_rate, float(args.users)))
    if getattr(args, "web_ui", False):
        load = dataclasses.replace(load, web_ui=True)
    if getattr(args, "remote_workers", None) is not None:
        if args.remote_workers < 0:
            raise ConfigError("--remote-workers", str(args.remote_workers), "must be 0 or more", "e.g. 2")
        load = dataclasses.replace(load, remote_workers=args.remote_workers)
    if getattr(args, "master", None):
        bind, port = _bind_port(args.master)
        load = dataclasses.replace(load, master_bind=bind, master_port=port)
    config = dataclasses.replace(config, cluster=cluster, load=load, **changes)  # type: ignore[arg-type]
    if getattr(args, "duration", None):
        config = config.with_duration(args.duration)
    if config.target is Target.EXTERNAL and not config.cluster.service_url:
        raise ConfigError("--target external", "", "needs the cluster's service URL",
                          "pass --service-url pulsar://127.0.0.1:6650 (and --admin-url)")
    return config


def _bind_port(text: str) -> tuple[str, int]:
    import ipaddress

    bind, sep, port = text.rpartition(":")
    try:
        ipaddress.ip_address(bind.strip("[]"))
        number = int(port)
    except ValueError:
        number = -1
    if not sep or not 1024 <= number <= 65535:
        raise ConfigError("--master", text, "expected BIND:PORT with an IP address of this host and a port 1024-65535",
                          "e.g. --master 10.0.0.5:5557 (127.0.0.1:5557 keeps it on this machine)")
    return bind.strip("[]"), number


def _cmd_worker(args: argparse.Namespace) -> int:
    """The worker host patches the standard library for gevent: it must be its own process image."""
    import os

    from workloads import entrypoints

    argv = entrypoints.python_m(entrypoints.WORKER_HOST, "--master", args.master, "--processes",
                                str(args.processes), "--dir", str(args.dir), "--wait", str(args.wait))
    if args.scenario:
        argv += ["--scenario", args.scenario]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
    return 2   # not reached


def _cmd_run(args: argparse.Namespace) -> int:
    config = scenario_from_args(args)
    from orchestrator import run as run_module

    return run_module.main_run(config, args)


def _cmd_bench(args: argparse.Namespace) -> int:
    config = scenario_from_args(args)
    from orchestrator import matrix

    return matrix.main_matrix(config, args, kind="bench")


def _cmd_chaos(args: argparse.Namespace) -> int:
    config = scenario_from_args(args)
    if not config.faults.enabled:
        raise ConfigError(config.name, "faults", "a chaos matrix needs a scenario with faults",
                          "pass --scenario chaos or add a faults: section")
    from orchestrator import matrix

    return matrix.main_matrix(config, args, kind="chaos")


def _cmd_sweep(args: argparse.Namespace) -> int:
    config = scenario_from_args(args)
    from orchestrator import matrix

    return matrix.main_sweep(config, args, levels=args.users)


def _cmd_peer(args: argparse.Namespace) -> int:
    config = scenario_from_args(args)
    from orchestrator import peer as peer_module
    return peer_module.main_peer(config, args)


def _cmd_fidelity(args: argparse.Namespace) -> int:
    from orchestrator import fidelity as fidelity_module

    return fidelity_module.main_fidelity(args, getattr(args, "argv", None))


def _cmd_finding(args: argparse.Namespace) -> int:
    from targets.pulsar import finding_command

    return finding_command.main_finding(args)


def _cmd_shrink(args: argparse.Namespace) -> int:
    from orchestrator.shrink import command as shrink_command

    return shrink_command.main_shrink(args)


def _cmd_selftest(args: argparse.Namespace) -> int:
    from orchestrator import selftest as selftest_module

    return selftest_module.main_selftest(args)


def _cmd_check(args: argparse.Namespace) -> int:
    from analysis import check as check_module

    return check_module.main_check(args)


def _cmd_report(args: argparse.Namespace) -> int:
    from analysis import report as report_module

    return report_module.main_report(args)


def _cmd_release_matrix(args: argparse.Namespace) -> int:
    from orchestrator import release_matrix

    if args.from_dirs:
        return release_matrix.combine(args.from_dirs, args.out)
    config = scenario_from_args(args)

    return release_matrix.main_release_matrix(config, args)


def _cmd_releases(args: argparse.Namespace) -> int:
    from orchestrator import releases_cli

    return releases_cli.main_releases(args)


def _cmd_cluster_up(args: argparse.Namespace) -> int:
    from orchestrator import cluster_cli

    return cluster_cli.cluster_up(args)


def _cmd_cluster_status(args: argparse.Namespace) -> int:
    from orchestrator import cluster_cli

    return cluster_cli.cluster_status(args)


def _cmd_cluster_down(args: argparse.Namespace) -> int:
    from orchestrator import cluster_cli

    return cluster_cli.cluster_down(args)


def _cmd_cluster_heal(args: argparse.Namespace) -> int:
    from orchestrator import cluster_cli

    return cluster_cli.cluster_heal(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]   # the command as typed, for reports
    handler: Callable[[argparse.Namespace], int] = args.handler
    terminate_as_interrupt()    # a cancelled CI job's SIGTERM heals and tears down, as Ctrl-C does
    try:
        return handler(args)
    except TxnbenchError as err:
        print(f"txnbench: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("txnbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
