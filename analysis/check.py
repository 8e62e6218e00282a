"""`txnbench check RUN_DIR`: the atomicity verdict of one run.

Theory of operation. The history is first compared with what the run recorded it
wrote (the manifest's `history_files`, harness.history.integrity): a file missing,
cut, changed or grown supports no verdict, and the check answers "unknown" naming the
file, the line and the damage, without starting a checker (damage is never reported as an
anomaly of the system). Then one of two checkers with the same checks runs
(`checker_engine`): on this machine DuckDB (analysis.duck: Arrow converts, pairs and
validates the history, SQL decides the transactions and runs every check of
docs/checks.md), on a Spark cluster, or for a history Arrow cannot vouch for, Spark
(analysis.history_io loads and validates, analysis.checks.context pairs and decides,
analysis.checks runs the checks). Both results become the same results.json (`_document`).
The verdict merges them the way Jepsen's `compose` does: any anomaly makes it `false`; otherwise any
reason to doubt (no `drain-complete`, a check skipped, cases a check could not
judge, a malformed history) makes it `"unknown"`; otherwise `true`.
`RUN_DIR/analysis/results.json` records the verdict, the anomalies (only the
classes that occurred), every check's status, operation and transaction counts,
facts about the history and, when unknown, why. Exit status: 0 valid,
1 anomalies, 2 unknown (and 2 for a missing or empty run folder).

A run's own result is `analysis/results.json`: the orchestrator's analysis writes it (and
the first check of a run never analysed). `txnbench check` never replaces it: when it
exists, the check writes `analysis/check-<UTC stamp>/results.json` (and its `instances/`)
beside it and says so, since the manifest's verdict and the report were made from it.

API: `check_run(run_dir, master=None, *, progress=None, out_dir=None, engine=None) -> dict` (the
orchestrator calls it in-process), `checker_engine(engine, master) -> str` and
`main_check(args) -> int` (the CLI).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
from py4j.protocol import Py4JError
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.checks import REGISTRY, run_checks_with_tallies
from analysis.checks.base import NO_DRAIN_REASON, CheckResult, CheckStatus
from analysis.checks.context import (
    DEFAULT_ABORT_BOUND_S,
    DEFAULT_STALL_AFTER_S,
    DEFAULT_TXN_TIMEOUT_S,
    prepare,
)
from analysis.duck.load import NeedsSpark
from analysis.duck.run import MEMORY_ENV, check_history, memory_limit
from analysis.history_io import HistoryFacts, HistoryFormatError, NoHistoryError, load_run
from analysis.model import (
    FIRST_UNCLAIMED,
    HistoryOverview,
    first_unclaimed,
    overview_aggregates,
    overview_from_row,
    pair_operations,
    union_all,
)
from analysis.spark import (
    DRIVER_MEMORY_ENV,
    SMALL_INPUT_BYTES,
    driver_memory,
    fills_large_heap,
    get_spark,
    resolve_master,
    tune_for_input,
)
from harness.anomalies import AnomalyClass
from harness.config import RunConfig
from harness.errors import ConfigError, EnvironmentProblem
from harness.history.events import Event, read_events
from harness.history.integrity import RECORD_KEY, Damage, verify_history, verify_writers
from harness.history.reader import history_bytes
from harness.history.schema import NEMESIS_WRITER, FaultEffect, OpF, OpType
from harness.results import (
    RunDir,
    read_json,
    recorded_config,
    utc_stamp,
    write_json_atomic,
    write_text_atomic,
)

RESULTS_SCHEMA = 1
# Histories at least this large print progress on stderr.
PROGRESS_MIN_BYTES = 32 * 1024 * 1024
# Checks run at once on a large history, after the first (analysis.checks.run_checks_with_tallies):
# each check's job mostly keeps one core busy, so two fill this machine's two.
CHECK_THREADS = 2
EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN = 0, 1, 2
# Separates the parts of a tally key (what, f, type) in the counting job.
_SEP = "\u0000"


class _Progress:
    """One-line progress messages on stderr with the elapsed time.

    Once the session runs (`label_jobs`), each message also names the Spark jobs that follow it
    (their job description), so Spark's event log says which check spent what
    (`python -m tools.bench.spark_profile`)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.monotonic()
        self.spark: SparkSession | None = None

    def label_jobs(self, spark: SparkSession) -> None:
        self.spark = spark

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"txnbench check: [{time.monotonic() - self.start:7.1f} s] {message}", file=sys.stderr,
                  flush=True)
        if self.spark is not None:
            self.spark.sparkContext.setJobDescription(message)


