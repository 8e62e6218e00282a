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

from harness.errors import EnvironmentProblem
from harness.txn_paths import PIP_160_BATCHED_WRITES, TxnPath

HOST = "127.0.0.1"
#: The metadata stores the target runs: a real ZooKeeper or a real Oxia (`oxia standalone`).
ZOOKEEPER = "zk"
OXIA = "oxia"
#: The one namespace `oxia standalone` serves; Pulsar and BookKeeper share it.
OXIA_NAMESPACE = "default"
#: BookKeeper's drivers for `metadata-store:` URIs (a bookie on Pulsar's metadata store, e.g. Oxia).
BK_METADATA_DRIVERS = {
    "bookkeeper.metadata.bookie.drivers": "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "bookkeeper.metadata.client.drivers": "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
}
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

def console_log4j2(pattern: str, debug_loggers: tuple[str, ...] = ()) -> str:
    """A log4j2 configuration that writes every INFO line to standard output in `pattern`, and
    every DEBUG line of `debug_loggers` too."""
    debug = "".join(f'    <Logger name="{name}" level="debug"/>\n' for name in debug_loggers)
    return ('<Configuration status="WARN">\n  <Appenders>\n    <Console name="out" target="SYSTEM_OUT">\n'
            f'      <PatternLayout pattern="{pattern}"/>\n    </Console>\n  </Appenders>\n'
            f'  <Loggers>\n{debug}    <Root level="info"><AppenderRef ref="out"/></Root>\n  </Loggers>\n'
            '</Configuration>\n')


#: Loggers whose DEBUG lines the brokers write: the only trace of a v4 coordinator giving up a
#: transaction's timeout (`endTransactionForTimeout`'s "don't need to handle by transaction timeout!",
#: for any failure it does not retry), which left 2.10.5's transactions OPEN for good
#: (docs/findings/historical/v4-timeout-lost-after-coordinator-recovery.md). About one line per
#: transaction (its timeout fires after it ended and finds it gone: the same message) and one per
#: retried end; for a holder that never ended, the line is the dropped timeout. The held account
#: (analysis/holder_logs.py) quotes them.
DEBUG_LOGGERS = ("org.apache.pulsar.broker.TransactionMetadataStoreService",)
LOG4J2 = console_log4j2("%d{ISO8601} %-5level [%t] %c{1.} - %msg %X%n%throwable", DEBUG_LOGGERS)


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


def metadata_store(txn_path: TxnPath, settings: Mapping[str, Any]) -> str:
    """`zk` or `oxia`: the store a cluster runs, from `--set metadataStoreUrl=...`, else ZooKeeper.

    Pulsar 5.0 recommends Oxia for v5, but the only Oxia this machine's Go module proxy serves
    that 5.0.1's Java client speaks, v0.14.0, fails every write once two concurrent writes
    reach its WAL out of order (oxia-db/oxia#738, fixed in v0.14.2, which the proxy refuses;
    docs/findings/oxia-v0.14.0-wal-offset-race.md). `OXIA_ENV` makes that rarer, not
    impossible: three v5 atomic-produce runs on it were valid, a v5 mixed run hit it after a
    minute. So ZooKeeper is every path's default and Oxia is opt-in until a fixed Oxia can be
    built here. `zk` / `oxia` (also `zk:`, `zk://`, `oxia://` without a host) choose; the target
    starts that store itself and writes the real URLs into every config, so a full URL is refused.
    """
    url = settings.get("metadataStoreUrl")
    if url is None or url == "":
        return ZOOKEEPER
    if url in ("zk", "zk:", "zk://"):
        return ZOOKEEPER
    if url in ("oxia", "oxia://"):
        return OXIA
    raise EnvironmentProblem(f"--set metadataStoreUrl={url}: the pulsar target starts its own metadata store; "
                             f"choose `zk` (a real ZooKeeper) or `oxia` (a real Oxia server)")


def store_url(store: str, address: str) -> str:
    """Pulsar's `metadataStoreUrl` for the store at `address` (host:port)."""
    return f"oxia://{address}/{OXIA_NAMESPACE}" if store == OXIA else f"zk:{address}"


def bookkeeper_metadata_uri(store: str, address: str) -> str:
    """BookKeeper's `metadataServiceUri`: ZooKeeper's own driver, or Pulsar's driver on Oxia."""
    return f"metadata-store:{store_url(store, address)}" if store == OXIA else f"zk+hierarchical://{address}/ledgers"


def bookkeeper_driver_props(store: str) -> list[str]:
    """The `-D` options a JVM needs to use `metadata-store:` URIs (none for ZooKeeper)."""
    return [f"-D{key}={value}" for key, value in BK_METADATA_DRIVERS.items()] if store == OXIA else []


