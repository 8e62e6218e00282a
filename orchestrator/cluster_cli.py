"""`txnbench cluster up | status | down | heal`: a cluster started by hand, embedded or pulsar.

Both targets record their processes in `<dir>/state.json` (default `.txnbench/cluster`);
its `target` key says which one started them, so `status`, `down` and `heal` need no
`--target`: they attach to whatever runs there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import requests

from harness.config import parse_setting_pairs
from harness.errors import EnvironmentProblem
from harness.target import ClusterInfo
from harness.txn_paths import TxnPath
from targets.embedded import EmbeddedCluster, EmbeddedSpec, default_dir
from targets.processes import ProcessState
from targets.pulsar.cluster import PulsarCluster, PulsarSpec
from targets.state import recorded_target


def _directory(args: argparse.Namespace) -> Path:
    return args.dir or default_dir()


def print_info(info: ClusterInfo, directory: Path) -> None:
    print(f"target       {info.target}" + (f" (Apache Pulsar {info.settings['pulsarVersion']})"
                                            if info.settings.get("pulsarVersion") else ""))
    print(f"path         {info.txn_path.value}")
    print(f"service_url  {info.service_url}")
    print(f"admin_url    {info.admin_url}")
    print(f"toxiproxy    {info.toxiproxy_url}")
    print(f"state        {directory / 'state.json'}")
    print(f"{'service':<11}{'pid':>8}  {'state':<9} url")
    for svc in info.services:
        url = svc.service_url or svc.admin_url or svc.metrics_url or ""
        print(f"{svc.name:<11}{svc.pid or '-':>8}  {svc.state:<9} {url}")


Cluster = EmbeddedCluster | PulsarCluster


def attach(directory: Path) -> Cluster:
    """The cluster recorded in `directory`, of whichever target started it."""
    return PulsarCluster.attach(directory) if recorded_target(directory) == "pulsar" else EmbeddedCluster.attach(directory)


def cluster_up(args: argparse.Namespace) -> int:
    from orchestrator.planted import banner, refuse_planted_bugs

    directory = _directory(args)
    settings = parse_setting_pairs(args.set)
    if getattr(args, "target", "embedded") == "pulsar":
        return _pulsar_up(args, directory, settings)
    planted = refuse_planted_bugs(settings, "cluster up", allowed=bool(getattr(args, "allow_planted_bugs", False)))
    if planted:
        print(banner(planted), file=sys.stderr, flush=True)
    spec = EmbeddedSpec(txn_path=TxnPath(args.txn_path), brokers=args.brokers, settings=settings, directory=directory,
                        planted_bugs=tuple(planted))
    print(f"starting the embedded cluster ({spec.txn_path.value}, {spec.brokers} brokers) in {directory} ...",
          file=sys.stderr, flush=True)
    started = time.monotonic()
    cluster = EmbeddedCluster(spec)
    info = cluster.up()
    print(f"ready in {time.monotonic() - started:.1f}s; stop it with `txnbench cluster down`",
          file=sys.stderr)
    print_info(info, directory)
    return 0


def _pulsar_up(args: argparse.Namespace, directory: Path, settings: dict[str, object]) -> int:
    from targets.pulsar.versions import release

    try:
        chosen = release(args.pulsar_version)
    except ValueError as err:
        raise EnvironmentProblem(f"--pulsar-version: {err}") from None
    spec = PulsarSpec(txn_path=TxnPath(args.txn_path), version=chosen.version, brokers=args.brokers,
                      settings=settings, directory=directory,
                      say=lambda text: print(text, file=sys.stderr, flush=True))
    started = time.monotonic()
    info = PulsarCluster(spec).up()
    print(f"ready in {time.monotonic() - started:.1f}s; stop it with `txnbench cluster down`", file=sys.stderr)
    print_info(info, directory)
    return 0


def cluster_status(args: argparse.Namespace) -> int:
    directory = _directory(args)
    cluster = attach(directory)
    info = cluster.info()
    if args.json:
        print(json.dumps({
            "path": info.txn_path.value, "service_url": info.service_url, "admin_url": info.admin_url,
            "toxiproxy_url": info.toxiproxy_url, "directory": str(directory),
            "processes": [{"name": s.name, "role": s.role.value, "pid": s.pid, "state": s.state,
                           "service_url": s.service_url, "admin_url": s.admin_url,
                           "metrics_url": s.metrics_url, "log": str(s.log_path)} for s in info.services],
        }, indent=2))
    else:
        print_info(info, directory)
    return 0 if cluster.any_running() else 1


def cluster_down(args: argparse.Namespace) -> int:
    directory = _directory(args)
    cluster = attach(directory)
    running = [n for n, p in cluster.processes.items() if p.state != ProcessState.STOPPED]
    cluster.down()
    print(f"stopped {len(running)} process(es): {', '.join(running) or 'none were running'}")
    return 0


def cluster_heal(args: argparse.Namespace) -> int:
    """Remove every fault: proxies reset, paused processes resumed, killed ones restarted."""
    directory = _directory(args)
    cluster = attach(directory)
    actions: list[str] = []
    proxy = cluster.processes.get("proxy")
    if proxy is not None and proxy.state == ProcessState.PAUSED:
        cluster.resume("proxy")
        actions.append("resumed proxy")
    if proxy is not None and proxy.state == ProcessState.STOPPED:
        cluster.start("proxy")
        actions.append("restarted proxy")
    if cluster.toxiproxy_url:
        try:
            requests.post(f"{cluster.toxiproxy_url}/reset", timeout=5).raise_for_status()
            actions.append("reset every link")
        except requests.RequestException as err:
            raise EnvironmentProblem(f"could not reset the fault proxy at {cluster.toxiproxy_url}: {err}") from None
    for name, proc in cluster.processes.items():
        if name == "proxy":
            continue
        if proc.state == ProcessState.PAUSED:
            cluster.resume(name)
            actions.append(f"resumed {name}")
        elif proc.state == ProcessState.STOPPED:
            cluster.start(name)
            actions.append(f"restarted {name}")
    cluster.save_state()
    print("healed: " + (", ".join(actions) if actions else "nothing was broken"))
    return 0
