"""free_ports never hands out a port twice in a while, even when the kernel repeats one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from targets import processes
from targets.processes import free_ports


class _FakeSocket:
    """A socket whose bind(0) gets the next port of a scripted kernel."""

    def __init__(self, ports: Iterator[int]) -> None:
        self._ports = ports
        self.port = 0

    def bind(self, _address: Any) -> None:
        self.port = next(self._ports)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def close(self) -> None:
        pass


def scripted_kernel(monkeypatch: pytest.MonkeyPatch, ports: list[int]) -> None:
    it = iter(ports)
    monkeypatch.setattr(processes.socket, "socket", lambda *_a, **_k: _FakeSocket(it))
    monkeypatch.setattr(processes, "_RECENT_PORTS", processes.collections.deque(maxlen=4096))


def test_a_port_the_kernel_repeats_across_two_draws_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    # the failure seen in make test: a metadata store and then a ledger store planned one after
    # the other were both given 33861 (it was free both times: neither had bound it yet)
    scripted_kernel(monkeypatch, [40001, 33861, 33861, 40002, 40003])
    assert free_ports(2) == [40001, 33861]
    assert free_ports(2) == [40002, 40003]


def test_a_kernel_that_only_repeats_is_a_clear_error_not_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_kernel(monkeypatch, [5000] * 1000)
    assert free_ports(1) == [5000]
    with pytest.raises(OSError, match="found only 0 of 1 free ports"):
        free_ports(1)


def test_real_draws_are_distinct_over_many_calls() -> None:
    seen: list[int] = []
    for _ in range(200):
        seen.extend(free_ports(2))
    assert len(seen) == len(set(seen)) == 400


def ephemeral_range(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, text: str | None) -> None:
    path = tmp_path / "ip_local_port_range"
    if text is not None:
        path.write_text(text)
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE_FILE", path)


def test_ports_come_from_below_the_kernels_ephemeral_range(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A restarted service keeps its port: one the kernel may hand to any bind(0) or outgoing
    connection while the service is down (a pytest worker's cluster took a killed broker's) is no
    port for a service."""
    ephemeral_range(monkeypatch, tmp_path, "32768\t60999\n")
    assert processes.service_port_range() == range(20000, 32768)
    ports = [p for _ in range(50) for p in free_ports(2)]
    assert len(set(ports)) == 100 and all(20000 <= p < 32768 for p in ports)


class _TakenSocket(_FakeSocket):
    """bind((host, port)) fails for the ports in `taken`, as a bound port's does."""

    def __init__(self, taken: set[int]) -> None:
        super().__init__(iter(()))
        self.taken = taken

    def bind(self, address: Any) -> None:
        if address[1] in self.taken:
            raise OSError(98, "Address already in use")
        self.port = address[1]


def test_a_taken_port_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    ephemeral_range(monkeypatch, tmp_path, "32768 60999")
    draws = iter([21000, 21001, 21002])
    monkeypatch.setattr(processes.random, "choice", lambda _pool: next(draws))
    monkeypatch.setattr(processes.socket, "socket", lambda *_a, **_k: _TakenSocket({21000}))
    monkeypatch.setattr(processes, "_RECENT_PORTS", processes.collections.deque(maxlen=4096))
    assert free_ports(2) == [21001, 21002]


@pytest.mark.parametrize("text", [None, "20500 60999", "not numbers"], ids=["no file", "too narrow", "unreadable"])
def test_an_unknown_or_narrow_range_leaves_the_choice_to_the_kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                                     text: str | None) -> None:
    ephemeral_range(monkeypatch, tmp_path, text)
    assert processes.service_port_range() is None
    scripted_kernel(monkeypatch, [40001, 40002])
    assert free_ports(2) == [40001, 40002]
