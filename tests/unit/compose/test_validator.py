"""Mutation tests: break one rule of a good compose file, and the validator must say so."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from targets.compose import COMPOSE_DIR
from targets.compose.layout import ComposeFileError, load_document, parse_layout
from targets.compose.validate import validate_layout

Doc = dict[str, Any]


def _doc(name: str) -> Doc:
    return load_document((COMPOSE_DIR / name).read_text(), name)


def _problems(doc: Doc, name: str, *, check_default_config: bool = False) -> list[str]:
    layout = parse_layout(doc, COMPOSE_DIR / name)
    return [str(p) for p in validate_layout(layout, check_default_config=check_default_config)]


def _env(doc: Doc, service: str) -> dict[str, Any]:
    env: dict[str, Any] = doc["services"][service]["environment"]
    return env


MUTATIONS: list[tuple[str, str, Callable[[Doc], None], str]] = [
    ("missing health check", "v4.yaml",
     lambda d: d["services"]["bookie"].pop("healthcheck"), "bookie: has no health check"),
    ("disabled health check", "v5-oxia.yaml",
     lambda d: d["services"]["broker-1"].__setitem__("healthcheck", {"disable": True}),
     "broker-1: has no health check"),
    ("health check NONE", "v4.yaml",
     lambda d: d["services"]["toxiproxy"].__setitem__("healthcheck", {"test": ["NONE"]}),
     "toxiproxy: has no health check"),
    ("port on all interfaces", "v4.yaml",
     lambda d: d["services"]["broker-0"].__setitem__("ports", ["${TXNBENCH_BROKER_0_HTTP_PORT:-18080}:8080"]),
     "broker-0: port '${TXNBENCH_BROKER_0_HTTP_PORT:-18080}:8080' is published on all interfaces"),
    ("port on 0.0.0.0", "v4-batched.yaml",
     lambda d: d["services"]["zookeeper"].__setitem__("ports", ["0.0.0.0:${TXNBENCH_METADATA_METRICS_PORT:-1}:8000"]),
     "zookeeper: port '0.0.0.0:${TXNBENCH_METADATA_METRICS_PORT:-1}:8000' is published on 0.0.0.0"),
    ("port as a bare container port", "v4.yaml",
     lambda d: d["services"]["bookie"]["ports"].append("3181"),
     "bookie: port '3181' is published on all interfaces"),
    ("port in long form without host_ip", "v4.yaml",
     lambda d: d["services"]["toxiproxy"]["ports"].append({"target": 8474, "published": "18999"}),
     "is published on all interfaces"),
    ("fixed host port", "v5-zookeeper.yaml",
     lambda d: d["services"]["broker-1"].__setitem__("ports", ["127.0.0.1:18081:8081"]),
     "broker-1: port '127.0.0.1:18081:8081' has a fixed host port"),
    ("host networking", "v4.yaml",
     lambda d: d["services"]["bookie"].__setitem__("network_mode", "host"), "bookie: uses network_mode: host"),
    ("missing transactionCoordinatorEnabled", "v4.yaml",
     lambda d: _env(d, "broker-0").pop("PULSAR_PREFIX_transactionCoordinatorEnabled"),
     "broker-0: transactionCoordinatorEnabled must be true"),
    ("systemTopicEnabled off", "v5-oxia.yaml",
     lambda d: _env(d, "broker-1").__setitem__("PULSAR_PREFIX_systemTopicEnabled", "false"),
     "broker-1: systemTopicEnabled must be true"),
    ("v4-batched without batching", "v4-batched.yaml",
     lambda d: _env(d, "broker-0").__setitem__("PULSAR_PREFIX_transactionPendingAckBatchedWriteEnabled", "false"),
     "path v4-batched needs transactionPendingAckBatchedWriteEnabled"),
    ("v4-batched missing a limit", "v4-batched.yaml",
     lambda d: _env(d, "broker-1").pop("PULSAR_PREFIX_transactionLogBatchedWriteMaxDelayInMillis"),
     "path v4-batched needs transactionLogBatchedWriteMaxDelayInMillis"),
    ("v4-batched limit below the broker's minimum", "v4-batched.yaml",
     lambda d: _env(d, "broker-0").__setitem__("PULSAR_PREFIX_transactionLogBatchedWriteMaxSize", "1024"),
     "transactionLogBatchedWriteMaxSize is 1024; the broker refuses values below 131072"),
    ("v4 with batching on", "v4.yaml",
     lambda d: _env(d, "broker-0").__setitem__("PULSAR_PREFIX_transactionLogBatchedWriteEnabled", "true"),
     "path v4 needs transactionLogBatchedWriteEnabled: \"false\""),
    ("v4 with scalable topics", "v4.yaml",
     lambda d: _env(d, "broker-1").__setitem__("PULSAR_PREFIX_scalableTopicsEnabled", "true"),
     "path v4 must not enable scalableTopicsEnabled"),
    ("v5 without the v5 coordinator", "v5-oxia.yaml",
     lambda d: _env(d, "broker-0").pop("PULSAR_PREFIX_transactionCoordinatorScalableTopicsEnabled"),
     "path v5 needs transactionCoordinatorScalableTopicsEnabled"),
    ("v5 without scalable topics", "v5-zookeeper.yaml",
     lambda d: _env(d, "broker-0").__setitem__("PULSAR_PREFIX_scalableTopicsEnabled", "false"),
     "path v5 needs scalableTopicsEnabled"),
    ("conflicting plain and prefixed key", "v4.yaml",
     lambda d: _env(d, "broker-0").__setitem__("transactionCoordinatorEnabled", "false"),
     "sets both transactionCoordinatorEnabled and PULSAR_PREFIX_transactionCoordinatorEnabled"),
    ("brokers with different settings", "v4.yaml",
     lambda d: _env(d, "broker-1").__setitem__("PULSAR_PREFIX_transactionBufferSnapshotMinTimeInMillis", "1"),
     "brokers differ in their transaction settings"),
    ("image latest", "v4.yaml",
     lambda d: d["services"]["bookie"].__setitem__("image", "apachepulsar/pulsar:latest"),
     "bookie: image 'apachepulsar/pulsar:latest' is not pinned"),
    ("image without tag", "v5-oxia.yaml",
     lambda d: d["services"]["oxia"].__setitem__("image", "${OXIA_IMAGE:-oxia/oxia}"),
     "oxia: image 'oxia/oxia' has no tag"),
    ("one broker", "v4.yaml",
     lambda d: d["services"].pop("broker-1"), "needs at least two brokers, found 1"),
    ("no toxiproxy client port for a broker", "v4.yaml",
     lambda d: d["services"]["toxiproxy"]["ports"].pop(), "broker-1: Toxiproxy does not publish its client port"),
    ("advertised external listener not through toxiproxy", "v4.yaml",
     lambda d: _env(d, "broker-0").__setitem__(
         "advertisedListeners", "internal:pulsar://broker-0:6650,external:pulsar://127.0.0.1:6650"),
     "broker-0: advertisedListeners needs external:pulsar://127.0.0.1:${TXNBENCH_BROKER_0_CLIENT_PORT:-16650}"),
    ("no internal listener name", "v5-oxia.yaml",
     lambda d: _env(d, "broker-1").pop("internalListenerName"), "broker-1: internalListenerName must be `internal`"),
    ("restart policy", "v4.yaml",
     lambda d: d["services"]["broker-0"].__setitem__("restart", "on-failure"),
     "broker-0: has restart: on-failure"),
    ("a dependency not routed through toxiproxy", "v4.yaml",
     lambda d: d["services"]["broker-1"]["extra_hosts"].pop(1),
     "broker-1: extra_hosts must send bookie to Toxiproxy"),
    ("a broker on the shared network", "v5-oxia.yaml",
     lambda d: d["services"]["broker-0"]["networks"].append("core"),
     "broker-0: must be attached to exactly one network"),
    ("init without coordinator metadata", "v4.yaml",
     lambda d: d["services"]["init"].__setitem__("command", ["bash", "-c", "bin/pulsar initialize-cluster-metadata"]),
     "init: does not run `pulsar initialize-transaction-coordinator-metadata`"),
    ("a service without a role", "v4.yaml",
     lambda d: d["services"].__setitem__("extra", {"image": "busybox:1.36", "healthcheck": {"test": ["CMD", "true"]}}),
     "services without a txnbench role label: ['extra']"),
    ("no path", "v4.yaml", lambda d: d.pop("x-txnbench"), "x-txnbench.path is missing"),
    ("web port not matching its label", "v4.yaml",
     lambda d: _env(d, "broker-1").__setitem__("webServicePort", "8080"),
     "broker-1: webServicePort must equal its txnbench.http-port label (8081)"),
    ("metadata store not the metadata service", "v5-oxia.yaml",
     lambda d: _env(d, "broker-0").__setitem__("metadataStoreUrl", "zk:zookeeper:2181"),
     "broker-0: metadataStoreUrl 'zk:zookeeper:2181' does not name the metadata service oxia"),
]


@pytest.mark.parametrize("file", ["v4.yaml", "v4-batched.yaml", "v5-oxia.yaml", "v5-zookeeper.yaml"])
def test_the_unmutated_files_are_clean(file: str) -> None:
    assert _problems(_doc(file), file, check_default_config=True) == []


@pytest.mark.parametrize(("title", "file", "mutate", "expected"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_broken_file_is_reported(title: str, file: str, mutate: Callable[[Doc], None], expected: str) -> None:
    doc = copy.deepcopy(_doc(file))
    mutate(doc)
    problems = _problems(doc, file)
    assert any(expected in p for p in problems), f"{title}: {expected!r} not in {problems}"


def test_a_stale_default_toxiproxy_config_is_reported(tmp_path: Path) -> None:
    doc = _doc("v4.yaml")
    config = json.loads((COMPOSE_DIR / "toxiproxy" / "v4.json").read_text())
    config = [p for p in config if p["name"] != "broker-1-ledger"]
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(config))
    doc["x-txnbench"]["toxiproxy-config"] = str(stale)
    problems = _problems(doc, "v4.yaml", check_default_config=True)
    assert any("stale.json does not match the links the file implies" in p for p in problems)
    doc["x-txnbench"]["toxiproxy-config"] = str(tmp_path / "absent.json")
    problems = _problems(doc, "v4.yaml", check_default_config=True)
    assert any("cannot read the default Toxiproxy config" in p for p in problems)


def test_duplicate_keys_are_refused_like_compose_does() -> None:
    text = (COMPOSE_DIR / "v4.yaml").read_text().replace(
        "    restart: \"no\"\n    networks: [core]\n", "    restart: \"no\"\n    restart: \"no\"\n    networks: [core]\n", 1)
    with pytest.raises(ComposeFileError, match=r"not valid YAML at line .*duplicate key 'restart'"):
        load_document(text, "dup.yaml")


def test_merge_keys_may_be_overridden_without_counting_as_duplicates() -> None:
    doc = load_document("x: &a {k: 1, j: 2}\nservices:\n  s:\n    <<: *a\n    k: 3\n", "merge.yaml")
    assert doc["services"]["s"] == {"k": 3, "j": 2}


def test_a_document_without_services_is_not_a_compose_file() -> None:
    with pytest.raises(ComposeFileError, match=r"not a compose file"):
        load_document("version: '3'\n", "empty.yaml")
