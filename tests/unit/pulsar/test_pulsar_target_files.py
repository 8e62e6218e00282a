"""The pulsar target's pure parts: releases, config files, Java search, the Maven pom.

No process starts here; tests/pulsar starts real clusters.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from harness.target import ServiceRole
from harness.txn_paths import TxnPath
from targets.pulsar import conf, jars
from targets.pulsar.cluster import PulsarRecord
from targets.pulsar.java import find_java, java_major
from targets.pulsar.versions import DEFAULT_RELEASE, PULSAR_4_LTS, PULSAR_5, release


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_releases_pin_what_resolves_and_refuse_v5_without_pip_473() -> None:
    assert DEFAULT_RELEASE is PULSAR_5 and PULSAR_5.min_java >= 21 and PULSAR_4_LTS.min_java == 17
    assert PULSAR_5.supports(TxnPath.V5) and not PULSAR_4_LTS.supports(TxnPath.V5)
    assert PULSAR_4_LTS.supports(TxnPath.V4_BATCHED)
    assert release(None) is PULSAR_5 and release("4.0.8") is PULSAR_4_LTS
    with pytest.raises(ValueError, match=r"5\.0\.1, 4\.0\.8"):
        release("5.0.0")


@pytest.mark.parametrize(("txn_path", "batched", "scalable"), [
    (TxnPath.V4, False, False), (TxnPath.V4_BATCHED, True, False), (TxnPath.V5, False, True)])
def test_path_settings_are_the_documented_switches(txn_path: TxnPath, batched: bool, scalable: bool) -> None:
    settings = conf.path_settings(txn_path)
    assert settings["transactionCoordinatorEnabled"] is True
    # a transactional ack of one message of a batch is that message's only with this on (off in 4.0.8)
    assert settings["acknowledgmentAtBatchIndexLevelEnabled"] is True
    assert settings["transactionLogBatchedWriteEnabled"] is batched
    assert settings["transactionPendingAckBatchedWriteEnabled"] is batched
    assert settings.get("transactionCoordinatorScalableTopicsEnabled", False) is scalable
    if batched:   # PIP-160's lower bounds (TransactionBatchedWriteValidator)
        assert settings["transactionLogBatchedWriteMaxRecords"] >= 10
        assert settings["transactionPendingAckBatchedWriteMaxSize"] >= 128 * 1024
        assert settings["transactionLogBatchedWriteMaxDelayInMillis"] >= 1


def test_broker_dials_its_proxied_links_and_advertises_the_client_link() -> None:
    values = conf.broker_conf(binary_port=6650, http_port=8080, advertised_client_port=7001,
                              advertised_internal_port=7004,
                              zk_link="127.0.0.1:7002", settings={"managedLedgerDefaultAckQuorum": 1,
                                                                   "transactionCoordinatorEnabled": True})
    text = parse(conf.properties(values))
    assert text["metadataStoreUrl"] == text["configurationMetadataStoreUrl"] == "zk:127.0.0.1:7002"
    assert text["bookkeeperMetadataServiceUri"] == "zk+hierarchical://127.0.0.1:7002/ledgers"
    assert text["bookkeeper_bookieAddressResolverEnabled"] == "false"   # dial the bookie id (the proxy)
    assert text["bindAddress"] == text["advertisedAddress"] == "127.0.0.1"
    assert "external:pulsar://127.0.0.1:7001" in text["advertisedListeners"]
    assert "internal:pulsar://127.0.0.1:7004" in text["advertisedListeners"]   # peers dial brokers-broker-<i>
    assert text["brokerServicePort"] == "6650"
    assert text["internalListenerName"] == conf.INTERNAL_LISTENER
    assert "zooKeeperSessionTimeoutMillis" not in text   # it would override metadataStoreSessionTimeoutMillis
    for key in ("managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
                "managedLedgerDefaultAckQuorum"):
        assert text[key] == "1"   # one bookie; Pulsar's default of 2 would never write


def test_bookie_binds_loopback_and_registers_the_proxied_address(tmp_path: Path) -> None:
    text = parse(conf.bookie_conf(bookie_port=3181, advertised_id="127.0.0.1:7003", metrics_port=8000,
                                  zk_address="127.0.0.1:2181", data_dir=tmp_path))
    assert text["bookieId"] == "127.0.0.1:7003" and text["bookiePort"] == "3181"
    assert text["prometheusStatsHttpAddress"] == "127.0.0.1" and text["httpServerEnabled"] == "false"
    assert text["metadataServiceUri"] == "zk+hierarchical://127.0.0.1:2181/ledgers"
    zk = parse(conf.zookeeper_conf(2181, tmp_path))
    assert zk["clientPortAddress"] == "127.0.0.1" and zk["admin.enableServer"] == "false"


def test_jvm_heaps_fit_a_cluster_in_about_four_gib(tmp_path: Path) -> None:
    total = sum(conf.HEAP_MB[r] + conf.DIRECT_MB[r] for r in ("metadata", "ledger")) + \
        2 * (conf.HEAP_MB["broker"] + conf.DIRECT_MB["broker"])
    assert total <= 4096
    args17 = conf.jvm_args("broker", 17, tmp_path / "log4j2.xml", tmp_path)
    args25 = conf.jvm_args("broker", 25, tmp_path / "log4j2.xml", tmp_path)
    assert "--enable-native-access=ALL-UNNAMED" in args25 and "--enable-native-access=ALL-UNNAMED" not in args17
    assert f"-Djava.io.tmpdir={tmp_path}" in args17   # rocksdbjni and circe unpack natives there


def fake_java(folder: Path, version: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2025-01-01\' >&2\n')
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java


def test_java_search_takes_the_first_new_enough_and_names_the_fix(tmp_path: Path) -> None:
    old, new = fake_java(tmp_path / "jdk17", "17.0.15"), fake_java(tmp_path / "jdk25", "25.0.1")
    assert find_java(21, [old, new]) == (new, 25)
    assert find_java(17, [old, new]) == (old, 17)
    with pytest.raises(EnvironmentProblem, match=r"needs Java 21\+; found .*Java 17.*TXNBENCH_JAVA_HOME"):
        find_java(21, [old])
    assert java_major('java version "1.8.0_392"') == 8 and java_major("nothing") is None


def test_the_pom_pins_each_release_and_lists_its_overlay() -> None:
    text = jars.POM.read_text()
    for version in ("5.0.1", "4.0.8"):
        assert f"<id>pulsar-{version}</id>" in text
    assert "<artifactId>bookkeeper-server</artifactId><version>4.18.2</version>" in text   # 5.0.1's overlay
    assert "<exclusion><groupId>org.bouncycastle</groupId><artifactId>bc-fips</artifactId></exclusion>" in text


def test_a_missing_mvn_is_named_with_its_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="`mvn` is not on PATH; install it"):
        jars.ensure_jars(PULSAR_4_LTS, say=lambda _: None, root=tmp_path)


def test_a_complete_cache_is_reused_without_maven(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    digest = jars.pom_digest()
    lib = tmp_path / "4.0.8" / f"lib-{digest}"
    lib.mkdir(parents=True)
    (lib / "pulsar-broker-4.0.8.jar").write_bytes(b"")
    (tmp_path / "4.0.8" / f"classpath-{digest}.json").write_text(f'{{"pom_digest": "{digest}"}}')
    monkeypatch.setenv("PATH", str(tmp_path))   # no mvn: reuse must not need it
    classpath = jars.ensure_jars(PULSAR_4_LTS, say=lambda _: None, root=tmp_path)
    assert classpath.lib == lib and classpath.component_versions() == {"pulsar": "4.0.8"}


@pytest.mark.parametrize(("txn_path", "url", "store"), [
    (TxnPath.V5, None, conf.ZOOKEEPER), (TxnPath.V4, None, conf.ZOOKEEPER), (TxnPath.V4_BATCHED, "", conf.ZOOKEEPER),
    (TxnPath.V5, "zk", conf.ZOOKEEPER), (TxnPath.V4, "oxia", conf.OXIA), (TxnPath.V5, "oxia://", conf.OXIA)])
def test_the_store_is_zookeeper_unless_oxia_is_asked_for(txn_path: TxnPath, url: str | None,
                                                                  store: str) -> None:
    settings = {} if url is None else {"metadataStoreUrl": url}
    assert conf.metadata_store(txn_path, settings) == store


@pytest.mark.parametrize("url", ["oxia://127.0.0.1:6648/default", "zk:127.0.0.1:2181", "txnbench", "etcd"])
def test_a_store_url_the_target_cannot_start_is_refused(url: str) -> None:
    with pytest.raises(EnvironmentProblem, match="choose `zk`"):
        conf.metadata_store(TxnPath.V5, {"metadataStoreUrl": url})


def test_on_oxia_brokers_dial_their_link_and_bookkeeper_uses_pulsars_drivers(tmp_path: Path) -> None:
    values = conf.broker_conf(binary_port=6650, http_port=8080, advertised_client_port=7001,
                              advertised_internal_port=7004, zk_link="127.0.0.1:7002",
                              settings={"metadataStoreUrl": "oxia"}, store=conf.OXIA)
    text = parse(conf.properties(values))
    assert text["metadataStoreUrl"] == text["configurationMetadataStoreUrl"] == "oxia://127.0.0.1:7002/default"
    assert text["bookkeeperMetadataServiceUri"] == "metadata-store:oxia://127.0.0.1:7002/default"
    bookie = parse(conf.bookie_conf(bookie_port=3181, advertised_id="127.0.0.1:7005", metrics_port=8001,
                                    zk_address="127.0.0.1:6648", data_dir=tmp_path, store=conf.OXIA))
    assert bookie["metadataServiceUri"] == "metadata-store:oxia://127.0.0.1:6648/default"
    props = conf.bookkeeper_driver_props(conf.OXIA)
    assert ("-Dbookkeeper.metadata.bookie.drivers="
            "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver") in props
    assert any(p.startswith("-Dbookkeeper.metadata.client.drivers=") for p in props)
    assert conf.bookkeeper_driver_props(conf.ZOOKEEPER) == []


def test_oxia_runs_on_one_core_and_keeps_it_across_restarts(tmp_path: Path) -> None:
    """GOMAXPROCS=1 keeps Oxia v0.14.0's WAL appends in offset order (docs/findings/
    oxia-v0.14.0-wal-offset-race.md); the planned service keeps its environment in state.json,
    so `cluster down` from another process and a restart fault start it the same way."""
    assert conf.oxia_env() == {"GOMAXPROCS": "1"}
    planned = PulsarRecord("metadata", ServiceRole.METADATA, {"client_port": 6648}, tmp_path / "metadata.log",
                           kind="oxia", argv=["/bin/oxia"], env=conf.oxia_env())
    again = PulsarRecord.from_json(planned.to_json())
    assert again.env == {"GOMAXPROCS": "1"} and again == planned
    assert PulsarRecord.from_json({**planned.to_json(), "env": None}).env == {}   # a state file from before


def test_oxia_standalone_binds_loopback_with_its_own_metrics_port(tmp_path: Path) -> None:
    argv = conf.oxia_argv("/bin/oxia", port=6648, metrics_port=18080, data_dir=tmp_path)
    assert argv[:2] == ["/bin/oxia", "standalone"]
    assert argv[argv.index("--public-addr") + 1] == "127.0.0.1:6648"
    assert argv[argv.index("--metrics-addr") + 1] == "127.0.0.1:18080"
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "db")
    assert argv[argv.index("--wal-dir") + 1] == str(tmp_path / "wal")