def _recorded(run: RunDir) -> tuple[RunConfig | None, str]:
    """The run's recorded config (harness.results.recorded_config), or None and why the checker
    takes its defaults instead."""
    if not run.manifest_path.is_file():
        return None, "no manifest.json"
    try:
        config = recorded_config(read_json(run.manifest_path), str(run.manifest_path))
    except (OSError, ValueError, ConfigError) as err:
        return None, f"the manifest's config does not build: {err}"
    return config, "manifest has no config.checks.stall_after_s"


def stall_after_s(run: RunDir) -> tuple[float, str]:
    """The run's `config.checks.stall_after_s` and where it came from."""
    config, why = _recorded(run)
    return (config.checks.stall_after_s, "manifest") if config else (DEFAULT_STALL_AFTER_S, f"default ({why})")


def abandon_limits(run: RunDir) -> tuple[float, float]:
    """(workload.txn_timeout_s, checks.abort_bound_s) of the run, for unresolved-txn."""
    config, _ = _recorded(run)
    if config is None:
        return DEFAULT_TXN_TIMEOUT_S, DEFAULT_ABORT_BOUND_S
    return config.workload.txn_timeout_s, config.checks.abort_bound_s


def killed_writers(run: RunDir) -> tuple[str, ...]:
    """Load workers a client fault killed (the nemesis's `fault` ok, `extra.effect.writer`):
    like a lost worker, their history simply ends."""
    killed: set[str] = set()
    try:
        for op in read_events(run.history_dir, writers=(NEMESIS_WRITER,), fs=(OpF.FAULT,)):
            effect = op.extra.get("effect")
            if op.type is OpType.OK and FaultEffect.KILLS_CLIENT in op.effects \
                    and isinstance(effect, dict) and isinstance(effect.get("writer"), str):
                killed.add(effect["writer"])
    except (OSError, ValueError):
        return ()
    return tuple(sorted(killed))


#: the store every commit of a path needs: v4's end-transaction appends to the coordinator's log
#: and writes markers into the topics (the ledger store); v5's is a CAS of the transaction's
#: header and its decision events (the metadata store)
COMMIT_STORE = {"v4": "ledger", "v4-batched": "ledger", "v5": "metadata"}
_BROKER = re.compile(r"broker-\d+")
#: one broker's links: the clients' to it, its own to the metadata or ledger store, the other
#: brokers' to it (the coordinator reaches a participant's owner over it)
_BROKER_LINK = re.compile(r"client-broker-\d+|broker-\d+-(?:metadata|ledger)|brokers-broker-\d+")


def _is_outage(op: Event, commit_store: str | None) -> bool:
    """True for a fault during which a commit of the run's path may have waited on the fault,
    not on the system: every client cut off, the commit store out of every broker's reach (every
    link to it cut, `target: ledger` or `metadata`, or the store down: killed, crashed, corrupted,
    paused, or exited on its own until the supervisor started it again), or one broker stopped
    or cut off (`_stops_a_broker`). The fault's effects say which (harness.history.schema
    FaultEffect, as its kind declares them)."""
    effects = op.effects
    if FaultEffect.ISOLATES_CLIENTS in effects:
        return True
    if commit_store is not None and effects & {FaultEffect.STOPS, FaultEffect.CUTS} \
            and op.extra.get("selector") == commit_store:
        return True
    return _stops_a_broker(op)


def _stops_a_broker(op: Event) -> bool:
    """A broker stopped (killed, crashed, paused, restarting, exited) or one of its links cut.

    Why: a transaction's coordinator and its participants' partitions live on brokers the history
    does not name, and with few brokers nearly every transaction has one of them on each broker.
    A commit whose coordinator or participant is on a stopped broker waits for its failover
    (session expiry, the topic's load and its transaction buffer's recovery elsewhere, or the
    broker's own restart): on real Pulsar 20 to 120 s per JVM restart on this machine, so
    faults stacked in one window make a healthy commit wait longer than any fixed bound. That time
    is the fault's; the time the commit waits with every broker up and reachable still counts, so
    a commit a restart leaves stuck, or a failover slower than the bound, is still a stall."""
    targets = [str(t) for t in op.extra.get("targets") or []]
    if FaultEffect.STOPS in op.effects:
        return any(_BROKER.fullmatch(t) for t in targets)
    if FaultEffect.CUTS in op.effects:
        return any(_BROKER_LINK.fullmatch(t) for t in targets)
    return False


