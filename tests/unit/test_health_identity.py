"""A readiness check accepts only its own process's health answer.

Found by `make test` (2026-11-27): two services planned on one port; the ledger store could
not bind it, and its readiness check got the metadata store's 200, so a "ready" ledger store
refused every connection. Our services name their pid in `/health`; `healthy()` compares it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from targets.processes import ServiceProcess, answering_pid


class _Answer:
    def __init__(self, status: int, text: str) -> None:
        self.status_code = status
        self.text = text


class _Session:
    def __init__(self, answer: _Answer) -> None:
        self.answer = answer

    def get(self, url: str, timeout: float) -> Any:
        return self.answer


def _service(tmp_path: Path, pid: int) -> ServiceProcess:
    service = ServiceProcess("ledger", ["true"], log_path=tmp_path / "ledger.log", health_url="http://127.0.0.1:1/health")
    service.pid = pid
    return service


def test_the_health_answer_names_a_pid_or_nothing() -> None:
    assert answering_pid("ok pid=4242") == 4242
    assert answering_pid("ok pid=4242\n") == 4242
    assert answering_pid("ok") is None                    # a service of another kind (Toxiproxy's /version)
    assert answering_pid("ok pid=") is None and answering_pid("starting") is None


def test_another_process_answering_on_the_port_is_not_ready(tmp_path: Path) -> None:
    service = _service(tmp_path, pid=100)
    assert service.healthy(_Session(_Answer(200, "ok pid=100")))          # type: ignore[arg-type]
    assert not service.healthy(_Session(_Answer(200, "ok pid=200")))      # type: ignore[arg-type]
    assert not service.healthy(_Session(_Answer(503, "starting")))         # type: ignore[arg-type]
    assert service.healthy(_Session(_Answer(200, '{"version": "2.5.0"}')))  # type: ignore[arg-type]
