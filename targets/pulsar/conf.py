"""The configuration files and JVM command lines of a real Pulsar cluster, as pure functions.

Why pure: what a broker is told (its ports, the proxied addresses it dials, the
transaction settings of its path) decides what a run measures, so it is computed from
plain values and tested without starting anything. No `conf/*.conf` ships in Pulsar's
jars, so these are minimal files: Pulsar's defaults for everything not named here.

Every server binds 127.0.0.1. Brokers reach ZooKeeper and the bookie through the
fault proxy: each broker's `metadataStoreUrl` is its own `broker-<i>-metadata` link, and
the bookie registers the `brokers-ledger` link's address as its bookie id, which the
brokers' BookKeeper clients dial as a plain `host:port` (`bookieAddressResolverEnabled`
off). Clients reach broker i through `client-broker-<i>`, the address its `external`
listener advertises; brokers reach broker i through `brokers-broker-<i>`, the address its
`internal` listener advertises (lookups between brokers answer with the internal one).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.txn_paths import TxnPath

HOST = "127.0.0.1"
CLUSTER_NAME = "txnbench"
INTERNAL_LISTENER = "internal"
EXTERNAL_LISTENER = "external"
#: Coordinators: partitions of `transaction_coordinator_assign` (v4) and the v5 coordinator's
#: parallelism; 4 as on the embedded cluster, so the two targets are compared like with like.
COORDINATORS = 4

#: Heaps sized so ZooKeeper, a bookie and two brokers fit in about 4 GiB together.
HEAP_MB = {"metadata": 256, "ledger": 384, "broker": 768, "tool": 256}
DIRECT_MB = {"metadata": 64, "ledger": 256, "broker": 512, "tool": 128}

#: From Pulsar's `bin/pulsar`: module access the broker and bookie need on Java 17+.
ADD_OPENS = ("java.base/java.io", "java.base/java.nio", "java.base/java.util.zip", "java.base/jdk.internal.misc",
             "java.base/sun.net", "java.management/sun.management", "java.base/java.lang",
             "java.base/jdk.internal.platform")

LOG4J2 = """<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{ISO8601} %-5level [%t] %c{1.} - %msg %X%n%throwable"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""


def properties(values: Mapping[str, Any]) -> str:
    """`key=value` lines (booleans as Pulsar writes them)."""
    def text(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)
    return "".join(f"{key}={text(value)}\n" for key, value in values.items())


def jvm_args(role: str, java_major: int, log4j2: Path, tmp_dir: Path) -> list[str]:
    """Heap, module access and logging for one server; `role` is metadata, ledger, broker or tool."""
    args = [f"-Xms{HEAP_MB[role] // 2}m", f"-Xmx{HEAP_MB[role]}m", f"-XX:MaxDirectMemorySize={DIRECT_MB[role]}m",
            "-XX:+UseG1GC", "-XX:ActiveProcessorCount=2",
            "-Djava.net.preferIPv4Stack=true", "-Dio.netty.tryReflectionSetAccessible=true",
            "-Djute.maxbuffer=10485760", f"-Dlog4j.configurationFile={log4j2}", f"-Dlog4j2.configurationFile={log4j2}",
            f"-Djava.io.tmpdir={tmp_dir}", "-Dpulsar.allocator.exit_on_oom=true"]
    args += [f"--add-opens={module}=ALL-UNNAMED" for module in ADD_OPENS]
    if java_major >= 24:
        args += ["--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow"]
    return args


def zookeeper_conf(client_port: int, data_dir: Path) -> str:
    return properties({
        "tickTime": 2000, "initLimit": 10, "syncLimit": 5, "dataDir": data_dir, "clientPort": client_port,
        "clientPortAddress": HOST, "admin.enableServer": False, "forceSync": "yes",
        "4lw.commands.whitelist": "srvr,ruok,mntr", "maxClientCnxns": 0, "maxSessionTimeout": 60_000,
    })