def run_txn_path(run: RunDir) -> str | None:
    """The run's transaction path from its manifest; None when it cannot be read."""
    try:
        value = read_json(run.manifest_path).get("path")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def commit_blocked_windows(run: RunDir) -> tuple[tuple[int, int | None], ...]:
    """When a commit may have waited on a fault rather than on the system: (a fault's `fault`
    invoke, its `heal` ok or None), run clock; stalled-commit does not count that time.

    Every client cut off from every broker; the store every commit of the run's path needs out of
    every broker's reach (`COMMIT_STORE`: all its links cut, or it stopped, until healed); one
    broker stopped or one of its links cut (`_is_outage`, by the faults' recorded effects).
    A commit caught by such a window is slow by the fault's length; the time outside the
    windows still counts, so a commit that stays stuck after the heal is still a stall."""
    commit_store = COMMIT_STORE.get(run_txn_path(run) or "")
    starts: dict[str, int] = {}
    ends: dict[str, int | None] = {}
    try:
        for op in read_events(run.history_dir, writers=(NEMESIS_WRITER,), fs=(OpF.FAULT, OpF.HEAL)):
            if not _is_outage(op, commit_store):
                continue
            key, t = op.fault_key, op.time_ns
            if op.f is OpF.FAULT and op.type is OpType.INVOKE:
                starts[key] = t
                ends.setdefault(key, None)
            elif op.f is OpF.FAULT and op.type is OpType.FAIL:
                starts.pop(key, None)
            elif op.f is OpF.HEAL and op.type is OpType.OK:
                ends[key] = t
    except (OSError, ValueError):
        return ()
    return tuple(sorted((start, ends.get(key)) for key, start in starts.items()))


def _lost_entries(run: RunDir) -> list[dict[str, Any]]:
    if not run.manifest_path.is_file():
        return []
    try:
        lost = (read_json(run.manifest_path).get("load_workers") or {}).get("lost") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [entry for entry in lost if isinstance(entry, dict)]


def clock_slack_ns(run: RunDir) -> int:
    """The widest disagreement between a remote host's run clock and the master's: the offset's bound
    at start plus how far the offset moved by the end (manifest `load_workers.hosts`); 0 without
    remote workers."""
    if not run.manifest_path.is_file():
        return 0
    try:
        hosts = (read_json(run.manifest_path).get("load_workers") or {}).get("hosts") or []
    except (OSError, ValueError, AttributeError):
        return 0
    slack = 0
    for host in hosts:
        start, end = (host or {}).get("clock_start") or {}, (host or {}).get("clock_end") or {}
        if not isinstance(start.get("uncertainty_ns"), int):
            continue
        bound = start["uncertainty_ns"]
        if isinstance(end.get("base_ns"), int) and isinstance(start.get("base_ns"), int):
            bound += abs(end["base_ns"] - start["base_ns"]) + int(end.get("uncertainty_ns") or 0)
        slack = max(slack, bound)
    return slack


def lost_writer_names(run: RunDir) -> tuple[str, ...]:
    """Writers whose process ended mid-run: remote workers lost, and local workers a client-kill killed."""
    return tuple(sorted({str(e.get("writer")) for e in _lost_entries(run)} | set(killed_writers(run))))


def lost_workers(run: RunDir) -> tuple[list[str], list[str]]:
    """Remote load workers the run lost mid-run (manifest `load_workers.lost`): (explanations, doubts).

    A lost worker whose file arrived to its last line leaves an ordinary torn history (its open
    operations count as `info`): it is explained, not doubted. One whose host vanished left only
    what was shipped before: operations after that are missing, so the verdict cannot be `true`.
    """
    lost = _lost_entries(run)
    notes: list[str] = []
    doubts: list[str] = []
    for entry in lost:
        who = f"load worker {entry.get('writer')} on host {entry.get('host')} was lost mid-run ({entry.get('reason')})"
        if entry.get("complete"):
            notes.append(f"{who}; its history reached the master to its last line, its unfinished operations "
                         "count as outcome unknown")
        else:
            doubt = (f"{who}; only the first {entry.get('bytes', 0)} bytes of its history reached the master, so "
                     "operations it recorded after them are missing (values it sent may show as unexpected)")
            notes.append(doubt)
            doubts.append(doubt)
    return notes, doubts


@dataclass(frozen=True)
class _Output:
    """Where one check writes: `results.json` and `instances/` in `folder`."""

    folder: Path

    @property
    def results_json(self) -> Path:
        return self.folder / "results.json"

    @property
    def instances_dir(self) -> Path:
        return self.folder / "instances"


RECHECK_PREFIX = "check-"


