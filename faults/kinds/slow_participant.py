"""slow-participant: one broker's metadata-store link delayed past the v5 GC retention window, so the
coordinator's GC runs while that participant still waits for the decision (the PIP-473 review's race)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from faults.actions import ToxicAction
from faults.environment import Capability
from faults.kinds.base import MAX_MS, Draw, Kind, Param, Refusal, direction, through_network
from faults.model import Fault
from faults.resolution import Direction, LinkEnd, ResolveContext, Target, resolve_service
from faults.selectors import NoTarget, Selector, ServiceSelector
from harness.toxiproxy.model import Stream, ToxicType
from harness.txn_paths import TxnPath

# The v5 GC settings a slow participant must outlast, and Pulsar's defaults (facts file C.3).
GC_RETENTION_KEY = "transactionCoordinatorScalableTopicsGcRetentionSeconds"
GC_INTERVAL_KEY = "transactionCoordinatorScalableTopicsGcIntervalSeconds"
PULSAR_GC_RETENTION_S = 900
PULSAR_GC_INTERVAL_S = 300
SLOW_PARTICIPANT_MARGIN_S = 2.0
# A slow participant must keep its metadata session (Pulsar's default 30 s), or it stops
# being a participant: its topics move to a broker that is not slow.
SESSION_TIMEOUT_KEY = "metadataStoreSessionTimeoutMillis"
PULSAR_SESSION_TIMEOUT_MS = 30_000


def latency_ms(settings: Mapping[str, Any]) -> int:
    """Longer than one GC retention window plus one GC interval, so the GC runs while the
    participant still waits for the decision."""
    retention = float(settings.get(GC_RETENTION_KEY, PULSAR_GC_RETENTION_S))
    interval = float(settings.get(GC_INTERVAL_KEY, PULSAR_GC_INTERVAL_S))
    return int((retention + interval + SLOW_PARTICIPANT_MARGIN_S) * 1000)


def session_timeout_ms(settings: Mapping[str, Any]) -> float:
    return float(settings.get(SESSION_TIMEOUT_KEY, PULSAR_SESSION_TIMEOUT_MS))


def _resolve(selector: Selector, ctx: ResolveContext, _path: TxnPath) -> tuple[Target, ...]:
    """A broker, to the upstream stream of its broker-metadata link."""
    assert isinstance(selector, ServiceSelector)
    broker = resolve_service(selector, ctx).name
    link = next((link for link in ctx.cluster.links if link.source == broker and link.dest == "metadata"), None)
    if link is None:
        raise NoTarget(f"{broker} has no proxied link to the metadata store")
    return (LinkEnd(link.name, Stream.UPSTREAM),)


def _fill(params: dict[str, Any], settings: Mapping[str, Any]) -> None:
    if params.get("latency_ms") is None:
        params["latency_ms"] = latency_ms(settings)


def _check(params: Mapping[str, Any], held_s: float, settings: Mapping[str, Any]) -> None:
    """The delay must keep the metadata session and fit the window."""
    delay_ms = params.get("latency_ms") or latency_ms(settings)
    session_ms = session_timeout_ms(settings)
    if delay_ms >= session_ms:
        raise Refusal("params.latency_ms",
                      f"a {delay_ms / 1000:g} s delay outlasts the brokers' metadata session "
                      f"({session_ms / 1000:g} s): the participant would lose its topics instead of lagging",
                      f"set {SESSION_TIMEOUT_KEY} above {int(delay_ms)} in cluster.settings, or "
                      "lower the GC retention and interval")
    if held_s * 1000 < delay_ms:
        raise Refusal("for_s",
                      f"the slow participant needs {delay_ms / 1000:g} s of delay (GC retention + GC "
                      f"interval + margin) but is held only {held_s:g} s",
                      f"raise for_s (and phases.faults_s) to at least {delay_ms / 1000:g}, or lower "
                      f"{GC_RETENTION_KEY} and {GC_INTERVAL_KEY} in cluster.settings")


def _toxic(fault: Fault) -> Mapping[str, int]:
    return {"latency": int(fault.params["latency_ms"]), "jitter": 0}


KIND = Kind(
    "slow-participant", "delay one broker's metadata-store link past the v5 GC retention window",
    (ServiceSelector,), lambda _p: "broker:random", _resolve,
    through_network(lambda network: ToxicAction(network, ToxicType.LATENCY, _toxic)),
    # not drawn unless named: its delay must fit the GC and session settings
    Draw(("broker:random",), by_default=False),
    MappingProxyType({"latency_ms": Param(None, "milliseconds; default: GC retention + GC interval "
                                                "+ 2 s from the cluster settings", 0, MAX_MS),
                      "direction": direction(Direction.INBOUND)}),
    paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.NETWORK}), brokers_only=True,
    fill_params=_fill, check_run=_check)