def bookie_conf(*, bookie_port: int, advertised_id: str, metrics_port: int, zk_address: str,
                data_dir: Path) -> str:
    """One bookie; registered under `advertised_id` (the proxied address brokers dial)."""
    return properties({
        "bookiePort": bookie_port, "advertisedAddress": HOST, "listeningInterface": "lo", "allowLoopback": True,
        "bookieId": advertised_id,
        "journalDirectories": data_dir / "journal", "ledgerDirectories": data_dir / "ledgers",
        "metadataServiceUri": f"zk+hierarchical://{zk_address}/ledgers",
        "httpServerEnabled": False,
        "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
        "dbStorage_writeCacheMaxSizeMb": 32, "dbStorage_readAheadCacheMaxSizeMb": 32,
        "dbStorage_rocksDB_blockCacheSize": 16 * 1024 * 1024,
        "journalSyncData": True,
        "enableStatistics": True,
        "statsProviderClass": "org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider",
        "prometheusStatsHttpAddress": HOST, "prometheusStatsHttpPort": metrics_port,
        "diskUsageThreshold": 0.99, "diskUsageWarnThreshold": 0.98,
        "numAddWorkerThreads": 1, "numReadWorkerThreads": 1,
    })


def path_settings(txn_path: TxnPath) -> dict[str, Any]:
    """The broker settings that select a transaction path, as Pulsar's docs give them.

    v4: `transactionCoordinatorEnabled`; v4-batched adds PIP-160's batched writers with
    their default knobs; v5 (5.0 only) adds the scalable-topic switches and the v5
    coordinator's timings, as on the embedded cluster. On 5.0 the v4 paths keep 5.0's
    defaults for the rest (the legacy coordinator serves v4 clients either way).
    """
    settings: dict[str, Any] = {
        "transactionCoordinatorEnabled": True,
        "systemTopicEnabled": True,
        "transactionLogBatchedWriteEnabled": False,
        "transactionPendingAckBatchedWriteEnabled": False,
    }
    if txn_path is TxnPath.V4_BATCHED:
        settings.update({
            "transactionLogBatchedWriteEnabled": True,
            "transactionLogBatchedWriteMaxRecords": 512,
            "transactionLogBatchedWriteMaxSize": 4 * 1024 * 1024,
            "transactionLogBatchedWriteMaxDelayInMillis": 1,
            "transactionPendingAckBatchedWriteEnabled": True,
            "transactionPendingAckBatchedWriteMaxRecords": 512,
            "transactionPendingAckBatchedWriteMaxSize": 4 * 1024 * 1024,
            "transactionPendingAckBatchedWriteMaxDelayInMillis": 1,
        })
    if txn_path is TxnPath.V5:
        settings.update({
            "scalableTopicsEnabled": True,
            "transactionCoordinatorScalableTopicsEnabled": True,
            "transactionCoordinatorScalableTopicsParallelism": COORDINATORS,
            "transactionCoordinatorScalableTopicsTimeoutSweepIntervalSeconds": 5,
            "transactionCoordinatorScalableTopicsGcIntervalSeconds": 30,
            "transactionCoordinatorScalableTopicsGcRetentionSeconds": 120,
        })
    return settings


def broker_conf(*, binary_port: int, http_port: int, advertised_client_port: int, advertised_internal_port: int,
                zk_link: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """One broker's settings: its ports, listeners, proxied dependencies, then `settings` on top."""
    zk_url = f"zk:{zk_link}"
    base: dict[str, Any] = {
        "clusterName": CLUSTER_NAME,
        "metadataStoreUrl": zk_url,
        "configurationMetadataStoreUrl": zk_url,
        "bookkeeperMetadataServiceUri": f"zk+hierarchical://{zk_link}/ledgers",
        "bookkeeper_bookieAddressResolverEnabled": False,
        "brokerServicePort": binary_port,
        "webServicePort": http_port,
        "bindAddress": HOST,
        "advertisedAddress": HOST,
        "advertisedListeners": (f"{INTERNAL_LISTENER}:pulsar://{HOST}:{advertised_internal_port},"
                                f"{EXTERNAL_LISTENER}:pulsar://{HOST}:{advertised_client_port}"),
        "internalListenerName": INTERNAL_LISTENER,
        "managedLedgerDefaultEnsembleSize": 1,
        "managedLedgerDefaultWriteQuorum": 1,
        "managedLedgerDefaultAckQuorum": 1,
        "functionsWorkerEnabled": False,
        "brokerDeleteInactiveTopicsEnabled": False,
        "allowAutoTopicCreation": True,
        "numIOThreads": 2,
        "numHttpServerThreads": 8,
        "managedLedgerCacheSizeMB": 64,
        "bookkeeperNumberOfChannelsPerBookie": 2,
        "exposeTopicLevelMetricsInPrometheus": True,
        "zooKeeperSessionTimeoutMillis": 30_000,
        "metadataStoreSessionTimeoutMillis": 30_000,
    }
    return {**base, **dict(settings)}