def recheck_dir(run: RunDir, now: datetime | None = None) -> Path:
    """A fresh folder for a check of a run that already has a result: `analysis/check-<UTC stamp>/`
    (`-2`, `-3` ... when taken). Not created here: the check writes into it."""
    base = f"{RECHECK_PREFIX}{utc_stamp(now)}"
    for attempt in range(1, 1000):
        candidate = run.analysis_dir / (base if attempt == 1 else f"{base}-{attempt}")
        if not candidate.exists():
            return candidate
    raise RuntimeError(f"no free folder for a check's results under {run.analysis_dir}")


#: results.json `history.integrity`: the files are what the run recorded, or the run recorded nothing
#: (its manifest predates the record): then only a torn last line is known, as before
INTEGRITY_VERIFIED, INTEGRITY_UNRECORDED, INTEGRITY_DAMAGED = "verified", "unrecorded", "damaged"


def _named_writers(manifest: dict[str, Any]) -> list[str]:
    """The remote load workers the manifest names (`load_workers.hosts[].writers`), less those it
    says were lost (their history may never have arrived: `lost_workers` judges them)."""
    workers = manifest.get("load_workers") or {}
    if not isinstance(workers, dict):
        return []
    lost = {str(e.get("writer")) for e in workers.get("lost") or [] if isinstance(e, dict)}
    named = [str(w) for host in workers.get("hosts") or [] if isinstance(host, dict)
             for w in host.get("writers") or []]
    return [w for w in named if w not in lost]


def history_damage(run: RunDir) -> tuple[str, list[Damage]]:
    """(integrity, damage): the run's history against what its manifest says it wrote.

    With the record the orchestrator writes as a run ends (`history_files`,
    harness.history.integrity), every file is compared with it: a file missing, cut, changed,
    grown, or not written by the run is damage. Without it (a manifest from before the record),
    only writers the manifest names are looked for. Damage is never an anomaly of the system:
    the check answers "unknown" and names the file, the line and the damage."""
    try:
        manifest = read_json(run.manifest_path) if run.manifest_path.is_file() else {}
    except (OSError, ValueError):
        manifest = {}
    if not isinstance(manifest, dict):
        manifest = {}
    record = manifest.get(RECORD_KEY)
    damage = verify_history(run.history_dir, record) if record is not None else []
    seen = {d.file for d in damage}
    damage += [d for d in verify_writers(run.history_dir, _named_writers(manifest)) if d.file not in seen]
    if damage:
        return INTEGRITY_DAMAGED, damage
    return (INTEGRITY_VERIFIED if record is not None else INTEGRITY_UNRECORDED), []


def _damage_error(damage: list[Damage]) -> str:
    more = f" ({len(damage) - 1} more damaged file(s) in history.damage)" if len(damage) > 1 else ""
    return (f"{damage[0]}{more}; a history damaged beyond a torn last line supports no verdict (damage is "
            "not an anomaly of the system): restore the files the run wrote, or re-run")


def _damage_facts(run: RunDir, damage: list[Damage]) -> dict[str, Any]:
    files = sorted(run.history_dir.glob("*.jsonl")) if run.history_dir.is_dir() else []
    return {"directory": str(run.history_dir), "files": [p.name for p in files],
            "bytes": sum(p.stat().st_size for p in files if p.is_file()), "integrity": INTEGRITY_DAMAGED,
            "damage": [d.to_json() for d in damage]}


def _check_entry(result: CheckResult) -> dict[str, Any]:
    entry: dict[str, Any] = {"status": result.status.value, "reason": result.reason}
    if result.status is CheckStatus.RAN:
        entry["count"] = result.count
        if result.unjudged:
            entry["unjudged"] = result.unjudged
            entry["note"] = result.note
    return entry


def _verdict(results: list[CheckResult], drain_complete: bool) -> tuple[bool | str, list[str]]:
    reasons: list[str] = []
    skipped = [r for r in results if r.status is CheckStatus.SKIPPED]
    no_drain = [r.name.value for r in skipped if r.reason == NO_DRAIN_REASON]
    if not drain_complete:
        reasons.append("no drain-complete phase event: the run did not finish its drain, so the final state "
                       "of the topics is not known" + (f" (skipped: {', '.join(no_drain)})" if no_drain else ""))
    by_reason: dict[str, list[str]] = {}
    for r in skipped:
        if r.reason != NO_DRAIN_REASON or drain_complete:
            by_reason.setdefault(r.reason or "skipped", []).append(r.name.value)
    for reason, names in by_reason.items():
        reasons.append(f"{reason} (skipped: {', '.join(names)})")
    for r in results:
        if r.status is CheckStatus.RAN and r.unjudged:
            reasons.append(f"{r.name.value}: {r.note}")
    if any(r.found for r in results):
        return False, reasons
    return ("unknown" if reasons else True), reasons


