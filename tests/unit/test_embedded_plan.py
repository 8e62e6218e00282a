"""The embedded cluster's plan: ports, links through the proxy, per-service configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from harness.target import LinkKind, ServiceRole
from harness.txn_paths import TxnPath
from targets.embedded import EmbeddedCluster, EmbeddedSpec, path_settings


def _planned(tmp_path: Path, path: TxnPath = TxnPath.V4, brokers: int = 3) -> EmbeddedCluster:
    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=path, brokers=brokers, directory=tmp_path,
                                           settings={"transactionCoordinatorCount": 2}))
    cluster._plan()
    return cluster


def _config(cluster: EmbeddedCluster, name: str) -> dict:
    return json.loads(cluster.records[name].config_path.read_text())


def test_every_link_goes_through_the_proxy(tmp_path: Path) -> None:
    cluster = _planned(tmp_path)
    names = {link.name for link in cluster.links}
    assert {"client-broker-0", "broker-1-metadata", "broker-2-ledger", "broker-0-broker-2"} <= names
    assert len(cluster.links) == 3 + 3 * 2 + 3 * 2
    proxy = _config(cluster, "proxy")
    assert {p["name"] for p in proxy["proxies"]} == names
    for i in range(3):
        broker = _config(cluster, f"broker-{i}")
        links = {link.name: link for link in cluster.links}
        assert broker["metadata_address"] == links[f"broker-{i}-metadata"].listen
        assert broker["ledger_address"] == links[f"broker-{i}-ledger"].listen
        assert broker["advertised_service_url"] == "pulsar://" + links[f"client-broker-{i}"].listen
        assert set(broker["peers"]) == {str(j) for j in range(3) if j != i}
        assert links[f"client-broker-{i}"].upstream.endswith(str(broker["binary_port"]))
        assert links[f"client-broker-{i}"].kind is LinkKind.CLIENT_BROKER


def test_ports_are_distinct_and_loopback(tmp_path: Path) -> None:
    cluster = _planned(tmp_path)
    ports = [p for r in cluster.records.values() for p in r.ports.values()]
    ports += [int(link.listen.rsplit(":", 1)[1]) for link in cluster.links]
    assert len(ports) == len(set(ports))
    for link in cluster.links:
        assert link.listen.startswith("127.0.0.1:") and link.upstream.startswith("127.0.0.1:")


def test_settings_select_the_path_and_overrides_win(tmp_path: Path) -> None:
    cluster = _planned(tmp_path, TxnPath.V4_BATCHED)
    settings = _config(cluster, "broker-0")["settings"]
    assert settings["transactionLogBatchedWriteEnabled"] is True
    assert settings["transactionCoordinatorCount"] == 2
    assert path_settings(TxnPath.V4)["transactionLogBatchedWriteEnabled"] is False
    assert path_settings(TxnPath.V5)["transactionCoordinatorScalableTopicsEnabled"] is True


def test_state_round_trips(tmp_path: Path) -> None:
    cluster = _planned(tmp_path)
    cluster.save_state()
    again = EmbeddedCluster.attach(tmp_path)
    assert again.spec.brokers == 3 and again.spec.txn_path is TxnPath.V4
    assert [link.name for link in again.links] == [link.name for link in cluster.links]
    info = again.info()
    brokers = sorted((s for s in info.services if s.role is ServiceRole.BROKER), key=lambda s: s.name)
    # every broker's client address, in order: killing broker-0 must not cut clients off the cluster
    assert info.service_url == "pulsar://" + ",".join(str(b.service_url).removeprefix("pulsar://") for b in brokers)
    assert [s.role for s in info.services].count(ServiceRole.BROKER) == 3
    assert not again.any_running()


def test_a_state_file_without_target_is_the_embedded_ones_and_a_newer_schema_is_refused(tmp_path: Path) -> None:
    from targets.state import STATE_FILE, recorded_target

    _planned(tmp_path).save_state()
    path = tmp_path / STATE_FILE
    state = json.loads(path.read_text())
    assert state["target"] == "embedded" and state["schema"] == 1 and recorded_target(tmp_path) == "embedded"
    path.write_text(json.dumps({k: v for k, v in state.items() if k != "target"}))   # as written before #44
    assert recorded_target(tmp_path) == "embedded" and EmbeddedCluster.attach(tmp_path).spec.brokers == 3
    path.write_text(json.dumps({**state, "schema": 2}))
    with pytest.raises(EnvironmentProblem, match="schema 2, newer than this txnbench reads"):
        EmbeddedCluster.attach(tmp_path)


def test_multi_host_service_url_keeps_order_and_skips_what_is_not_pulsar() -> None:
    from harness.target import multi_host_service_url

    assert multi_host_service_url(["pulsar://a:1/", None, "http://x:2", "pulsar://b:3"]) == "pulsar://a:1,b:3"
    assert multi_host_service_url([None]) == ""


def test_oxia_store_url_puts_every_broker_on_oxias_protocol_through_its_own_link(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=2, directory=tmp_path,
                                           settings={"metadataStoreUrl": "oxia"}))
    cluster._plan()
    links = {link.name: link for link in cluster.links}
    listeners = _config(cluster, "metadata")["oxia_listeners"]
    assert len(listeners) == 2
    for i, listener in enumerate(listeners):
        link = links[f"broker-{i}-metadata"]
        assert listener["advertised"] == link.listen   # the shard leader is the link, not the store
        assert link.upstream == f"127.0.0.1:{listener['port']}"
        assert _config(cluster, f"broker-{i}")["settings"]["metadataStoreUrl"] == f"oxia://{link.listen}"
    ports = [p for r in cluster.records.values() for p in r.ports.values()]
    ports += [int(link.listen.rsplit(":", 1)[1]) for link in cluster.links] + [x["port"] for x in listeners]
    assert len(ports) == len(set(ports))


@pytest.mark.parametrize(("path", "program"), [(TxnPath.V4, "zookeeper"), (TxnPath.V4_BATCHED, "zookeeper"),
                                              (TxnPath.V5, None)])
def test_each_path_gets_the_store_pulsar_ships_it_on(tmp_path: Path, path: TxnPath, program: str | None) -> None:
    """Pulsar 4.x runs on ZooKeeper; Pulsar 5.0 runs v5 on Oxia (here: our Oxia-like store)."""
    cluster = _planned(tmp_path, path, brokers=2)
    assert cluster.records["metadata"].program == program
    assert cluster.settings["metadataStoreUrl"] == ("zk" if program else "txnbench")
    link = next(link for link in cluster.links if link.name == "broker-0-metadata")
    told = _config(cluster, "broker-0")["settings"]["metadataStoreUrl"]
    assert told == (f"zk:{link.listen}" if program else link.listen)   # our protocol: the link's address


@pytest.mark.parametrize("url", ["txnbench", ""])
def test_our_store_on_v4_by_setting(tmp_path: Path, url: str) -> None:
    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V4, brokers=1, directory=tmp_path,
                                           settings={"metadataStoreUrl": url}))
    cluster._plan()
    assert cluster.records["metadata"].program is None and "rpc_port" in cluster.records["metadata"].ports
    assert _config(cluster, "broker-0")["settings"]["metadataStoreUrl"] == _config(cluster, "broker-0")[
        "metadata_address"]


def test_v5_on_zookeeper_by_setting(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=1, directory=tmp_path,
                                           settings={"metadataStoreUrl": "zk"}))
    cluster._plan()
    assert cluster.records["metadata"].program == "zookeeper"


def test_store_urls(tmp_path: Path) -> None:
    assert "oxia_listeners" not in _config(_planned(tmp_path / "a", TxnPath.V5), "metadata")
    outside = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=1, directory=tmp_path / "b",
                                           settings={"metadataStoreUrl": "oxia://127.0.0.1:6648"}))
    outside._plan()   # an Oxia elsewhere: passed to the brokers unchanged
    assert _config(outside, "broker-0")["settings"]["metadataStoreUrl"] == "oxia://127.0.0.1:6648"
    assert "oxia_listeners" not in _config(outside, "metadata")
    zk_outside = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=1, directory=tmp_path / "c",
                                              settings={"metadataStoreUrl": "zk:127.0.0.1:2181"}))
    zk_outside._plan()   # a ZooKeeper elsewhere: passed to the brokers unchanged
    assert _config(zk_outside, "broker-0")["settings"]["metadataStoreUrl"] == "zk:127.0.0.1:2181"
    with pytest.raises(EnvironmentProblem, match="metadataStoreUrl=etcd"):
        EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=1, directory=tmp_path / "d",
                                     settings={"metadataStoreUrl": "etcd://127.0.0.1:2379"}))._plan()


def test_zk_makes_the_metadata_service_a_zookeeper_behind_the_proxy(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V4, brokers=2, directory=tmp_path,
                                           settings={"metadataStoreUrl": "zk"}))
    cluster._plan()
    meta = cluster.records["metadata"]
    assert meta.program == "zookeeper" and meta.health_url is None and meta.metrics_url is None
    cfg = dict(line.split("=", 1) for line in meta.config_path.read_text().splitlines() if line)
    assert cfg["clientPort"] == str(meta.ports["client_port"]) and cfg["clientPortAddress"] == "127.0.0.1"
    assert cfg["dataDir"].startswith(str(tmp_path.resolve() / "data" / "metadata"))
    argv = cluster.processes["metadata"].argv
    assert argv[-2:] == ["org.apache.zookeeper.server.ZooKeeperServerMain", str(meta.config_path)]
    for i in range(2):
        link = next(link for link in cluster.links if link.name == f"broker-{i}-metadata")
        assert link.upstream == f"127.0.0.1:{meta.ports['client_port']}"
        assert _config(cluster, f"broker-{i}")["settings"]["metadataStoreUrl"] == f"zk:{link.listen}"
    cluster.save_state()
    assert EmbeddedCluster.attach(tmp_path).records["metadata"].program == "zookeeper"


def test_zk_on_a_too_old_java_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EnvironmentProblem, match=r"^ZooKeeper needs Java 17\+; .*java is Java 8$"):
        EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V4, brokers=1, directory=tmp_path / "c",
                                     settings={"metadataStoreUrl": "zk"}))._plan()


def test_zk_without_java_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EnvironmentProblem, match=r"^ZooKeeper needs Java 17\+ and no `java` is on PATH"):
        EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V4, brokers=1, directory=tmp_path / "c",
                                     settings={"metadataStoreUrl": "zk"}))._plan()


def test_the_stores_get_the_planted_bugs_the_spec_hands_them(tmp_path: Path) -> None:
    """The orchestrator decides the planted bugs (and refuses them unless allowed); the target only
    writes them into each store's config, so it needs no catalogue of its own."""
    bugs = ("txnbenchBugLedgerAckBeforeJournal", "txnbenchBugMetadataAckBeforeWal")
    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=1, directory=tmp_path / "a", planted_bugs=bugs))
    cluster._plan()
    assert _config(cluster, "metadata")["planted_bugs"] == list(bugs)
    assert _config(cluster, "ledger")["planted_bugs"] == list(bugs)
    assert "planted_bugs" not in _config(cluster, "broker-0")   # a broker reads its own from its settings
    plain = _planned(tmp_path / "b", TxnPath.V5, brokers=1)
    assert _config(plain, "metadata")["planted_bugs"] == [] and _config(plain, "ledger")["planted_bugs"] == []


