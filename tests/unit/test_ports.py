"""A port taken between its choice and the bind: the plan moves it, the start-up tries again.

Seen in `make bench TARGET=pulsar` beside another job: a 4.0.8 broker exited with `Failed to
bind Pulsar broker on /127.0.0.1:46295 ... Address already in use` and nothing retried. The
retry logic (targets/ports.py) is tested here without processes: fake services whose start
fails as a taken port does; tests/cluster/test_port_taken.py takes a real port from a real
embedded start-up, and tests/unit/pulsar/test_pulsar_ports.py plans a real Pulsar cluster again.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from targets.ports import (
    BIND_TRIES,
    PortMove,
    PortPlan,
    PortsTaken,
    changed_upstreams,
    start_services,
)
from targets.processes import (
    ProcessState,
    ServiceExited,
    ServiceNotReady,
    ServiceProcess,
    address_in_use,
    listening_ports,
)


def scripted(start: int) -> Any:
    """A port chooser handing out start, start+1, ... (no sockets)."""
    counter = iter(range(start, start + 1000))
    return lambda count: [next(counter) for _ in range(count)]


def test_a_move_gives_every_port_of_one_owner_new_ports_and_leaves_the_others() -> None:
    plan = PortPlan.choose([("proxy", "api_port"), ("proxy", "link:client-broker-0"),
                            ("broker-0", "binary_port"), ("broker-0", "http_port"), ("ledger", "rpc_port")],
                           chooser=scripted(7000))
    assert plan.of("broker-0") == {"binary_port": 7002, "http_port": 7003}
    move = plan.move("broker-0", start=1)
    assert plan.of("broker-0") == {"binary_port": 7005, "http_port": 7006}
    assert plan.of("proxy") == {"api_port": 7000, "link:client-broker-0": 7001} and plan[("ledger", "rpc_port")] == 7004
    assert move == PortMove("broker-0", {"binary_port": 7002, "http_port": 7003},
                            {"binary_port": 7005, "http_port": 7006}, 1)
    assert plan.moves == [move]
    assert "binary_port 7002 -> 7005" in move.describe() and f"of at most {BIND_TRIES}" in move.describe()
    with pytest.raises(KeyError):
        plan.move("broker-9")
    with pytest.raises(ValueError, match="planned twice"):
        PortPlan.choose([("a", "p"), ("a", "p")], chooser=scripted(1))


def test_only_links_whose_upstream_moved_are_pointed_anew() -> None:
    before = {"client-broker-0": "127.0.0.1:7002", "broker-0-ledger": "127.0.0.1:7004"}
    after = {"client-broker-0": "127.0.0.1:7005", "broker-0-ledger": "127.0.0.1:7004", "new": "127.0.0.1:1"}
    assert changed_upstreams(before, after) == {"client-broker-0": "127.0.0.1:7005"}


@pytest.mark.parametrize("line", [
    # the 4.0.8 broker (netty)
    "2026-11-29T03:12:09 ERROR PulsarService: Failed to bind Pulsar broker on /127.0.0.1:46295 "
    "io.netty.channel.unix.Errors$NativeIoException: bind(..) failed: Address already in use",
    "java.net.BindException: Address already in use",   # ZooKeeper, the bookie
    'ERR Failed to populate proxies from file error="listen tcp 127.0.0.1:7001: bind: address already in use"',
    "OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 7002): address already in use",
])
def test_a_failed_bind_reads_the_same_from_every_server(line: str) -> None:
    assert address_in_use(line)


def test_other_failures_are_not_a_taken_port() -> None:
    assert not address_in_use("java.net.ConnectException: Connection refused")
    assert not address_in_use("ERROR: the metadata store is not reachable")


def test_the_log_is_read_from_this_start_on(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    log.write_text("==== starting broker\njava.net.BindException: Address already in use\n"
                   "==== starting broker\nstarting up\n")
    proc = ServiceProcess("broker", ["true"], log)
    proc.log_start = proc._log_scanned = len(log.read_bytes()) - len("starting up\n")
    assert not proc.said_address_in_use()    # the earlier start's failure is not this one's
    with log.open("a") as out:
        out.write("Failed to bind Pulsar broker on /127.0.0.1:46295 ... Address already in use\n")
    assert proc.said_address_in_use()


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    held.listen()
    try:
        yield held
    finally:
        held.close()


def test_a_process_holds_the_ports_it_listens_on(listening: socket.socket, tmp_path: Path) -> None:
    port = listening.getsockname()[1]
    bound_only = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    bound_only.bind(("127.0.0.1", 0))
    try:
        held = listening_ports(os.getpid())
        assert held is not None and port in held
        assert bound_only.getsockname()[1] not in held   # bound, not listening: no server there
    finally:
        bound_only.close()
    ours = ServiceProcess("ledger", ["true"], tmp_path / "ledger.log", pid=os.getpid(), ports=(port,))
    assert ours.holds_its_ports()
    # another process listens there (this one, for a service that is our parent process): not that service's
    other = ServiceProcess("ledger", ["true"], tmp_path / "ledger.log", pid=os.getppid(), ports=(port,))
    assert not other.holds_its_ports()


# ---- the start-up loop, with fake services ---------------------------------------------------------------


class FakeService:
    """A service whose starts follow a script: "ready", "taken" (exits: address in use), "taken-running"
    (keeps running without its port, as Toxiproxy does), "crash" (exits for another reason), "slow"."""

    def __init__(self, name: str, script: list[str], log_path: Path) -> None:
        self.name = name
        self.script = script
        self.log_path = log_path
        self.outcome = ""
        self.starts = 0
        self.killed = 0

    def begin(self) -> None:
        self.outcome = self.script[min(self.starts, len(self.script) - 1)]
        self.starts += 1

    @property
    def state(self) -> str:
        return ProcessState.STOPPED if self.outcome in ("taken", "crash") else ProcessState.RUNNING

    def healthy(self, session: Any = None) -> bool:
        return self.outcome == "ready"

    def said_address_in_use(self) -> bool:
        return self.outcome in ("taken", "taken-running")

    def kill(self) -> None:
        self.killed += 1
        self.outcome = "crash"

    def exit_code(self) -> int:
        return 1

    def tail(self) -> str:
        return ""


class Cluster:
    """What `start_services` calls back: the target's process lookup, start and move."""

    def __init__(self, tmp_path: Path, **scripts: list[str]) -> None:
        self.services = {name.replace("_", "-"): FakeService(name.replace("_", "-"), script, tmp_path / f"{name}.log")
                         for name, script in scripts.items()}
        self.plan = PortPlan.choose([(name, "port") for name in self.services], chooser=scripted(9000))
        self.moved: list[str] = []
        self.said: list[str] = []

    def process(self, name: str) -> ServiceProcess:
        return cast(ServiceProcess, self.services[name])

    def start(self, name: str) -> None:
        self.services[name].begin()

    def move(self, name: str, start: int) -> PortMove:
        self.moved.append(name)
        return self.plan.move(name, start)

    def run(self, names: list[str], deadline_s: float = 5.0) -> list[PortMove]:
        import time

        return start_services(names, time.monotonic() + deadline_s, process=self.process, start=self.start,
                              move=self.move, say=self.said.append, poll_s=0.001)