def _unknown_results(run: RunDir, facts: dict[str, Any], error: str, started: float,
                     stall: tuple[float, str], master: str, checker: dict[str, Any] | None = None) -> dict[str, Any]:
    reason = f"the history cannot be checked: {error}"
    return {
        "schema": RESULTS_SCHEMA,
        "run_id": run.run_id,
        "valid": "unknown",
        "unknown_reasons": [reason],
        "error": error,
        "anomalies": {},
        "checks": {name.value: {"status": CheckStatus.SKIPPED.value, "reason": reason} for name in REGISTRY},
        "operations": {},
        "transactions": {},
        "history": facts,
        "config": {"stall_after_s": stall[0], "stall_after_source": stall[1]},
        "checker": {"elapsed_s": round(time.monotonic() - started, 3),
                    **(checker if checker is not None else {"spark_master": master})},
    }


CHECKER_ENV = "TXNBENCH_CHECKER"
ENGINES = ("duckdb", "spark")


def checker_engine(engine: str | None = None, master: str | None = None) -> str:
    """Which checker answers: `engine`, else `$TXNBENCH_CHECKER`, else DuckDB on this machine and
    Spark when the master is a cluster (`--master spark://...`): the same checks either way
    (analysis.duck), DuckDB without Spark's fixed costs on one machine (docs/checks.md)."""
    chosen = (engine or os.environ.get(CHECKER_ENV) or "").strip()
    if chosen:
        if chosen not in ENGINES:
            raise ConfigError(f"${CHECKER_ENV}" if not engine else "--checker", chosen,
                              f"expected one of {', '.join(ENGINES)}",
                              "duckdb checks on this machine, spark on the Spark master (--master)")
        return chosen
    return "duckdb" if resolve_master(master).startswith("local") else "spark"


def check_run(run_dir: Path, master: str | None = None, *, progress: bool | None = None,
              out_dir: Path | None = None, engine: str | None = None) -> dict[str, Any]:
    """Check one run folder, write `results.json` (and `instances/`) into `out_dir` and return it.

    Args:
        run_dir: a run folder (results/<run_id>) with history/*.jsonl.
        master: Spark master; None uses $TXNBENCH_SPARK_MASTER or local[*].
        engine: "duckdb" or "spark" (`checker_engine`); a history Arrow cannot vouch for goes to Spark.
        progress: print progress on stderr; None does so for large histories.
        out_dir: where the result goes; None is the run's own, `analysis/` (the run's analysis,
            and the first check of a run never analysed). `txnbench check` of a run that has a
            result passes a folder of its own (`recheck_dir`), so the recorded one is kept.

    Raises:
        NoHistoryError: the folder is missing or has no history lines (exit 2).
        EnvironmentProblem: Spark could not start, or failed while checking (e.g. out of memory).
    """
    started = time.monotonic()
    run = RunDir(Path(run_dir))
    if not run.path.is_dir():
        raise NoHistoryError(f"{run.path}: no such run folder; pass a folder under results/ "
                             "(e.g. results/<run_id>)")
    out = _Output(Path(out_dir) if out_dir is not None else run.analysis_dir)
    integrity, damage = history_damage(run)
    if damage:
        # Before Spark: a history that is not what the run wrote supports no verdict at all.
        failed = _unknown_results(run, _damage_facts(run, damage), _damage_error(damage), started,
                                  stall_after_s(run), master or "not started (the history is damaged)")
        write_json_atomic(out.results_json, failed)
        return failed
    size = history_bytes(run.history_dir)
    if size == 0:
        raise NoHistoryError(f"{run.path}: no history to check (history/*.jsonl is missing or empty); "
                             "pass the folder of a run that recorded operations")
    say = _Progress(size >= PROGRESS_MIN_BYTES if progress is None else progress)
    stall = stall_after_s(run)
    fallback: str | None = None
    if checker_engine(engine, master) == "duckdb":
        try:
            return _check_duck(run, stall, say, started, out, integrity)
        except NeedsSpark as why:
            fallback = str(why)
        except duckdb.Error as err:
            # A verdict from Spark rather than none: the nightly run needs one. results.json's `checker`
            # keeps DuckDB's error, so the failure is seen, not hidden.
            detail = str(err).strip().splitlines()[0] if str(err).strip() else "no detail"
            fallback = (f"DuckDB failed ({type(err).__name__}: {detail[:300]}); if it ran out of memory, set "
                        f"{MEMORY_ENV} above {memory_limit()}")
            print(f"txnbench check: {fallback}; checking with Spark", file=sys.stderr, flush=True)
        if fallback is not None:
            say(f"{fallback}: checking with Spark")
    say("starting Spark")
    memory = driver_memory(size)
    spark = get_spark(master, small_input=size <= SMALL_INPUT_BYTES, memory=memory,
                      whole_heap=fills_large_heap(size))
    say.label_jobs(spark)
    try:
        return _check(spark, run, size, stall, say, started, out, integrity, fallback)
    except (PySparkException, Py4JError) as err:
        detail = str(err).strip().splitlines()[0] if str(err).strip() else "no detail"
        raise EnvironmentProblem(
            f"{run.path}: Spark failed while checking ({type(err).__name__}: {detail[:300]}); if it ran out "
            f"of memory, set {DRIVER_MEMORY_ENV} above {memory}, or check a smaller history") from err


