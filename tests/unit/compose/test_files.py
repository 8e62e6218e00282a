"""The committed compose files, read as YAML: what each runs and how it is wired.

These checks stand in for running the files (no Docker engine here): every rule
the compose target relies on is asserted on the file itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.target import ServiceRole
from harness.txn_paths import TxnPath
from targets.compose import COMPOSE_DIR, DEFAULT_FILES, default_compose_file
from targets.compose.layout import ComposeLayout, interpolate, load_layout
from targets.compose.links import plan_links, toxiproxy_config
from targets.compose.validate import validate_file

FILES = {"v4.yaml": TxnPath.V4, "v4-batched.yaml": TxnPath.V4_BATCHED, "v5-oxia.yaml": TxnPath.V5,
         "v5-zookeeper.yaml": TxnPath.V5}
IMAGES = {"v4.yaml": "apachepulsar/pulsar:4.0.14", "v4-batched.yaml": "apachepulsar/pulsar:4.0.14",
          "v5-oxia.yaml": "apachepulsar/pulsar:5.0.0", "v5-zookeeper.yaml": "apachepulsar/pulsar:5.0.0"}


@pytest.fixture(params=sorted(FILES))
def layout(request: pytest.FixtureRequest) -> ComposeLayout:
    return load_layout(COMPOSE_DIR / request.param)


def test_the_compose_folder_has_exactly_the_four_files() -> None:
    assert sorted(p.name for p in COMPOSE_DIR.glob("*.yaml")) == sorted(FILES)
    assert {path: name for path, name in DEFAULT_FILES.items()} == {
        TxnPath.V4: "v4.yaml", TxnPath.V4_BATCHED: "v4-batched.yaml", TxnPath.V5: "v5-oxia.yaml"}
    for path in TxnPath:
        assert default_compose_file(path).is_file()


def test_every_file_passes_the_validator(layout: ComposeLayout) -> None:
    assert validate_file(layout.source) == []


def test_each_file_declares_its_path(layout: ComposeLayout) -> None:
    assert layout.txn_path is FILES[layout.source.name]


def test_every_long_running_service_has_a_health_check(layout: ComposeLayout) -> None:
    for svc in layout.long_running:
        assert svc.healthcheck is not None, svc.compose_name
        test = svc.healthcheck["test"]
        assert isinstance(test, list) and test[0] == "CMD" and len(test) > 1, svc.compose_name
        assert svc.restart == "no", svc.compose_name
    assert [s.compose_name for s in layout.services if s.is_one_shot] == ["init"]


def test_every_published_port_is_bound_to_loopback_with_a_variable_host_port(layout: ComposeLayout) -> None:
    bindings = [b for svc in layout.services for b in svc.ports]
    assert len(bindings) == 7
    for binding in bindings:
        assert binding.host_ip == "127.0.0.1", binding.raw
        assert binding.variable and binding.variable.startswith("TXNBENCH_"), binding.raw
        assert binding.default and binding.default.isdigit(), binding.raw
    defaults = [b.default for b in bindings]
    assert len(set(defaults)) == len(defaults)   # a plain `docker compose up` has no clashes
    assert "network_mode" not in json.dumps(layout.document)


def test_images_are_pinned_release_tags_behind_variables(layout: ComposeLayout) -> None:
    images = {svc.compose_name: interpolate(svc.image or "", {}) for svc in layout.services}
    pulsar = IMAGES[layout.source.name]
    for name, image in images.items():
        if name == "toxiproxy":
            assert image == "ghcr.io/shopify/toxiproxy:2.12.0"
        elif name == "oxia":
            assert image == "oxia/oxia:0.17.1"
        else:
            assert image == pulsar, name
        assert re.search(r":\d+\.\d+\.\d+$", image), image
    for svc in layout.services:
        assert svc.image is not None and svc.image.startswith("${") and ":-" in svc.image
    variable = "PULSAR4_IMAGE" if pulsar.endswith("4.0.14") else "PULSAR5_IMAGE"
    assert interpolate(layout.require("broker-0").image or "", {variable: "local/pulsar:dev"}) == "local/pulsar:dev"


def test_at_least_two_brokers_each_behind_toxiproxy(layout: ComposeLayout) -> None:
    brokers = layout.brokers
    assert [b.name for b in brokers] == ["broker-0", "broker-1"]
    proxy = layout.require("proxy")
    for i, broker in enumerate(brokers):
        client_port = broker.label_int("txnbench.client-port")
        assert client_port == 16650 + i
        assert proxy.port_for(client_port) is not None
        assert broker.setting("brokerServicePort") == str(6650 + i)
        assert broker.setting("webServicePort") == str(8080 + i)
        listeners = broker.setting("advertisedListeners") or ""
        assert listeners.startswith(f"internal:pulsar://broker-{i}:{6650 + i},external:pulsar://127.0.0.1:")
        assert f"${{TXNBENCH_BROKER_{i}_CLIENT_PORT:-{16650 + i}}}" in listeners
        assert broker.setting("internalListenerName") == "internal"
        assert broker.networks == (f"broker-{i}-net",)
        address = interpolate(layout.proxy_address_on(f"broker-{i}-net", {}) or "", {})
        assert address == f"10.213.{10 + i}.10"
        metadata = layout.require("metadata").compose_name
        assert {k: interpolate(v, {}) for k, v in broker.extra_hosts.items()} == {
            metadata: address, "bookie": address, f"broker-{1 - i}": address}


def test_the_default_toxiproxy_config_has_a_proxy_per_link(layout: ComposeLayout) -> None:
    assert layout.default_toxiproxy_config is not None
    config = json.loads(layout.default_toxiproxy_config.read_text())
    assert config == toxiproxy_config(plan_links(layout, {}))
    names = [p["name"] for p in config]
    assert names == ["client-broker-0", "client-broker-1",
                     "broker-0-metadata", "broker-0-ledger", "broker-0-broker-1", "broker-0-broker-1-http",
                     "broker-1-metadata", "broker-1-ledger", "broker-1-broker-0", "broker-1-broker-0-http"]
    by_name = {p["name"]: p for p in config}
    assert by_name["client-broker-1"] == {"name": "client-broker-1", "listen": "0.0.0.0:16651",
                                          "upstream": "broker-1:6651", "enabled": True}
    metadata = layout.require("metadata")
    port = metadata.label_int("txnbench.port")
    assert by_name["broker-1-metadata"]["upstream"] == f"{metadata.compose_name}:{port}"
    assert by_name["broker-0-ledger"] == {"name": "broker-0-ledger", "listen": "10.213.10.10:3181",
                                          "upstream": "bookie:3181", "enabled": True}


def test_transaction_settings_match_the_path(layout: ComposeLayout) -> None:
    txn_path = layout.txn_path
    for broker in layout.brokers:
        s = broker.setting
        assert s("transactionCoordinatorEnabled") == "true"
        assert s("systemTopicEnabled") == "true"
        batched = "true" if txn_path is TxnPath.V4_BATCHED else "false"
        assert s("transactionLogBatchedWriteEnabled") == batched
        assert s("transactionPendingAckBatchedWriteEnabled") == batched
        if txn_path is TxnPath.V4_BATCHED:
            for prefix in ("transactionLogBatchedWrite", "transactionPendingAckBatchedWrite"):
                assert s(f"{prefix}MaxRecords") == "512"
                assert s(f"{prefix}MaxSize") == "4194304"
                assert s(f"{prefix}MaxDelayInMillis") == "1"
        v5 = "true" if txn_path is TxnPath.V5 else None
        assert s("scalableTopicsEnabled") == v5
        assert s("transactionCoordinatorScalableTopicsEnabled") == v5
        if txn_path is TxnPath.V5:   # keys not in broker.conf must use the prefix
            assert broker.environment["PULSAR_PREFIX_transactionCoordinatorScalableTopicsEnabled"] == "true"
            assert s("transactionBufferProviderClassName") == \
                "org.apache.pulsar.broker.transaction.buffer.impl.DispatchingTransactionBufferProvider"


def test_metadata_store_per_file(layout: ComposeLayout) -> None:
    name = layout.source.name
    metadata = layout.require("metadata")
    broker = layout.require("broker-0")
    bookie = layout.require("ledger")
    if name == "v5-oxia.yaml":
        assert metadata.compose_name == "oxia"
        assert broker.setting("metadataStoreUrl") == "oxia://oxia:6648/default"
        assert bookie.environment["metadataServiceUri"] == "metadata-store:oxia://oxia:6648/default"
    else:
        assert metadata.compose_name == "zookeeper"
        assert broker.setting("metadataStoreUrl") == "zk:zookeeper:2181"
        assert bookie.environment["metadataServiceUri"] == "metadata-store:zk:zookeeper:2181"


def test_the_init_service_initialises_cluster_and_coordinator_metadata(layout: ComposeLayout) -> None:
    init = layout.require("init")
    command = init.command
    assert "bin/pulsar initialize-cluster-metadata --cluster txnbench" in command
    assert "bin/pulsar initialize-transaction-coordinator-metadata --cluster txnbench" in command
    assert command.count("--initial-num-transaction-coordinators 4") == 2
    for svc in (*layout.brokers, layout.require("ledger")):
        conditions = svc.raw["depends_on"]
        assert conditions["init"] == {"condition": "service_completed_successfully"}
    assert layout.require("broker-0").raw["depends_on"]["toxiproxy"] == {"condition": "service_healthy"}


def test_roles_map_onto_the_shared_names(layout: ComposeLayout) -> None:
    roles = {svc.name: svc.role for svc in layout.long_running}
    assert roles == {"metadata": ServiceRole.METADATA, "ledger": ServiceRole.LEDGER, "proxy": ServiceRole.PROXY,
                     "broker-0": ServiceRole.BROKER, "broker-1": ServiceRole.BROKER}


def test_the_files_differ_only_where_their_paths_differ() -> None:
    def skeleton(name: str) -> str:
        text = (COMPOSE_DIR / name).read_text()
        body = text[text.index("\nservices:"):]
        body = re.sub(r"oxia://oxia:6648/default", "STORE", body)
        body = re.sub(r"toxiproxy/[a-z0-9-]+\.json", "toxiproxy/FILE.json", body)
        return re.sub(r"zk:zookeeper:2181", "STORE", body)

    assert skeleton("v4.yaml") == skeleton("v4-batched.yaml") == skeleton("v5-zookeeper.yaml")


def test_the_readme_says_the_files_were_not_run_against_real_images() -> None:
    readme = (COMPOSE_DIR / "README.md").read_text()
    assert "not yet been run against real images" in readme
    for name in FILES:
        assert name in readme
    for image in ("apachepulsar/pulsar:4.0.14", "apachepulsar/pulsar:5.0.0", "oxia/oxia:0.17.1",
                  "ghcr.io/shopify/toxiproxy:2.12.0"):
        assert image in readme


def test_compose_paths_are_relative_to_the_file(layout: ComposeLayout) -> None:
    volume = layout.require("proxy").raw["volumes"][0]
    default = interpolate(volume, {}).split(":")[0]
    assert layout.default_toxiproxy_config is not None
    assert (layout.source.parent / default).resolve() == layout.default_toxiproxy_config.resolve()
    assert isinstance(layout.source, Path)
