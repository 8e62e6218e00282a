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