def _check_duck(run: RunDir, stall: tuple[float, str], say: _Progress, started: float, out_to: _Output,
                integrity: str) -> dict[str, Any]:
    """The check on DuckDB (analysis.duck.run); raises NeedsSpark before writing anything."""
    shutil.rmtree(out_to.instances_dir, ignore_errors=True)
    txn_timeout, abort_bound = abandon_limits(run)
    checked = check_history(run.path, separator=_SEP, progress=say, stall_after_s=stall[0],
                            lost_writers=lost_writer_names(run), clock_slack_ns=clock_slack_ns(run),
                            txn_timeout_s=txn_timeout, abort_bound_s=abort_bound,
                            commit_blocked_windows=commit_blocked_windows(run))
    checker = {"engine": "duckdb", "duckdb_version": duckdb.__version__}
    if checked.first_unclaimed is not None:
        failed = _unknown_results(run, {**checked.facts.to_dict(), "integrity": integrity},
                                  _orphan_error(checked.first_unclaimed), started, stall, "none", checker)
        write_json_atomic(out_to.results_json, failed)
        return failed
    return _document(run, out_to, checked.results, checked.tallied, checked.facts, checked.overview, integrity,
                     stall, (txn_timeout, abort_bound), started, checker, say)


def _orphan_error(orphan: Any) -> str:
    return (f"writer {orphan['writer']} index {orphan['index']}: a {orphan['type']} completion of "
            f"{orphan['f']} by {orphan['process']} has no invocation before it; the recorder never "
            "writes that, so the file was changed or written by something else")


def _anomaly_entry(run: RunDir, out: _Output, result: CheckResult) -> dict[str, Any]:
    """results.json's entry for a class that occurred; with every instance in a file of its own
    when there are more than the examples (the verdict attributes each one)."""
    entry: dict[str, Any] = {"count": result.count, "examples": list(result.examples)}
    if result.instances:
        path = out.instances_dir / f"{result.name.value}.jsonl"
        lines = (json.dumps(instance, sort_keys=True, default=str) + "\n" for instance in result.instances)
        write_text_atomic(path, "".join(lines))
        # Relative to the run, where the check writes into the run's folder; else where it is.
        try:
            entry["instances"] = str(path.resolve().relative_to(run.path.resolve()))
        except ValueError:
            entry["instances"] = str(path.resolve())
    return entry


