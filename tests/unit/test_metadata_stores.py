"""The store each run used, named alike in manifests and reports (harness.metadata_stores)."""

from __future__ import annotations

import pytest

from harness.metadata_stores import StoreKind, default_store_url, store_of_manifest, store_used


def test_defaults_are_the_stores_pulsar_ships() -> None:
    assert default_store_url("v4") == "zk" and default_store_url("v4-batched") == "zk"
    assert default_store_url("v5") == "txnbench"


@pytest.mark.parametrize(("target", "path", "url", "kind", "label"), [
    ("embedded", "v4", "zk", StoreKind.ZOOKEEPER, "ZooKeeper 3.9.5"),
    ("embedded", "v5", "zk", StoreKind.ZOOKEEPER, "ZooKeeper 3.9.5"),
    ("embedded", "v5", "txnbench", StoreKind.OXIA_LIKE, "Oxia-like store (ours)"),
    ("embedded", "v4", "", StoreKind.OXIA_LIKE, "Oxia-like store (ours)"),
    ("embedded", "v5", "oxia", StoreKind.OXIA_LIKE_OXIA_CLIENT, "Oxia-like store (ours) through the oxia client"),
    ("embedded", "v5", "oxia://127.0.0.1:6648", StoreKind.OXIA, "Oxia at oxia://127.0.0.1:6648"),
    ("embedded", "v4", "zk:127.0.0.1:2181", StoreKind.ZOOKEEPER, "ZooKeeper 3.9.5 at zk:127.0.0.1:2181"),
    ("compose", "v4", None, StoreKind.ZOOKEEPER, "ZooKeeper (as compose/ ships it)"),
    ("compose", "v5", None, StoreKind.OXIA, "Oxia (as compose/ ships it)"),
    ("external", "v4", None, StoreKind.UNKNOWN, "the external cluster's own (not known to txnbench)"),
])
def test_store_used_names_the_store(target: str, path: str, url: str | None, kind: StoreKind, label: str) -> None:
    settings = {} if url is None else {"metadataStoreUrl": url}
    used = store_used(target, path, settings, version="3.9.5" if kind is StoreKind.ZOOKEEPER else None)
    assert (used.kind, used.label) == (kind, label)


def test_a_real_oxia_is_named_with_its_version() -> None:
    used = store_used("pulsar", "v5", {"metadataStoreUrl": "oxia://127.0.0.1:6648/default"}, version="v0.14.0")
    assert (used.kind, used.label) == (StoreKind.OXIA, "Oxia v0.14.0 at oxia://127.0.0.1:6648/default")


def test_a_manifest_names_its_store_and_older_ones_are_derived() -> None:
    recorded = {"metadata_store": {"kind": "zookeeper", "url": "zk", "label": "ZooKeeper 3.9.5", "version": "3.9.5"}}
    assert store_of_manifest(recorded)["label"] == "ZooKeeper 3.9.5"
    # before the store was recorded, the embedded target ran every path on ours unless set
    old = {"target": "embedded", "path": "v4", "config": {"cluster": {"settings": {}}}}
    assert store_of_manifest(old)["kind"] == "oxia-like"
    old_zk = {"target": "embedded", "path": "v5", "cluster": {"settings": {"metadataStoreUrl": "zk"}}}
    assert store_of_manifest(old_zk)["kind"] == "zookeeper"


def test_a_pulsar_run_that_recorded_no_store_ran_on_zookeeper() -> None:
    used = store_used("pulsar", "v4", {})
    assert used.kind is StoreKind.ZOOKEEPER and "pulsar target" in used.label
