"""pulsar-perf's `-txnRate` is not held: docs/findings/pulsar-perf-txnrate-ignored.md, reproduced.

Why the tool and not the broker: pulsar-perf (`pulsar-testclient`, in the release's jars)
builds one Guava `RateLimiter` when `-txnRate N` is given, and each worker thread calls
`tryAcquire()` and drops its answer, so nothing waits. `txnbench finding
pulsar-perf-txnrate-ignored` (`targets/pulsar/tool_finding.py`) starts a fresh cluster; here
pulsar-perf runs twice on it through `perf.run_perf`, one thread and one message per
transaction on a topic of its own each time: a control without `-txnRate` (what it does when
nothing limits it), then each try with `-txnRate ASKED_RATE`, well below the control.

The rate is the broker's count, not pulsar-perf's: the brokers' `pulsar_txn_committed_total`
after the run minus before it, over pulsar-perf's `-time` (its transactions all happen inside
it, from after its client is built, so the rate is never overstated). A try shows the bug when
that rate is above `HELD_FACTOR` times the asked one (the first second's stored permit and
timing slack stay below it); a try that held the limit counts as "not shown" only when the
control ran at least `CONTROL_FACTOR` times the asked rate, else nothing tells a held limit from
a slow cluster and the try is unjudged (could not run). Each yields the JSON lines a Java
reproduction prints (`finding.describe` reads both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.metrics import parse_prometheus_text
from harness.txn_paths import TxnPath
from targets.pulsar.perf import PerfRun, run_perf
from targets.pulsar.perf_args import PERF_NAMESPACE, PerfPlan
from targets.pulsar.versions import PulsarRelease

#: -txnRate of each try, in transactions per second: far below the 90-130 one thread did here unlimited.
ASKED_RATE = 2
#: the limit is held when the achieved rate is at most this many times the asked one
HELD_FACTOR = 2.0
#: the control must reach this many times the asked rate for a held limit to mean anything
CONTROL_FACTOR = 5.0
#: pulsar-perf's -time is this plus perf_args.PERF_TAIL_S (45 s, as the finding's runs)
STEADY_S = 30
COMMITTED = "pulsar_txn_committed_total"

RunPerf = Callable[..., PerfRun]


def plan(release: PulsarRelease, tag: str, txn_rate: int | None) -> PerfPlan:
    """One thread, one message per transaction on the v4 path, on topic `txnrate-<tag>`."""
    topic = f"persistent://{PERF_NAMESPACE}/txnrate-{tag}"
    return PerfPlan(release=release.version, txn_path=TxnPath.V4,
                    client_api="V4" if release.scalable_transactions else None, producer_topics=(topic,),
                    threads=1, messages_per_topic=1, partitions=None, scalable_segments=None, warmup_s=0,
                    steady_s=STEADY_S, abort=False, txn_timeout_s=30, subscription=f"txnrate-{tag}",
                    txn_rate=txn_rate)


def committed(texts: Mapping[str, str]) -> float | None:
    """The brokers' committed transactions (every coordinator's counter summed); None when no broker
    exposes the counter (nothing to measure by)."""
    values = [value for name, text in texts.items() if name.startswith("broker")
              for (metric, _), value in parse_prometheus_text(text).items() if metric == COMMITTED]
    return sum(values) if values else None


def committed_rate(before: Mapping[str, str], after: Mapping[str, str], seconds: float) -> float | None:
    """Committed transactions per second between two scrapes, over `seconds`; None when unmeasured."""
    first, last = committed(before), committed(after)
    if first is None or last is None or seconds <= 0:
        return None
    return (last - first) / seconds


def judge_try(n: int, asked: float, achieved: float, control: float | None) -> dict[str, Any]:
    """The try's line: `shows` True when the achieved rate is above HELD_FACTOR x asked, False when it
    held and the control ran well above it, None (unjudged) when the control was too slow to tell."""
    shows: bool | None = achieved > asked * HELD_FACTOR
    if not shows and (control is None or control < asked * CONTROL_FACTOR):
        shows = None
    control_text = f"{control:.1f} txn/s" if control is not None else "not measured"
    verdict = {True: "not held", False: "held", None: "cannot tell (the control was not well above it)"}[shows]
    return {"kind": "try", "n": n, "shows": shows,
            "summary": f"-txnRate {asked:g}: {achieved:.1f} committed txn/s, the limit {verdict}; "
                       f"without -txnRate {control_text}",
            "examples": [], "asked_txn_per_s": asked, "achieved_txn_per_s": round(achieved, 2),
            "control_txn_per_s": round(control, 2) if control is not None else None}


def _measured(run: RunPerf, perf_plan: PerfPlan, out_dir: Path) -> float | None:
    done = run(perf_plan, out_dir=out_dir)
    return committed_rate(_read(done.out_dir, "before"), _read(done.out_dir, "after"), perf_plan.duration_s)


def _read(out_dir: Path, label: str) -> dict[str, str]:
    return {p.name[len(label) + 1:-len(".prom")]: p.read_text()
            for p in sorted((out_dir / "metrics").glob(f"{label}-*.prom"))}


def reproduce(run: RunPerf, release: PulsarRelease, folder: Path, *, tries: int, tag: str) -> Iterator[dict[str, Any]]:
    """The control, then `tries` limited runs, as JSON lines; `run` is `perf.run_perf` with the
    cluster and the JVM bound (a test passes a fake). A run that fails raises (EnvironmentProblem)."""
    control = _measured(run, plan(release, f"{tag}-control", None), folder / "perf-control")
    yield {"kind": "info", "name": "without -txnRate (control)",
           "value": f"{control:.1f} committed txn/s" if control is not None else f"no {COMMITTED} on the brokers"}
    if control is None:
        yield {"kind": "error", "what": f"the brokers expose no {COMMITTED}: nothing to measure the rate by"}
        return
    shown = 0
    for n in range(1, tries + 1):
        limited = plan(release, f"{tag}-{n}", ASKED_RATE)
        achieved = _measured(run, limited, folder / f"perf-try-{n}")
        if achieved is None:
            yield {"kind": "error", "what": f"try {n}: the brokers' {COMMITTED} was not scraped"}
            continue
        line = judge_try(n, ASKED_RATE, achieved, control)
        shown += bool(line["shows"])
        yield line
    yield {"kind": "done", "tries": tries, "shown": shown}


def bound_run(cluster: Any, classpath: Any, java: str, java_major: int,
              say: Callable[[str], None]) -> RunPerf:
    """`run_perf` with `cluster`'s URLs, its metrics scrape and the JVM bound (its lines, which name
    the peer, indented as the finding's)."""
    info = cluster.info()

    def said(text: str) -> None:
        say("  " + text.removeprefix("[peer] "))

    def run(perf_plan: PerfPlan, *, out_dir: Path) -> PerfRun:
        return run_perf(perf_plan, java=java, java_major=java_major, classpath=classpath,
                        service_url=info.service_url, admin_url=info.admin_url, listener_name=info.listener_name,
                        out_dir=out_dir, scrape=cluster.scrape_metrics, say=said)

    return run