def oxia_argv(binary: str, *, port: int, metrics_port: int, data_dir: Path) -> list[str]:
    """`oxia standalone` on 127.0.0.1 only: the public port, the metrics port (its default 8080
    clashes with brokers' web ports), data and WAL under the cluster's folder, one shard, JSON
    log lines (its console format is coloured)."""
    return [binary, "standalone", "--log-json", "--public-addr", f"{HOST}:{port}", "--metrics-addr", f"{HOST}:{metrics_port}",
            "--data-dir", str(data_dir / "db"), "--wal-dir", str(data_dir / "wal"), "--shards", "1"]


#: `oxia standalone` v0.14.0 runs on one OS thread of Go code. Its leader takes a write's WAL
#: offset under its lock and appends it after releasing the lock (`leaderController.write`,
#: a regression of oxia-db/oxia#668, fixed by #738 in v0.14.2); two writes that reach the
#: append in the other order fail the later offset ("N+1 can not immediately follow N-1"),
#: the counter is not rolled back, and every write after it fails until a restart
#: (oxia-db/oxia#796). With GOMAXPROCS=1 no two goroutines run at once, so two writes swap
#: only when the first loses the processor inside that window (at the unlock itself, Go's
#: mutex handing off to a waiting writer, or waiting for the WAL's lock): far rarer, not
#: impossible (24 writers without Pulsar break it within a minute, with GC off too). Measured: no failure in 160 000
#: concurrent puts nor in three v5 atomic-produce runs, against one within a second on two
#: cores; but a v5 mixed run (12 users) hit it after a minute
#: (docs/findings/oxia-v0.14.0-wal-offset-race.md).
OXIA_ENV = {"GOMAXPROCS": "1"}


def oxia_env() -> dict[str, str]:
    """The environment `oxia standalone` runs with (on top of ours): `OXIA_ENV`."""
    return dict(OXIA_ENV)


def zookeeper_conf(client_port: int, data_dir: Path) -> str:
    return properties({
        "tickTime": 2000, "initLimit": 10, "syncLimit": 5, "dataDir": data_dir, "clientPort": client_port,
        "clientPortAddress": HOST, "admin.enableServer": False, "forceSync": "yes",
        "4lw.commands.whitelist": "srvr,ruok,mntr", "maxClientCnxns": 0, "maxSessionTimeout": 60_000,
    })


def bookie_conf(*, bookie_port: int, advertised_id: str, metrics_port: int, zk_address: str,
                data_dir: Path, store: str = ZOOKEEPER) -> str:
    """One bookie; registered under `advertised_id` (the proxied address brokers dial).

    `zk_address` is the metadata store's own address (ZooKeeper or Oxia, by `store`): the
    bookie reaches it directly, not through a link."""
    return properties({
        "bookiePort": bookie_port, "advertisedAddress": HOST, "listeningInterface": "lo", "allowLoopback": True,
        "bookieId": advertised_id,
        "journalDirectories": data_dir / "journal", "ledgerDirectories": data_dir / "ledgers",
        "metadataServiceUri": bookkeeper_metadata_uri(store, zk_address),
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

    Every path acknowledges at batch index level (`acknowledgmentAtBatchIndexLevelEnabled`):
    a transactional ack of one message of a batch carries its index, and Pulsar takes it as
    that message's only with this on (apache/pulsar#8037; 5.0.1's default, off in 2.10.5,
    3.2.0 and 4.0.8, read from their ServiceConfiguration, where the whole batch would be
    acknowledged). Without it the
    batched inputs of `workload.feed_batch` would lose their other messages to a broker set
    up against Pulsar's documented requirement, not to a bug.
    """
    settings: dict[str, Any] = {
        "transactionCoordinatorEnabled": True,
        "acknowledgmentAtBatchIndexLevelEnabled": True,
        "systemTopicEnabled": True,
        "transactionLogBatchedWriteEnabled": False,
        "transactionPendingAckBatchedWriteEnabled": False,
    }
    if txn_path is TxnPath.V4_BATCHED:
        settings.update(PIP_160_BATCHED_WRITES)
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
                zk_link: str, settings: Mapping[str, Any], store: str = ZOOKEEPER) -> dict[str, Any]:
    """One broker's settings: its ports, listeners, proxied dependencies, then `settings` on top.

    `zk_link` is the broker's own link to the metadata store (ZooKeeper or Oxia, by `store`).
    Oxia standalone answers every client with the address it dialled as the shard leader, so a
    broker's Oxia traffic stays on its own link. `metadataStoreUrl` in `settings` is the
    store's choice (`metadata_store`), never written as it is."""
    url = store_url(store, zk_link)
    base: dict[str, Any] = {
        "clusterName": CLUSTER_NAME,
        "metadataStoreUrl": url,
        "configurationMetadataStoreUrl": url,
        "bookkeeperMetadataServiceUri": bookkeeper_metadata_uri(store, zk_link),
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
        # Only the current name: Pulsar prefers the deprecated zooKeeperSessionTimeoutMillis when it
        # is set, which silently overrode a scenario's metadataStoreSessionTimeoutMillis (6 s in chaos).
        "metadataStoreSessionTimeoutMillis": 30_000,
    }
    return {**base, **{k: v for k, v in settings.items() if k != "metadataStoreUrl"}}
