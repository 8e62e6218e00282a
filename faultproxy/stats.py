"""The proxy's metrics: Toxiproxy's byte counters, plus connections and toxics per proxy.

The byte counters keep Toxiproxy's names and labels
(`toxiproxy_proxy_{received,sent}_bytes_total{direction,listener,proxy,upstream}`), so
one dashboard or analysis reads both this proxy and the real one; the rest is ours.
Hot-path counting goes through `ByteCounter`, which keeps its label key precomputed.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from faultproxy.toxics import Toxic
from harness.metrics import Counter, Registry
from harness.toxiproxy.model import Stream


class ByteCounter:
    """One series of a counter, cheap enough to bump for every chunk."""

    def __init__(self, counter: Counter, labels: dict[str, str]) -> None:
        self._values = counter.values
        self._key = tuple(str(labels[n]) for n in counter.labelnames)
        self._values.setdefault(self._key, 0.0)

    def add(self, amount: int) -> None:
        self._values[self._key] += amount


class ProxyMetrics:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        labels = ("direction", "listener", "proxy", "upstream")
        self.received = registry.counter(
            "toxiproxy_proxy_received_bytes_total",
            "Bytes the proxy read from a link's source (client for upstream, server for downstream)",
            labels)
        self.sent = registry.counter(
            "toxiproxy_proxy_sent_bytes_total",
            "Bytes the proxy wrote to a link's destination after its toxics", labels)
        self.connections = registry.counter(
            "txnbench_proxy_connections_total", "Client connections accepted", ("proxy",))
        self.upstream_failures = registry.counter(
            "txnbench_proxy_upstream_failures_total",
            "Accepted connections closed because the upstream could not be reached", ("proxy",))
        self.active_connections = registry.gauge(
            "txnbench_proxy_active_connections", "Connections open through the proxy", ("proxy",))
        self.enabled = registry.gauge(
            "txnbench_proxy_enabled", "1 while the proxy listens, 0 while disabled", ("proxy",))
        self.active_toxics = registry.gauge(
            "txnbench_proxy_active_toxics", "Toxics in effect, by type and stream",
            ("proxy", "type", "stream"))

    def byte_counters(self, direction: Stream, proxy: str, listen: str,
                      upstream: str) -> tuple[ByteCounter, ByteCounter]:
        labels = {"direction": direction.value, "listener": listen, "proxy": proxy, "upstream": upstream}
        return ByteCounter(self.received, labels), ByteCounter(self.sent, labels)

    def set_toxics(self, proxy: str, toxics: Iterable[Toxic]) -> None:
        values = self.active_toxics.values
        for key in [k for k in values if k[0] == proxy]:
            values[key] = 0.0
        for (kind, stream), count in Tally((t.type.value, t.stream.value) for t in toxics).items():
            self.active_toxics.set(count, proxy=proxy, type=kind, stream=stream)

    def forget(self, proxy: str) -> None:
        """A deleted proxy: its gauges drop to 0 (counters keep their totals)."""
        self.active_connections.set(0, proxy=proxy)
        self.enabled.set(0, proxy=proxy)
        self.set_toxics(proxy, ())