def _check(spark: SparkSession, run: RunDir, size: int, stall: tuple[float, str], say: _Progress,
           started: float, out_to: _Output, integrity: str, fallback: str | None = None) -> dict[str, Any]:
    """The check on Spark; `fallback` says why DuckDB did not answer, when it was asked first."""
    spark_master = str(spark.sparkContext.master)
    # Instances of an earlier check of this folder would be read as this one's.
    shutil.rmtree(out_to.instances_dir, ignore_errors=True)
    partitions = tune_for_input(spark, size)

    small = size <= SMALL_INPUT_BYTES
    # The overview (phases, drain, counts) comes from the pass that validates the history; on a
    # small history so does the search for completions no invocation claims (one Spark job).
    unclaimed, first_orphan = first_unclaimed()
    try:
        loaded = load_run(spark, run.path, progress=say, windows=unclaimed if small else None,
                          summary=[*overview_aggregates(), *([first_orphan] if small else [])])
    except HistoryFormatError as err:
        failed = _unknown_results(run, {"directory": str(run.history_dir), "bytes": size,
                                        "integrity": integrity}, str(err), started, stall, spark_master)
        write_json_atomic(out_to.results_json, failed)
        return failed
    facts: HistoryFacts = loaded.facts
    say(f"{facts.lines} events in {len(facts.files)} file(s); pairing operations")
    assert loaded.summary is not None
    if small:
        # prepare() keeps the pairs as a local checkpoint (a leaf plan), which keeps every later plan small.
        pairs = loaded.pairs if loaded.pairs is not None else pair_operations(loaded.ops, lean=True)
        orphan = loaded.summary[FIRST_UNCLAIMED]
    else:
        # Paired by Arrow as it converted the history (analysis.columnar_pairs), else here: a shuffle.
        pairs = (loaded.pairs if loaded.pairs is not None else
                 pair_operations(loaded.ops, include_orphans=True, lean=True).persist(StorageLevel.MEMORY_AND_DISK))
        orphans = pairs.filter("orphan").select("writer", "index", "process", "f", "type")
        found = orphans.orderBy("writer", "index").limit(1).collect()
        orphan = found[0] if found else None
    try:
        if orphan is not None:
            error = _orphan_error(orphan)
            failed = _unknown_results(run, {**facts.to_dict(), "integrity": integrity}, error, started, stall,
                                      spark_master)
            write_json_atomic(out_to.results_json, failed)
            return failed
        say("deciding transactions")
        seen = overview_from_row(loaded.summary)
        txn_timeout, abort_bound = abandon_limits(run)
        ctx = prepare(loaded.ops, stall_after_s=stall[0], pairs=pairs, facts=seen, cut_lineage=small,
                      lost_writers=lost_writer_names(run), clock_slack_ns=clock_slack_ns(run),
                      txn_timeout_s=txn_timeout, abort_bound_s=abort_bound,
                      commit_blocked_windows=commit_blocked_windows(run),
                      pairs_on_disk=not small and loaded.pairs is not None)
        try:
            # Why operations ended `info` (Jepsen's info-txn-causes): the error's class, or
            # "never completed" for an invocation the writer left without completion.
            cause = F.coalesce(F.substring_index(F.col("error"), ":", 1), F.lit("(no error recorded)"))
            infos = loaded.ops.filter(F.col("type") == "info").select(F.lit("info").alias("what"), "f",
                                                                       cause.alias("type"))
            never = ctx.pairs.filter(~F.col("completed")).select(F.lit("info").alias("what"), "f",
                                                                  F.lit("(never completed)").alias("type"))
            counted = union_all([
                ctx.pairs.select(F.lit("op").alias("what"), "f", "type"),
                ctx.txns.select(F.lit("txn").alias("what"), F.lit(None).cast("string").alias("f"),
                                F.col("outcome_label").alias("type")),
                infos, never]).select(
                F.concat_ws(_SEP, "what", F.coalesce(F.col("f"), F.lit("")), "type").alias("_tally"))
            # Small histories: all counts (and these tallies) in one Spark job. Large ones: check by
            # check, with progress.
            results, tallied = run_checks_with_tallies(ctx, progress=say, together=small or size < PROGRESS_MIN_BYTES,
                                                       tallies=counted, threads=CHECK_THREADS)
        finally:
            ctx.unpersist()
    finally:
        pairs.unpersist()
        loaded.release()

    checker = {"engine": "spark", "spark_master": spark_master, "spark_version": spark.version,
               "shuffle_partitions": partitions, **({"instead_of_duckdb": fallback} if fallback else {})}
    return _document(run, out_to, results, tallied, facts, seen, integrity, stall, (txn_timeout, abort_bound),
                     started, checker, say)


def _tallies(tallied: dict[str, int]) -> tuple[dict[str, dict[str, int]], dict[str, int], dict[str, dict[str, int]]]:
    """The counting job's tallies (`what\\0f\\0type` keys) as operations by kind and type,
    transactions by outcome label, and causes of `info` by kind."""
    operations: dict[str, dict[str, int]] = {}
    transactions: dict[str, int] = {}
    info_causes: dict[str, dict[str, int]] = {}
    for key, count in tallied.items():
        what, f, kind = key.split(_SEP, 2)
        if what == "op":
            operations.setdefault(f, {})[kind] = count
        elif what == "info":
            info_causes.setdefault(f, {})[kind] = count
        else:
            transactions[kind] = count
    return operations, transactions, info_causes


