"""Running `pulsar-perf transaction` (Pulsar's own load tool) against a running cluster.

Theory of operation. pulsar-perf is `org.apache.pulsar.testclient.PulsarPerfTestTool` from
`pulsar-testclient`, already on the release's cached classpath (`jars.ensure_jars`); its
first argument is a client config file. `run_perf` writes that file and a log4j2 config
(INFO to stdout, each line stamped with Unix milliseconds so the analysis can place the
10-second interval lines in time), starts the JVM in `out_dir` (pulsar-perf writes its
HdrHistogram log, `perf-transaction-<ms>.hgrm`, into its working folder), and samples the
process's CPU seconds once a second with psutil, because the CPU a load generator spends per
transaction is half of the comparison. The brokers' metrics are scraped just before and
just after, into `out_dir/metrics/{before,after}-<service>.prom`, the same text a txnbench
run snapshots. The JVM is bounded by the plan's duration plus a grace period and is
always killed on the way out; nothing else is touched.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from harness import host_cpu
from harness.cpus import preexec_pinning
from harness.errors import EnvironmentProblem
from targets.pulsar import conf
from targets.pulsar.jars import Classpath
from targets.pulsar.perf_args import PerfPlan

MAIN_CLASS = "org.apache.pulsar.testclient.PulsarPerfTestTool"
#: pulsar-perf's log, in each run's folder
LOG_NAME = "pulsar-perf.log"
#: Seconds past the plan's duration before the JVM is killed (start-up, client build, shutdown).
GRACE_S = 90.0
CPU_SAMPLE_S = 1.0
#: pulsar-perf's heap: the tool default of our servers (256 MB) dies in PulsarPerfTestTool's start-up
#: (OutOfMemoryError while it builds its commands); later -X flags override earlier ones.
PERF_HEAP = ("-Xms512m", "-Xmx1024m", "-XX:MaxDirectMemorySize=512m")

PERF_LOG4J2 = conf.console_log4j2("%d{UNIX_MILLIS} %-5level %c{1} - %msg%n%throwable")


@dataclass
class PerfRun:
    """What one pulsar-perf run left: its files, exit code, CPU samples and wall times."""

    argv: list[str]
    out_dir: Path
    log_path: Path
    exit_code: int | None = None
    started_wall_s: float = 0.0
    ended_wall_s: float = 0.0
    #: [[unix seconds, cumulative CPU seconds (user + system, incl. children)], ...]
    cpu_samples: list[list[float]] = field(default_factory=list)
    #: [[unix seconds, the machine's cumulative busy CPU seconds (harness.host_cpu)], ...]
    host_busy_samples: list[list[float]] = field(default_factory=list)
    #: the CPUs the JVM was pinned to (`--load-cpus`), and [[unix seconds, their busy CPU seconds], ...]
    own_cpus: list[int] | None = None
    own_cpus_busy_samples: list[list[float]] = field(default_factory=list)
    killed: bool = False

    @property
    def hgrm_path(self) -> Path | None:
        found = sorted(self.out_dir.glob("perf-transaction-*.hgrm"))
        return found[-1] if found else None

    def to_json(self) -> dict[str, Any]:
        return {"argv": self.argv, "log": self.log_path.name, "exit_code": self.exit_code,
                "hgrm": self.hgrm_path.name if self.hgrm_path else None, "started_wall_s": self.started_wall_s,
                "ended_wall_s": self.ended_wall_s, "cpu_samples": self.cpu_samples,
                "host_busy_samples": self.host_busy_samples, "host_cpus": os.cpu_count() or 1, "killed": self.killed,
                **({"own_cpus": self.own_cpus, "own_cpus_busy_samples": self.own_cpus_busy_samples}
                   if self.own_cpus is not None else {})}


def client_conf(service_url: str, admin_url: str) -> str:
    return conf.properties({"brokerServiceUrl": service_url, "webServiceUrl": admin_url})


def java_argv(java: str, java_major: int, classpath: Classpath, out_dir: Path) -> list[str]:
    """`java ... PulsarPerfTestTool <client.conf>`: the tool heap, the release's jars, our log4j2."""
    return [java, *conf.jvm_args("tool", java_major, out_dir / "log4j2.xml", out_dir), *PERF_HEAP,
            "-cp", classpath.java_classpath, MAIN_CLASS, str(out_dir / "client.conf")]


