"""A ZooKeeper server dies with the process that started it.

Java cannot watch its parent as our Python services do, so `ZooKeeperProcess.start`
hands the server to a watchdog. Without it, a test session stopped with a signal left
its session-wide ZooKeeper running (found when a cluster-test run was interrupted).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from targets.zk_watchdog import start_time
from tests.waiting import wait_until

_OWNER = """
import sys
from pathlib import Path
from tools.launch import ZooKeeperProcess
server = ZooKeeperProcess(Path(sys.argv[1]))
server.start()
print(server.pid, flush=True)
sys.stdin.read()          # until the test kills this owner
"""


def test_killing_the_owner_kills_its_zookeeper(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(tmp_path / "zk")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    zk_pid = 0
    try:
        assert owner.stdout is not None
        zk_pid = int(owner.stdout.readline() or 0)
        assert zk_pid > 0 and start_time(zk_pid) is not None, "the owner started no ZooKeeper"
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        wait_until(lambda: start_time(zk_pid) is None, 15, message=f"ZooKeeper pid {zk_pid} gone with its owner")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=10)
        if zk_pid and start_time(zk_pid) is not None:
            os.kill(zk_pid, signal.SIGKILL)
