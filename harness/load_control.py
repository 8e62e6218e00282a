"""Asking the load process to kill or replace one of its workers (the `client-kill` fault).

Theory of operation. The nemesis runs in the orchestrator; the Locust workers are
children of the load process (its master), which alone started them and alone may stop
them and account for them (a worker that dies unasked fails the load). So a client kill
is a request to the master, over the run folder, the one thing both processes share on
every target: the requester writes `RUN_DIR/load-control/<id>.request.json` atomically,
the master (polling the folder a few times a second) carries it out and writes
`<id>.answer.json` atomically. Each request is answered once; requests are never
rewritten. Files, not a socket: nothing to bind, nothing to leak, and a run folder left
by a crash shows what was asked and what was done.

Requests: `{"op": "kill", "worker": "w1"|"random"}` kills the worker with SIGKILL (no
clean-up: its open transactions are abandoned, its history may end in a torn line) and
answers `{"ok": true, "writer": "w1", "pid": 1234}`; `{"op": "start", "replaces": "w1"}`
starts a fresh worker under a new writer name (`w1-2`: a history file is never reopened)
and answers once it has connected, `{"ok": true, "writer": "w1-2", "pid": ...}`. A request
that cannot be done is `{"ok": false, "error": "..."}`.

This module is the protocol for both sides; it imports nothing of the project.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTROL_DIR = "load-control"
POLL_S = 0.1
DEFAULT_TIMEOUT_S = 30.0


class LoadControlError(RuntimeError):
    """The master refused a request, or did not answer in time."""


def control_dir(run_dir: Path) -> Path:
    return run_dir / CONTROL_DIR


def _write_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def replacement_writer(writer: str, generation: int) -> str:
    """The writer name of the `generation`-th replacement of `writer` (w1 -> w1-2, w1-2 -> w1-3)."""
    base = writer.split("-", 1)[0]
    return f"{base}-{generation}"


@dataclass(frozen=True)
class LoadControlClient:
    """The requesting side (the nemesis's `client-kill` action)."""

    directory: Path
    timeout_s: float = DEFAULT_TIMEOUT_S

    def request(self, request_id: str, body: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request and wait (bounded) for its answer; LoadControlError when refused or late."""
        self.directory.mkdir(parents=True, exist_ok=True)
        answer_path = self.directory / f"{request_id}.answer.json"
        _write_atomic(self.directory / f"{request_id}.request.json", body)
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.timeout_s)
        while time.monotonic() < deadline:
            if answer_path.is_file():
                answer = json.loads(answer_path.read_text())
                if not answer.get("ok"):
                    raise LoadControlError(str(answer.get("error") or "the load process refused"))
                return dict(answer)
            time.sleep(POLL_S)
        raise LoadControlError(f"the load process did not answer {request_id} within "
                               f"{timeout_s if timeout_s is not None else self.timeout_s:.0f}s")

    def kill(self, request_id: str, worker: str, seed: int = 0) -> dict[str, Any]:
        """Kill worker `worker` (`w<i>`, or `random`: the load process picks with `seed`)."""
        return self.request(f"{request_id}-kill", {"op": "kill", "worker": worker, "seed": seed})

    def start(self, request_id: str, replaces: str) -> dict[str, Any]:
        return self.request(f"{request_id}-start", {"op": "start", "replaces": replaces})

    def close(self) -> None:
        return None


def pending_requests(directory: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The serving side: requests without an answer yet, oldest name first."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.request.json")):
        request_id = path.name[: -len(".request.json")]
        if (directory / f"{request_id}.answer.json").exists():
            continue
        try:
            body = json.loads(path.read_text())
        except (OSError, ValueError):
            continue    # written atomically, so only a foreign file; leave it
        yield request_id, body if isinstance(body, dict) else {}


def answer(directory: Path, request_id: str, serve: Callable[[dict[str, Any]], dict[str, Any]],
           body: dict[str, Any]) -> dict[str, Any]:
    """Carry out one request with `serve` and write its answer (an exception becomes `ok: false`)."""
    try:
        result = {"ok": True, **serve(body)}
    except Exception as err:  # the answer says what went wrong; the master goes on
        result = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    _write_atomic(directory / f"{request_id}.answer.json", result)
    return result
