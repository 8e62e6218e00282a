"""The capacity file: how much load the harness itself generated here, by host and load shape.

`orchestrator.capacity` measures it (the load process against a null broker) and saves it
(`$TXNBENCH_CAPACITY_FILE`, default `.txnbench/capacity.json`); a load process of the same
shape on the same host looks it up and copies it into its status file (`capacity`), so the
report can say how close the run came to what the harness could have driven.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.config import RunConfig
from harness.results import write_json_atomic
from harness.txn_paths import TxnPath

CAPACITY_ENV = "TXNBENCH_CAPACITY_FILE"
DEFAULT_FILE = Path(".txnbench") / "capacity.json"
AGAINST = "null broker (embedded.nullbroker)"


def capacity_file() -> Path:
    return Path(os.environ.get(CAPACITY_ENV) or DEFAULT_FILE)


def shape_of(config: RunConfig) -> dict[str, Any]:
    """What the capacity of a run depends on (the lookup key)."""
    w = config.workload
    return {"host": platform.node(), "python": platform.python_version(),
            "client_path": "v5" if config.path is TxnPath.V5 else "v4",
            "users": config.load.users, "workers": config.load.workers,
            "messages_per_txn": w.messages_per_txn, "topics_per_txn": w.topics_per_txn,
            "message_size": w.message_size, "batching": w.batching}


def _read_entries(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = data.get("entries") if isinstance(data, dict) else None
    return [e for e in entries or [] if isinstance(e, dict)]


def find_capacity(config: RunConfig, path: Path | None = None) -> dict[str, Any] | None:
    """The newest measurement of this run's shape on this host, as the status file's `capacity`."""
    wanted = shape_of(config)
    matches = [e for e in _read_entries(path or capacity_file()) if e.get("shape") == wanted]
    if not matches:
        return None
    best = max(matches, key=lambda e: str(e.get("measured_at", "")))
    result = best.get("result") or {}
    return {"committed_txn_per_s": result.get("committed_txn_per_s"), "msgs_per_s": result.get("msgs_per_s"),
            "cpu_percent": result.get("cpu_percent"), "against": AGAINST, "users": wanted["users"],
            "workers": wanted["workers"], "duration_s": result.get("duration_s"),
            "measured_at": best.get("measured_at"), "workload": "atomic-produce"}


def with_remote_workers(capacity: Mapping[str, Any] | None, config: RunConfig) -> dict[str, Any] | None:
    """A run with remote workers: this host's one-process figure times the load processes.

    Remote hosts are not measured from here; each Locust worker on a load machine of its own
    generates about what one process does here (README, "Load from many machines"), so the
    report's utilization holds the run against that sum and says so.
    """
    if capacity is None or not config.load.remote_workers:
        return dict(capacity) if capacity is not None else None
    processes = config.load.processes
    scaled = dict(capacity)
    for key in ("committed_txn_per_s", "msgs_per_s"):
        if isinstance(capacity.get(key), int | float):
            scaled[key] = round(float(capacity[key]) * processes, 1)
    scaled["against"] = (f"{capacity.get('against', AGAINST)}, one process here x {processes} load processes "
                         f"({config.load.remote_workers} remote, not measured from this host)")
    scaled["processes"] = processes
    return scaled


def save_capacity(config: RunConfig, result: Mapping[str, Any], path: Path | None = None) -> Path:
    target = path or capacity_file()
    entries = [e for e in _read_entries(target) if e.get("shape") != shape_of(config)]
    entries.append({"shape": shape_of(config), "result": dict(result),
                    "measured_at": datetime.now(UTC).isoformat()})
    write_json_atomic(target, {"entries": entries})
    return target
