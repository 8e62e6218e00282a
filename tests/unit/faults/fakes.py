"""In-memory stand-ins for what the nemesis acts on: the Toxiproxy API, process control,
admin REST and the coordinator locator. Each keeps the state a real one would, so tests
can assert what is in effect, and each can be told to fail."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.target import ClusterInfo, LinkInfo, LinkKind, ServiceInfo, ServiceRole
from harness.toxiproxy.client import AlreadyExists, NotFound
from harness.txn_paths import TxnPath


def cluster_info(brokers: int = 3, path: TxnPath = TxnPath.V4,
                 settings: Mapping[str, Any] | None = None) -> ClusterInfo:
    """The services and links `EmbeddedCluster` would have, with made-up ports."""
    services = [ServiceInfo("proxy", ServiceRole.PROXY, "running", 100),
                ServiceInfo("metadata", ServiceRole.METADATA, "running", 101),
                ServiceInfo("ledger", ServiceRole.LEDGER, "running", 102)]
    links = []
    port = 20000
    for i in range(brokers):
        services.append(ServiceInfo(f"broker-{i}", ServiceRole.BROKER, "running", 200 + i,
                                    service_url=f"pulsar://127.0.0.1:{10000 + i}",
                                    admin_url=f"http://127.0.0.1:{11000 + i}"))
    for i in range(brokers):
        links.append(LinkInfo(f"client-broker-{i}", LinkKind.CLIENT_BROKER, "client", f"broker-{i}",
                              f"127.0.0.1:{10000 + i}", f"127.0.0.1:{12000 + i}"))
        for dest, kind in (("metadata", LinkKind.BROKER_METADATA), ("ledger", LinkKind.BROKER_LEDGER)):
            port += 1
            links.append(LinkInfo(f"broker-{i}-{dest}", kind, f"broker-{i}", dest,
                                  f"127.0.0.1:{port}", "127.0.0.1:1"))
        for j in range(brokers):
            if i != j:
                port += 1
                links.append(LinkInfo(f"broker-{i}-broker-{j}", LinkKind.BROKER_BROKER, f"broker-{i}",
                                      f"broker-{j}", f"127.0.0.1:{port}", f"127.0.0.1:{12000 + j}"))
    return ClusterInfo(target="embedded", txn_path=path, service_url="pulsar://127.0.0.1:10000",
                       admin_url="http://127.0.0.1:11000", toxiproxy_url="http://127.0.0.1:8474",
                       services=tuple(services), links=tuple(links), settings=dict(settings or {}))


class Boom(RuntimeError):
    pass


@dataclass
class FakeNetwork:
    """Proxies by name: enabled flag and toxics {name: (type, stream, attributes)}.

    `calls` keeps every change in order, an added toxic with its (type, stream, attributes): a
    test asserts what was done from it, not by sampling the state while a short fault lasts (a
    busy machine's sampler sleeps through a 0.1 s window)."""

    proxy_names: Sequence[str]
    fail_on: set[str] = field(default_factory=set)   # operations to fail: disable, enable, add, remove
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.enabled = {name: True for name in self.proxy_names}
        self.toxics: dict[str, dict[str, tuple[str, str, dict[str, int]]]] = {n: {} for n in self.proxy_names}
        self.lock = threading.Lock()

    def _check(self, op: str, proxy: str) -> None:
        if op in self.fail_on:
            raise Boom(f"{op} failed on purpose")
        if proxy not in self.enabled:
            raise NotFound(f"proxy {proxy} not found", 404)

    def disable(self, name: str) -> None:
        with self.lock:
            self._check("disable", name)
            self.calls.append(("disable", name))
            self.enabled[name] = False

    def enable(self, name: str) -> None:
        with self.lock:
            self._check("enable", name)
            self.calls.append(("enable", name))
            self.enabled[name] = True

    def add_toxic(self, proxy: str, type: Any, attributes: Mapping[str, int] | None = None, *,
                  stream: Any = "downstream", name: str | None = None, toxicity: float = 1.0) -> None:
        with self.lock:
            self._check("add", proxy)
            toxic = name or f"{type}_{stream}"
            if toxic in self.toxics[proxy]:
                raise AlreadyExists(f"toxic {toxic} already exists", 409)
            self.toxics[proxy][toxic] = (str(type), str(stream), dict(attributes or {}))
            self.calls.append(("add", proxy, toxic, self.toxics[proxy][toxic]))

    def remove_toxic(self, proxy: str, name: str) -> None:
        with self.lock:
            self._check("remove", proxy)
            if name not in self.toxics[proxy]:
                raise NotFound(f"toxic {name} not found", 404)
            self.calls.append(("remove", proxy, name))
            del self.toxics[proxy][name]

    def proxies(self) -> dict[str, Any]:
        return dict(self.enabled)

    def close(self) -> None:
        pass

    def clean(self) -> bool:
        return all(self.enabled.values()) and not any(self.toxics.values())


@dataclass
class FakeControl:
    names: Sequence[str]
    fail_on: set[str] = field(default_factory=set)   # kill, start, pause, resume
    calls: list[tuple[str, str]] = field(default_factory=list)
    delays: dict[str, float] = field(default_factory=dict)   # op -> seconds it takes (a slow restart)
    needs: dict[str, str] = field(default_factory=dict)      # service -> one that must run for it to start

    def __post_init__(self) -> None:
        self.state = {n: "running" for n in self.names}

    def _do(self, op: str, name: str, new_state: str) -> None:
        self.calls.append((op, name))
        if op in self.delays:
            time.sleep(self.delays[op])
        if op in self.fail_on:
            raise Boom(f"{op} {name} failed on purpose")
        if name not in self.state:
            raise KeyError(name)
        self.state[name] = new_state

    def kill(self, service: str) -> None:
        self._do("kill", service, "stopped")

    def start(self, service: str) -> None:
        needed = self.needs.get(service)
        if needed is not None and self.state.get(needed) != "running":
            self.calls.append(("start", service))
            raise Boom(f"{service} exited during start-up: {needed} is down")
        self._do("start", service, "running")

    def stop(self, service: str) -> None:
        self._do("stop", service, "stopped")

    def pause(self, service: str) -> None:
        self._do("pause", service, "paused")

    def resume(self, service: str) -> None:
        self._do("resume", service, "running")

    def is_running(self, service: str) -> bool:
        return self.state.get(service) == "running"

    def clean(self) -> bool:
        return all(s == "running" for s in self.state.values())


@dataclass
class FakeAdmin:
    """Topics with partitions (v4) or active segments (v5)."""

    partitions_by_topic: dict[str, int] = field(default_factory=dict)
    segments_by_topic: dict[str, list[str]] = field(default_factory=dict)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    terminated: set[str] = field(default_factory=set)
    unload_takes_s: float = 0.0
    """How long an unload's answer takes (a topic loading under a slow ledger store)."""

    def terminate_topic(self, topic: str) -> None:
        self.calls.append(("terminate_topic", topic))
        self.terminated.add(topic)

    def terminate_segment(self, segment: str) -> None:
        self.calls.append(("terminate_segment", segment))
        self.terminated.add(segment)

    def unload_topic(self, topic: str) -> None:
        self.calls.append(("unload_topic", topic))
        time.sleep(self.unload_takes_s)

    def unload_segment(self, segment: str) -> None:
        self.calls.append(("unload_segment", segment))

    def split_segment(self, topic: str, segment_id: int) -> None:
        self.calls.append(("split", topic, segment_id))

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> None:
        self.calls.append(("merge", topic, first_id, second_id))

    def partitions(self, topic: str) -> int:
        return self.partitions_by_topic.get(topic, 0)

    def active_segments(self, topic: str) -> list[str]:
        return list(self.segments_by_topic.get(topic, []))

    def close(self) -> None:
        pass


@dataclass
class FakeLocator:
    assignments: dict[int, str]
    owners: dict[str, str] = field(default_factory=dict)    # topic/segment -> broker service URL

    def coordinator_brokers(self) -> dict[int, str]:
        return dict(self.assignments)

    def owner_broker(self, topic: str) -> str:
        if topic not in self.owners:
            raise LookupError(f"no owner known for {topic}")
        return self.owners[topic]

    def close(self) -> None:
        pass


def v5_segments(topic_local: str, count: int = 2) -> list[str]:
    """`count` segments evenly covering 0000-ffff of topic://public/txnbench/<local>."""
    step = 0x10000 // count
    return [f"segment://public/txnbench/{topic_local}/{i * step:04x}-{(i + 1) * step - 1:04x}-{i}"
            for i in range(count)]
