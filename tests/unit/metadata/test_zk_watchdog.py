"""The ZooKeeper watchdog kills its server when the owner dies, and leaves when the server goes."""

from __future__ import annotations

import subprocess

from targets.zk_watchdog import start_time, watch


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"])


def test_the_server_is_killed_once_its_owner_is_gone() -> None:
    owner, server = _sleeper(), _sleeper()
    try:
        server_start = start_time(server.pid)
        assert server_start is not None
        owner.kill()
        owner.wait(10)
        assert watch(owner.pid, server.pid, server_start, poll_s=0.01) == "killed"
        assert server.wait(10) == -9
    finally:
        for p in (owner, server):
            p.kill()
            p.wait(10)


def test_the_watchdog_leaves_when_the_server_is_gone_and_never_hits_another_start_time() -> None:
    owner, server = _sleeper(), _sleeper()
    try:
        server_start = start_time(server.pid)
        assert server_start is not None
        assert watch(owner.pid, server.pid, server_start + 1, poll_s=0.01) == "child gone"   # a reused pid
        assert server.poll() is None
        server.kill()
        server.wait(10)
        assert watch(owner.pid, server.pid, server_start, poll_s=0.01) == "child gone"
        assert owner.poll() is None
    finally:
        for p in (owner, server):
            p.kill()
            p.wait(10)