def _cpu_s(proc: psutil.Process) -> float | None:
    try:
        t = proc.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return t.user + t.system + t.children_user + t.children_system


def _write_metrics(out_dir: Path, label: str, texts: Mapping[str, str]) -> None:
    folder = out_dir / "metrics"
    folder.mkdir(parents=True, exist_ok=True)
    for service, text in texts.items():
        (folder / f"{label}-{service}.prom").write_text(text)


def run_perf(plan: PerfPlan, *, java: str, java_major: int, classpath: Classpath, service_url: str,
             admin_url: str, listener_name: str | None, out_dir: Path,
             scrape: Callable[[], Mapping[str, str]], say: Callable[[str], None],
             cpus: frozenset[int] | None = None) -> PerfRun:
    """Run pulsar-perf once, to the end of its `-time`; the JVM never outlives this call."""
    out_dir = out_dir.resolve()          # the JVM runs in it: every path it is given must be absolute
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "log4j2.xml").write_text(PERF_LOG4J2)
    (out_dir / "client.conf").write_text(client_conf(service_url, admin_url))
    argv = java_argv(java, java_major, classpath, out_dir) + plan.argv(service_url, admin_url, listener_name)
    run = PerfRun(argv=argv, out_dir=out_dir, log_path=out_dir / LOG_NAME,
                  own_cpus=sorted(cpus) if cpus is not None else None)
    _write_metrics(out_dir, "before", scrape())
    deadline = time.monotonic() + plan.duration_s + GRACE_S
    say(f"[peer] pulsar-perf {' '.join(plan.argv(service_url, admin_url, listener_name))}")
    with run.log_path.open("ab") as log:
        popen = subprocess.Popen(argv, cwd=out_dir, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec_pinning(cpus))
    run.started_wall_s = time.time()
    try:
        proc = psutil.Process(popen.pid)
        next_say = time.monotonic() + 15
        while popen.poll() is None:
            cpu = _cpu_s(proc)
            if cpu is not None:
                run.cpu_samples.append([round(time.time(), 3), round(cpu, 3)])
            run.host_busy_samples.append([round(time.time(), 3), round(host_cpu.busy_seconds(), 3)])
            if run.own_cpus is not None:
                run.own_cpus_busy_samples.append([round(time.time(), 3), round(host_cpu.busy_seconds(run.own_cpus), 3)])
            if time.monotonic() > deadline:
                run.killed = True
                popen.kill()
                break
            if time.monotonic() >= next_say:
                next_say = time.monotonic() + 15
                say(f"[peer] pulsar-perf running, {time.time() - run.started_wall_s:.0f}/{plan.duration_s} s")
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=CPU_SAMPLE_S)
    finally:
        if popen.poll() is None:
            popen.kill()
        popen.wait(timeout=30)
        run.ended_wall_s = time.time()
        run.exit_code = popen.returncode
    _write_metrics(out_dir, "after", scrape())
    if run.killed:
        raise EnvironmentProblem(f"pulsar-perf ran past {plan.duration_s + GRACE_S:.0f} s and was killed; "
                                 f"see {run.log_path}")
    if run.exit_code != 0:   # it exits 0 at the end of -time; anything else is a failed test
        tail = "\n".join(run.log_path.read_text(errors="replace").splitlines()[-12:])
        raise EnvironmentProblem(f"pulsar-perf exited {run.exit_code}; see {run.log_path}:\n{tail}")
    return run