def test_a_service_whose_port_was_taken_moves_and_starts_again(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, broker_0=["taken", "ready"], broker_1=["ready"])
    moves = cluster.run(["broker-0", "broker-1"])
    assert cluster.moved == ["broker-0"] and [m.service for m in moves] == ["broker-0"]
    assert cluster.services["broker-0"].starts == 2 and cluster.services["broker-1"].starts == 1
    assert moves[0].old == {"port": 9000} and moves[0].new == {"port": 9002} and moves[0].start == 1
    assert cluster.said == [moves[0].describe()]


def test_a_server_left_running_without_its_port_is_killed_then_moved(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, proxy=["taken-running", "ready"])
    cluster.run(["proxy"])
    assert cluster.services["proxy"].killed == 1 and cluster.moved == ["proxy"]


def test_the_tries_are_bounded(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, ledger=["taken"])
    with pytest.raises(PortsTaken, match=f"on each of its {BIND_TRIES} starts"):
        cluster.run(["ledger"])
    assert cluster.services["ledger"].starts == BIND_TRIES and len(cluster.moved) == BIND_TRIES - 1


def test_another_failure_is_not_retried(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, metadata=["crash", "ready"])
    with pytest.raises(ServiceExited) as caught:
        cluster.run(["metadata"])
    assert not isinstance(caught.value, PortsTaken) and cluster.moved == []
    assert cluster.services["metadata"].starts == 1


def test_a_service_never_ready_runs_into_the_deadline(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, broker_0=["slow"])
    with pytest.raises(ServiceNotReady, match="broker-0 not ready in time"):
        cluster.run(["broker-0"], deadline_s=0.05)
