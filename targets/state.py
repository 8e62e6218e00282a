"""A local cluster's `state.json`: what it keeps of every service, and reading it back elsewhere.

Why a file: `txnbench cluster up` starts a cluster that outlives it; `status`, `down`, `heal`
and a run attaching to it are other processes, which find every service's pid, kernel start
time, ports and URLs here (signals go only to a pid whose start time still matches:
targets/processes.py). Both local targets write one shape, `schema` 1: the keys every service
has are `ServiceRecord`'s, a target's record adds what only it needs (the embedded target's
config file, the pulsar target's argv), its state its own top-level keys, and `target` names
which one wrote it (a file without it is the embedded target's, as before that key).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from harness.errors import EnvironmentProblem
from harness.results import write_json_atomic
from harness.target import LinkInfo, LinkKind, ServiceRole

STATE_FILE = "state.json"
#: Bumped when a reader of the previous schema could misread the file; a reader refuses a newer one.
SCHEMA = 1


@dataclass
class ServiceRecord:
    """What state.json keeps of one service, whichever target started it."""

    name: str
    role: ServiceRole
    ports: dict[str, int]
    log_path: Path
    pid: int | None = None
    start_time: int | None = None
    service_url: str | None = None
    admin_url: str | None = None
    health_url: str | None = None
    metrics_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role.value, "ports": self.ports, "log_path": str(self.log_path),
                "pid": self.pid, "start_time": self.start_time, "service_url": self.service_url,
                "admin_url": self.admin_url, "health_url": self.health_url, "metrics_url": self.metrics_url}

    @staticmethod
    def common_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of the fields above, from their JSON (a subclass adds its own)."""
        return {"name": data["name"], "role": ServiceRole(data["role"]), "ports": dict(data["ports"]),
                "log_path": Path(data["log_path"]), **{key: data.get(key) for key in (
                    "pid", "start_time", "service_url", "admin_url", "health_url", "metrics_url")}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(**cls.common_fields(data))


def link_to_json(link: LinkInfo) -> dict[str, str]:
    return {"name": link.name, "kind": link.kind.value, "source": link.source, "dest": link.dest,
            "listen": link.listen, "upstream": link.upstream}


def link_from_json(data: Mapping[str, str]) -> LinkInfo:
    return LinkInfo(name=data["name"], kind=LinkKind(data["kind"]), source=data["source"], dest=data["dest"],
                    listen=data["listen"], upstream=data["upstream"])


def write_state(directory: Path, state: Mapping[str, Any]) -> None:
    write_json_atomic(directory / STATE_FILE, {"schema": SCHEMA, **state})


def read_state(directory: Path, missing: str) -> dict[str, Any]:
    """The state `directory` records; EnvironmentProblem(`missing`) without one, or of a newer schema."""
    path = directory / STATE_FILE
    if not path.is_file():
        raise EnvironmentProblem(missing)
    state: dict[str, Any] = json.loads(path.read_text())
    if state.get("schema", SCHEMA) > SCHEMA:
        raise EnvironmentProblem(f"{path} has schema {state['schema']}, newer than this txnbench reads ({SCHEMA}); "
                                 "stop that cluster with the txnbench that started it")
    return state


def recorded_target(directory: Path) -> str:
    """Which target wrote `directory`'s state: its `target` key, `embedded` without one or without a file."""
    try:
        return str(json.loads((directory / STATE_FILE).read_text()).get("target") or "embedded")
    except (OSError, ValueError):
        return "embedded"
