"""Shared fixtures: an embedded cluster (proxy, metadata, ledger, brokers) that is always stopped.

`cluster_factory()` starts the default cluster (v4 path, 2 brokers, fast timeouts),
`cluster_factory(path=..., brokers=..., settings=...)` others; every cluster
started through it is brought down at teardown, also when the test fails, so no
process outlives a test. Clusters live under the test's tmp_path and their services
exit if the test process dies (`parent_pid`).

`FAST_SETTINGS` shortens what would make failover tests slow: the metadata session
timeout (how long a dead broker's topics stay assigned to it) and keep-alives.

The metadata store is pinned, explicitly: `cluster_factory(store=...)` defaults to
`PINNED_STORE`, our Oxia-like store, because a ZooKeeper costs a JVM start (1 s more per
cluster on an idle machine, 6-9 s on a loaded one) and most cluster tests are about the brokers, not the store. A test that
passes `store=PATH_DEFAULT` gets the path's store as Pulsar ships it (ZooKeeper for v4 and
v4-batched, harness.metadata_stores), as `txnbench run`, bench and chaos do; a
`metadataStoreUrl` in `settings` wins over both.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar
import pytest

from faults.nemesis import Nemesis
from faults.schedule import plan_run
from harness.config import RunConfig
from harness.history import HistoryRecorder
from harness.metadata_stores import OUR_STORE
from harness.txn_paths import TxnPath
from harness.wire import Command, CommandType, Connection, InitialPosition, Role, SubType, commands
from targets.embedded import EmbeddedCluster, EmbeddedSpec

FAST_SETTINGS: dict[str, Any] = {
    "metadataStoreSessionTimeoutMillis": 3000,
    "keepAliveIntervalSeconds": 10,
    "managedLedgerAddEntryTimeoutSeconds": 5,
    "brokerClientOperationTimeoutSeconds": 5,
}

ClusterFactory = Callable[..., EmbeddedCluster]

#: The store of a cluster test unless it asks for another (see the module docstring).
PINNED_STORE: str | None = OUR_STORE
#: `store=PATH_DEFAULT`: the path's store as Pulsar ships it (ZooKeeper for v4 and v4-batched).
PATH_DEFAULT: str | None = None


@contextmanager
def started_clusters(base: Path) -> Iterator[ClusterFactory]:
    """A factory of clusters under `base`; all of them are brought down on exit."""
    started: list[EmbeddedCluster] = []

    def start(*, path: TxnPath | str = TxnPath.V4, brokers: int = 2, settings: Mapping[str, Any] | None = None,
              name: str | None = None, store: str | None = PINNED_STORE) -> EmbeddedCluster:
        directory = base / (name or f"cluster-{len(started)}")
        pinned = {} if store is None else {"metadataStoreUrl": store}
        spec = EmbeddedSpec(txn_path=TxnPath(path), brokers=brokers,
                            settings={**FAST_SETTINGS, **pinned, **dict(settings or {})},
                            directory=directory, parent_pid=os.getpid(), ready_timeout_s=90.0)
        cluster = EmbeddedCluster(spec)
        started.append(cluster)
        cluster.up()
        return cluster

    try:
        yield start
    finally:
        errors = []
        for cluster in reversed(started):
            try:
                cluster.down()
            except Exception as err:   # keep stopping the others
                errors.append(err)
        if errors:
            raise errors[0]


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[ClusterFactory]:
    with started_clusters(tmp_path) as start:
        yield start


# ---- traffic with the real pulsar-client (failover and restart tests) -------------------------


def service_urls(cluster: EmbeddedCluster) -> str:
    hosts = [r.service_url.removeprefix("pulsar://") for n, r in sorted(cluster.records.items())
             if n.startswith("broker-") and r.service_url]
    return "pulsar://" + ",".join(hosts)


@dataclass
class Traffic:
    acked_sends: dict[str, tuple[int, int]] = field(default_factory=dict)
    send_errors: list[str] = field(default_factory=list)
    received: list[tuple[float, str, tuple[int, int]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    stop_producing: threading.Event = field(default_factory=threading.Event)

    def consumed_values(self) -> set[str]:
        return {value for _, value, _ in self.received}


def produce(client: pulsar.Client, topic: str, traffic: Traffic, total: int) -> None:
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5,
                                      send_timeout_millis=60_000, block_if_queue_full=True)
    lock = threading.Lock()

    def done(value: str) -> pulsar.SendCallback:
        def callback(result: pulsar.Result, message_id: pulsar.MessageId) -> None:
            with lock:
                if result == pulsar.Result.Ok:
                    traffic.acked_sends[value] = (message_id.ledger_id(), message_id.entry_id())
                else:
                    traffic.send_errors.append(f"{value}: {result}")
        return callback

    for i in range(total):
        if traffic.stop.is_set() or traffic.stop_producing.is_set():
            break
        value = f"v{i:06d}"
        producer.send_async(value.encode(), done(value))
        time.sleep(0.004)
    producer.flush()
    producer.close()


def consume(client: pulsar.Client, topic: str, traffic: Traffic) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Failover,
                                initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=100)
    while not traffic.stop.is_set():
        try:
            message = consumer.receive(timeout_millis=200)
        except pulsar.Timeout:
            continue
        mid = message.message_id()
        traffic.received.append((time.monotonic(), message.data().decode(), (mid.ledger_id(), mid.entry_id())))
        consumer.acknowledge(message)
    consumer.close()


# ---- a minimal blocking client on harness.wire (what pulsar-client cannot do: receipts, txns) ---


class WireClient:
    """A minimal blocking client on harness.wire: requests, one consumer, acks with receipts, txns."""

    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        host, port = address.removeprefix("pulsar://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.conn = Connection(Role.CLIENT)
        self.pending: list[Command] = []
        self.next_request_id = 1000
        self.sock.sendall(self.conn.send(commands.connect("txnbench-test")))
        self.wait(lambda c: c.type is CommandType.CONNECTED)

    def send(self, command: Command) -> None:
        self.sock.sendall(self.conn.send(command))

    def wait(self, predicate: Callable[[Command], bool], timeout_s: float = 10.0) -> Command:
        deadline = time.monotonic() + timeout_s
        while True:
            for i, command in enumerate(self.pending):
                if predicate(command):
                    return self.pending.pop(i)
            if time.monotonic() > deadline:
                raise TimeoutError("no matching command arrived")
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.conn.receive_data(data)
            for event in self.conn.events():
                if isinstance(event, Command):
                    if event.type is CommandType.PING:
                        self.send(commands.pong())
                    else:
                        self.pending.append(event)

    def request(self, build: Callable[[int], Command], answer: CommandType, timeout_s: float = 10.0) -> Command:
        """Send `build(request_id)` and wait for the `answer` carrying that request id."""
        self.next_request_id += 1
        request_id = self.next_request_id
        self.send(build(request_id))
        return self.wait(lambda c: c.type in (answer, CommandType.ERROR) and commands.request_id_of(c) == request_id,
                         timeout_s)

    def close(self) -> None:
        self.sock.close()


def lookup_until_connect(address: str, topic: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    target = address
    while time.monotonic() < deadline:
        try:
            client = WireClient(target, 2.0)
        except OSError:
            time.sleep(0.2)
            continue
        try:
            client.send(commands.lookup(topic, 1, authoritative=target != address))
            answer = client.wait(lambda c: c.type is CommandType.LOOKUP_RESPONSE, 5)
        except (OSError, TimeoutError, ConnectionError):
            time.sleep(0.2)
            continue
        finally:
            client.close()
        if commands.error_of(answer) is None:
            url = answer.body.brokerServiceUrl
            if answer.body.response == 0:   # Redirect
                target = url
                continue
            return url
        time.sleep(0.2)
    raise AssertionError(f"no broker answered a lookup of {topic} within {timeout_s}s")


def subscribe(url: str, topic: str, timeout_s: float, *, subscription: str = "receipts",
              sub_type: SubType = SubType.Exclusive) -> WireClient:
    """A WireClient with consumer 1 on `subscription` (from the earliest entry) and 1000 permits."""
    deadline = time.monotonic() + timeout_s
    while True:
        client = WireClient(url)
        client.send(commands.subscribe(topic, subscription, 1, 1, sub_type=sub_type,
                                       initial_position=InitialPosition.Earliest))
        answer = client.wait(lambda c: c.type in (CommandType.SUCCESS, CommandType.ERROR))
        if answer.type is CommandType.SUCCESS:
            client.send(commands.flow(1, 1000))
            return client
        client.close()
        if time.monotonic() > deadline:
            raise AssertionError(f"cannot subscribe: {commands.describe(answer)}")
        time.sleep(0.2)



def quiet_nemesis(config: RunConfig, cluster: EmbeddedCluster, recorder: HistoryRecorder, **kwargs: Any) -> Nemesis:
    """A nemesis that says nothing, on `config`'s planned timeline against `cluster`, which it controls."""
    return Nemesis(config=config, timeline=plan_run(config), cluster=cluster.info(), control=cluster,
                   recorder=recorder, progress=lambda _m: None, **kwargs)


def end_owner_and_orphan(owner: subprocess.Popen[Any], orphan_pid: int | None) -> None:
    """After an owner-dies test: the owner killed if it still runs, the service it started too."""
    from tools.launch import process_gone

    if owner.poll() is None:
        owner.kill()
        owner.wait(10)
    if orphan_pid is not None and not process_gone(orphan_pid):
        os.kill(orphan_pid, signal.SIGKILL)


def running(process: Any) -> Iterator[Any]:
    """`process` started for a fixture, and stopped when the fixture ends."""
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real ZooKeeper (PySpark's jars) for the whole test session, stopped by pid."""
    from targets.zookeeper import ZooKeeperUnavailable
    from tools.launch import ZooKeeperProcess

    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
    except ZooKeeperUnavailable as err:
        pytest.fail(f"ZooKeeper cannot start here: {err}")
    try:
        yield server
    finally:
        server.stop()
