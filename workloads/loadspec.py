"""The load spec: what the orchestrator tells the load process (`RUN_DIR/load-spec.json`).

`LoadSpec` writes it (`write`: orchestrator/run.py's `Run._start_load`, the capacity
measurement) and reads it (`load`: `python -m workloads.runner --spec FILE`). Keys: `run_id`, `run_dir`, `path`, `service_url`, `admin_url`, `config`
(the resolved RunConfig as plain data), `topology` (workloads.topology), `max_duration_s`
(the load stops by itself after this), `parent_pid` (the load exits when it is gone),
`status_file` (where the status is rewritten every second). The config was validated once by
the orchestrator; the load process rebuilds it without checking it again (`RunConfig.from_plain`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config import RunConfig
from harness.errors import ConfigError, TxnbenchError
from harness.results import RunDir, write_json_atomic
from harness.txn_paths import TxnPath
from workloads.topology import Topology


class LoadSpecError(TxnbenchError):
    """The load spec is missing, unreadable or incomplete."""


@dataclass(frozen=True)
class LoadSpec:
    run_id: str
    run_dir: RunDir
    txn_path: TxnPath
    service_url: str
    admin_url: str
    config: RunConfig
    topology: Topology
    max_duration_s: float
    parent_pid: int | None
    status_file: Path
    listener_name: str | None = None

    @classmethod
    def load(cls, file: Path) -> LoadSpec:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except OSError as err:
            raise LoadSpecError(f"cannot read the load spec {file}: {err}") from None
        except ValueError as err:
            raise LoadSpecError(f"the load spec {file} is not JSON: {err}") from None
        return cls.from_dict(data, str(file))

    @classmethod
    def from_dict(cls, data: Any, source: str = "load spec") -> LoadSpec:
        if not isinstance(data, dict):
            raise LoadSpecError(f"{source}: expected a JSON object")
        required = ("run_id", "run_dir", "path", "service_url", "config", "topology", "status_file")
        missing = [key for key in required if key not in data]
        if missing:
            raise LoadSpecError(f"{source}: missing {', '.join(missing)}; it is written by orchestrator/run.py")
        try:
            config = RunConfig.from_plain(data["config"], f"{source}: config")
            topology = Topology.from_dict(data["topology"])
            txn_path = TxnPath(data["path"])
        except (ConfigError, ValueError) as err:
            raise LoadSpecError(f"{source}: {err}") from None
        parent = data.get("parent_pid")
        return cls(run_id=str(data["run_id"]), run_dir=RunDir(Path(data["run_dir"])), txn_path=txn_path,
                   service_url=str(data["service_url"]), admin_url=str(data.get("admin_url") or ""),
                   config=config, topology=topology,
                   max_duration_s=float(data.get("max_duration_s") or 3600.0),
                   parent_pid=int(parent) if parent else None, status_file=Path(data["status_file"]),
                   listener_name=str(data["listener_name"]) if data.get("listener_name") else None)

    def write(self, file: Path) -> None:
        """Write the spec where the load process reads it (`load`); atomic, so it never sees half."""
        write_json_atomic(file, self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "run_dir": str(self.run_dir.path), "path": self.txn_path.value,
                "service_url": self.service_url, "admin_url": self.admin_url, "config": self.config.to_dict(),
                "listener_name": self.listener_name,
                "topology": self.topology.to_dict(), "max_duration_s": self.max_duration_s,
                "parent_pid": self.parent_pid, "status_file": str(self.status_file)}