def test_the_metadata_stores_snapshot_interval_is_a_cluster_setting(tmp_path: Path) -> None:
    from embedded.metadata.server import MetadataConfig
    from targets.embedded import METADATA_SNAPSHOT_SETTING

    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=2, directory=tmp_path,
                                           settings={METADATA_SNAPSHOT_SETTING: 3000}))
    cluster._plan()
    config = _config(cluster, "metadata")
    assert config["snapshot_every_records"] == 3000
    assert MetadataConfig.from_dict(config).snapshot_every_records == 3000
    default = _planned(tmp_path / "default", TxnPath.V5, brokers=2)
    assert "snapshot_every_records" not in _config(default, "metadata")   # the store's own default
    bad = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=2, directory=tmp_path / "bad",
                                       settings={METADATA_SNAPSHOT_SETTING: "often"}))
    with pytest.raises(EnvironmentProblem, match=METADATA_SNAPSHOT_SETTING):
        bad._plan()


def test_the_ledger_stores_journal_segment_size_is_a_cluster_setting(tmp_path: Path) -> None:
    from embedded.ledger.server import LedgerServiceConfig
    from targets.embedded import LEDGER_SEGMENT_SETTING

    cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V4, brokers=2, directory=tmp_path,
                                           settings={LEDGER_SEGMENT_SETTING: 262_144}))
    cluster._plan()
    config = _config(cluster, "ledger")
    assert LedgerServiceConfig.from_dict(config).segment_bytes == 262_144
    default = _planned(tmp_path / "default", TxnPath.V4, brokers=2)
    assert "segment_bytes" not in _config(default, "ledger")   # the store's own default
    bad = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V4, brokers=2, directory=tmp_path / "bad",
                                       settings={LEDGER_SEGMENT_SETTING: 10}))
    with pytest.raises(EnvironmentProblem, match=LEDGER_SEGMENT_SETTING):
        bad._plan()
