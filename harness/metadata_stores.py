"""Which metadata store a run's brokers used, and which one each path gets by default.

Why here: the embedded target chooses the store (Pulsar's `metadataStoreUrl`), the run
records it in the manifest, and the analysis names it in every report; all three need
the same words, and the analysis must not import the cluster.

Defaults follow what Pulsar ships: Pulsar 4.x runs on ZooKeeper, so `v4` and
`v4-batched` get a real ZooKeeper (`zk`); Pulsar 5.0 runs v5 on Oxia, so `v5` gets our
Oxia-like store (`txnbench`: our store through our own protocol). `--set
metadataStoreUrl=zk` puts v5 on ZooKeeper, `--set metadataStoreUrl=txnbench` puts v4 on
our store, `oxia` puts the brokers on the real `oxia` client talking to our store.
The `pulsar` target (real Pulsar) runs real stores only: ZooKeeper for the v4 paths, a
real Oxia server for v5 (`oxia://HOST:PORT/default`), `--set metadataStoreUrl=zk|oxia`
to choose (targets/pulsar/conf.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["OUR_STORE", "StoreKind", "StoreUsed", "default_store_url", "is_our_store", "store_of_manifest",
           "store_used"]

#: `metadataStoreUrl` value of our Oxia-like store reached by our own protocol ("" is read alike).
OUR_STORE = "txnbench"


class StoreKind(StrEnum):
    ZOOKEEPER = "zookeeper"
    OXIA_LIKE = "oxia-like"                      # our store, our protocol
    OXIA_LIKE_OXIA_CLIENT = "oxia-like/oxia-client"   # our store, Oxia's protocol and client
    OXIA = "oxia"                                # a real Oxia (compose, or oxia://HOST:PORT)
    UNKNOWN = "unknown"


_LABELS = {
    StoreKind.ZOOKEEPER: "ZooKeeper",
    StoreKind.OXIA_LIKE: "Oxia-like store (ours)",
    StoreKind.OXIA_LIKE_OXIA_CLIENT: "Oxia-like store (ours) through the oxia client",
    StoreKind.OXIA: "Oxia",
    StoreKind.UNKNOWN: "unknown",
}


@dataclass(frozen=True)
class StoreUsed:
    """What a manifest records and a report prints: kind, the URL setting, a readable label."""

    kind: StoreKind
    url: str
    label: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind.value, "url": self.url, "label": self.label}


def default_store_url(txn_path: str) -> str:
    """Pulsar's store for a path: ZooKeeper for v4 and v4-batched (4.x), ours (Oxia-like) for v5."""
    return OUR_STORE if str(txn_path) == "v5" else "zk"


def is_our_store(url: Any) -> bool:
    return url is None or url in ("", OUR_STORE)


def _kind_of_url(url: str) -> StoreKind:
    if is_our_store(url):
        return StoreKind.OXIA_LIKE
    if url in ("oxia", "oxia://"):
        return StoreKind.OXIA_LIKE_OXIA_CLIENT
    if url.startswith("oxia://"):
        return StoreKind.OXIA
    if url == "zk" or url.startswith("zk:"):
        return StoreKind.ZOOKEEPER
    return StoreKind.UNKNOWN


def store_used(target: str, txn_path: str, settings: Mapping[str, Any], *, version: str | None = None) -> StoreUsed:
    """The store a run on `target` used, from its resolved cluster settings.

    Embedded: the resolved `metadataStoreUrl` (the target fills in the path's default).
    Compose: the setting when the scenario gave one, else what the compose files ship
    (ZooKeeper for v4, Oxia for v5). External: not known to the harness.
    """
    url = settings.get("metadataStoreUrl")
    if target == "external" and not url:
        return StoreUsed(StoreKind.UNKNOWN, "", "the external cluster's own (not known to txnbench)")
    if target == "pulsar" and not url:   # a run that failed before its cluster recorded its store
        return StoreUsed(StoreKind.ZOOKEEPER, "", _LABELS[StoreKind.ZOOKEEPER] + " (as the pulsar target starts it)")
    if target == "compose" and not url:
        kind = StoreKind.OXIA if str(txn_path) == "v5" else StoreKind.ZOOKEEPER
        return StoreUsed(kind, "", _LABELS[kind] + " (as compose/ ships it)")
    text = "" if url is None else str(url)
    kind = _kind_of_url(text)
    label = _LABELS[kind]
    if kind is StoreKind.ZOOKEEPER:
        label = f"ZooKeeper {version}" if version else label
        if text not in ("zk", "zk:", "zk://"):
            label += f" at {text}"
    elif kind is StoreKind.OXIA and text:
        label = (f"Oxia {version}" if version else label) + f" at {text}"
    elif kind is StoreKind.UNKNOWN:
        label = f"unknown ({text})"
    return StoreUsed(kind, text or OUR_STORE, label)


def store_of_manifest(manifest: Mapping[str, Any]) -> dict[str, str]:
    """A run's store as its manifest records it; for runs from before it was recorded, derived
    from the settings the cluster ran with (the embedded target then always used ours unless set)."""
    recorded = manifest.get("metadata_store")
    if isinstance(recorded, Mapping) and recorded.get("label"):
        return {str(k): str(v) for k, v in recorded.items()}
    cluster = manifest.get("cluster") if isinstance(manifest.get("cluster"), Mapping) else {}
    settings = (cluster or {}).get("settings") or ((manifest.get("config") or {}).get("cluster") or {}).get(
        "settings") or {}
    return store_used(str(manifest.get("target") or "embedded"), str(manifest.get("path") or ""),
                      settings).to_json()