def _document(run: RunDir, out_to: _Output, results: list[CheckResult], tallied: dict[str, int],
              facts: HistoryFacts, seen: HistoryOverview, integrity: str, stall: tuple[float, str],
              limits: tuple[float, float], started: float, checker: dict[str, Any],
              say: Callable[[str], None]) -> dict[str, Any]:
    """results.json from the checks' results and tallies, whichever checker computed them; written
    to `out_to` and returned."""
    operations, transactions, info_causes = _tallies(tallied)
    drain, marks = seen.drain, seen.phases
    txn_timeout, abort_bound = limits
    valid, reasons = _verdict(results, drain.complete)
    lost_notes, lost_doubts = lost_workers(run)
    ctx_slack = clock_slack_ns(run)
    if lost_doubts:
        reasons.extend(lost_doubts)
        valid = False if valid is False else "unknown"
    elapsed = time.monotonic() - started
    history = facts.to_dict()
    history.update({
        "integrity": integrity,
        "duration_s": (round((facts.last_ns - facts.first_ns) / 1e9, 3)
                       if facts.first_ns is not None and facts.last_ns is not None else None),
        "drain_complete": drain.complete,
        "drain_topics": sorted(drain.topics),
        "drain_subscriptions": [{"topic": t, "subscription": s} for t, s in sorted(drain.subscriptions)],
        "drain_lost_entries": [dict(run) for run in drain.lost_entries],
        "phases": [{"name": m.name, "time_s": round(m.time_ns / 1e9, 3)} for m in marks],
    })
    out: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "run_id": run.run_id,
        "valid": valid,
        "unknown_reasons": reasons if valid == "unknown" else [],
        "anomalies": {r.name.value: _anomaly_entry(run, out_to, r) for r in results if r.found},
        "checks": {r.name.value: _check_entry(r) for r in results},
        "operations": {f: dict(sorted(types.items())) for f, types in sorted(operations.items())},
        "transactions": {label: transactions.get(label, 0) for label in
                         ("committed", "aborted", "unknown-committed", "unknown-aborted", "unknown")},
        "info_causes": {f: dict(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))[:10])
                        for f, causes in sorted(info_causes.items())},
        "history": history,
        "config": {"stall_after_s": stall[0], "stall_after_source": stall[1],
                   "txn_timeout_s": txn_timeout, "abort_bound_s": abort_bound,
                   **({"clock_slack_ms": round(ctx_slack / 1e6, 3)} if ctx_slack else {})},
        "checker": {
            "elapsed_s": round(elapsed, 3),
            "events_per_s": round(facts.lines / elapsed, 1) if elapsed > 0 else None,
            **checker,
        },
    }
    if valid is False and reasons:
        out["doubts"] = reasons
    if lost_notes:
        out["lost_workers"] = lost_notes
    write_json_atomic(out_to.results_json, out)
    say(f"done: valid={valid}")
    return out


def _summary_line(out: dict[str, Any], path: Path) -> str:
    valid = out["valid"]
    if valid is True:
        head = "valid: no anomalies"
    elif valid is False:
        found = ", ".join(f"{name} {entry['count']}" for name, entry in out["anomalies"].items())
        head = f"INVALID: {found}"
    else:
        head = "unknown: " + "; ".join(out["unknown_reasons"])
    if out.get("lost_workers") and valid != "unknown":   # unknown_reasons already hold the doubts
        head += "; " + "; ".join(out["lost_workers"])
    return f"{head} ({path})"


def exit_status(valid: bool | str) -> int:
    """0 for true, 1 for false, 2 for "unknown"."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


def _recorded_verdict(path: Path) -> str:
    try:
        valid = read_json(path).get("valid")
    except (OSError, ValueError, AttributeError):
        return "unreadable"
    return "valid" if valid is True else "invalid" if valid is False else str(valid)


def main_check(args: argparse.Namespace) -> int:
    """The CLI entry: check `args.run_dir` on `args.master`; exit 0 valid, 1 invalid, 2 unknown.

    A run's recorded result (`analysis/results.json`, which its manifest's verdict and its report
    were made from) is never replaced: when it exists, this check's result goes beside it, into
    `analysis/check-<UTC stamp>/`, and standard output says so."""
    run = RunDir(Path(args.run_dir))
    recorded = run.results_json if run.results_json.is_file() else None
    folder = recheck_dir(run) if recorded is not None else None
    out = check_run(args.run_dir, getattr(args, "master", None), out_dir=folder,
                    engine=getattr(args, "checker", None))
    print(_summary_line(out, (folder / "results.json") if folder is not None else run.results_json))
    if recorded is not None:
        print(f"the run's recorded result, {recorded} ({_recorded_verdict(recorded)}), is kept as it was: "
              "the run's manifest and report were made from it")
    if out.get("error"):
        print(f"txnbench: {out['error']}", file=sys.stderr)
    return exit_status(out["valid"])


__all__ = ["CHECKER_ENV", "ENGINES", "AnomalyClass", "check_run", "checker_engine", "exit_status", "history_damage",
           "main_check", "recheck_dir", "stall_after_s"]
