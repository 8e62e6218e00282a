"""The Apache Pulsar releases the `pulsar` target runs, and what each one needs.

One table, `RELEASES`: per release, its line (the Java it needs, which transaction paths it
has, the broker settings of ours it does not know), the BookKeeper, ZooKeeper and netty its
classpath holds, what `maven/pom.xml` pins for it and why, and what was last seen of it on
this project's machines (does it resolve from the Maven mirror, does a cluster of it commit a
transaction, when that was checked, and why not). `txnbench releases` prints it;
`txnbench releases --check` tries every release again and keeps what it saw in a cache file
(`targets/pulsar/release_check.py`), which that listing then shows beside the recorded facts.

Why these releases: the issue asked for every release from 2.10 on. The Maven mirror these
machines use serves the `pulsar-broker` POMs of the releases below and refuses others
(2.10.6, 3.0.1, 4.0.14, 5.0.0 and 5.0.0-M2 answer 404): those are listed too, as not
resolving, so a mirror that later serves them is noticed by `--check`. 5.0.1 is the default:
the only release with PIP-473 (v5) the mirror serves, and one version for all three paths keeps
the comparison between them fair.

What differs between lines, checked on each release's own jars (`javap -p -cp <jars>
org.apache.pulsar.broker.ServiceConfiguration`): PIP-160's batched transaction log and
pending-ack writers (`transactionLogBatchedWriteEnabled`, `transactionPendingAckBatchedWriteEnabled`
and their knobs) exist from 2.11.0 on, so `v4-batched` needs 2.11+; PIP-473's v5 needs 5.0. Every
other setting the target writes (`metadataStoreUrl`, `configurationMetadataStoreUrl`,
`metadataStoreSessionTimeoutMillis`, `advertisedListeners`, `internalListenerName`,
`transactionCoordinatorEnabled`, `systemTopicEnabled`, `brokerDeleteInactiveTopicsEnabled`,
`acknowledgmentAtBatchIndexLevelEnabled`, ...)
has the same name in every release from 2.10.5 on (2.10 is the line that renamed
`zookeeperServers` to `metadataStoreUrl`), so no line needs an older name; `ReleaseLine.renamed`
is where one would go. `PulsarClusterMetadataSetup` takes `--metadata-store` and
`--configuration-metadata-store` from 2.10 on too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from harness.txn_paths import PIP_160_BATCHED_WRITES, TxnPath

#: The v5 path's broker settings (conf.path_settings): 5.0 only.
SCALABLE_SETTINGS = frozenset({
    "scalableTopicsEnabled", "transactionCoordinatorScalableTopicsEnabled",
    "transactionCoordinatorScalableTopicsParallelism", "transactionCoordinatorScalableTopicsTimeoutSweepIntervalSeconds",
    "transactionCoordinatorScalableTopicsGcIntervalSeconds", "transactionCoordinatorScalableTopicsGcRetentionSeconds",
})
#: PIP-160's settings: the two switches and their knobs (2.11.0 on).
BATCHED_SETTINGS = frozenset({"transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled",
                              *PIP_160_BATCHED_WRITES})


@dataclass(frozen=True)
class ReleaseLine:
    """What the releases of one line share: their Java, their paths, the settings that differ."""

    name: str                        # "2.10", "4.0", "5.0"
    min_java: int
    #: PIP-160: batched transaction log and pending-ack writes (`v4-batched`), shipped in 2.11.0
    batched_writes: bool
    #: PIP-473: the metadata-driven coordinator and scalable (`topic://`) topics (`v5`), 5.0
    scalable_transactions: bool
    #: our setting name -> the name this line knows it by (none differ from 2.10.5 on)
    renamed: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: settings this line's brokers need to start here and later lines do not (under ours)
    needs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def absent_settings(self) -> frozenset[str]:
        """Settings the target writes that this line's brokers do not have (not written to them)."""
        return ((frozenset() if self.batched_writes else BATCHED_SETTINGS)
                | (frozenset() if self.scalable_transactions else SCALABLE_SETTINGS))

    def paths(self) -> tuple[TxnPath, ...]:
        return tuple(p for p in TxnPath if self.supports(p))

    def supports(self, txn_path: TxnPath) -> bool:
        if txn_path is TxnPath.V5:
            return self.scalable_transactions
        return txn_path is not TxnPath.V4_BATCHED or self.batched_writes

    def broker_settings(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """`values` as this line's brokers know them: what the line needs added (`values` win),
        settings it lacks dropped, renamed ones renamed."""
        merged = {**self.needs, **values}
        return {self.renamed.get(k, k): v for k, v in merged.items() if k not in self.absent_settings}


@dataclass(frozen=True)
class Checked:
    """What was last seen of one release on this project's machines (2 cores, the Maven mirror)."""

    date: str                        # YYYY-MM-DD (UTC)
    resolves: bool                   # `jars.ensure_jars` resolved its classpath
    starts: tuple[str, ...] = ()     # the paths on which `txnbench cluster up` committed a transaction
    why_not: str = ""                # what failed, when something did

    @property
    def runs(self) -> bool:
        return self.resolves and bool(self.starts)


@dataclass(frozen=True)
class PulsarRelease:
    """One release of the table: its line, its classpath's components, its pins and what was seen."""

    version: str
    line: ReleaseLine
    bookkeeper: str = ""             # empty: never resolved here
    zookeeper: str = ""
    netty: str = ""
    #: what maven/pom.xml pins for this release (its profile `pulsar-<version>`), and why
    pins: str = ""
    #: pulsar-testclient is served (pulsar-perf, `txnbench peer`)
    perf: bool = False
    checked: Checked = field(default_factory=lambda: Checked(date="", resolves=False))

    @property
    def min_java(self) -> int:
        return self.line.min_java

    @property
    def scalable_transactions(self) -> bool:
        return self.line.scalable_transactions

    def supports(self, txn_path: TxnPath) -> bool:
        return self.line.supports(txn_path)

    def components(self) -> dict[str, str]:
        """The versions `jars.Classpath.component_versions()` should find (a --check compares them)."""
        return {k: v for k, v in (("bookkeeper", self.bookkeeper), ("netty", self.netty),
                                  ("pulsar", self.version), ("zookeeper", self.zookeeper)) if v}


#: Brokers of 2.10 to 3.1 refuse to start where they cannot read the NIC's speed
#: (`/sys/class/net/<nic>/speed`, unreadable on this VM: "Unable to read VM NIC speed. You must set
#: [loadBalancerOverrideBrokerNicSpeedGbps] to override it when load balancer is enabled"); 3.2 on
#: do not (the message is gone from their PulsarService). The value only scales the load balancer's
#: bandwidth figures.
NIC_SPEED = MappingProxyType({"loadBalancerOverrideBrokerNicSpeedGbps": 10})
LINE_2_10 = ReleaseLine("2.10", min_java=17, batched_writes=False, scalable_transactions=False, needs=NIC_SPEED)
LINE_2_11 = ReleaseLine("2.11", min_java=17, batched_writes=True, scalable_transactions=False, needs=NIC_SPEED)
LINE_3_0 = ReleaseLine("3.0", min_java=17, batched_writes=True, scalable_transactions=False, needs=NIC_SPEED)
LINE_3_1 = ReleaseLine("3.1", min_java=17, batched_writes=True, scalable_transactions=False, needs=NIC_SPEED)
LINE_3_2 = ReleaseLine("3.2", min_java=17, batched_writes=True, scalable_transactions=False)
LINE_3_3 = ReleaseLine("3.3", min_java=17, batched_writes=True, scalable_transactions=False)
LINE_4_0 = ReleaseLine("4.0", min_java=17, batched_writes=True, scalable_transactions=False)
LINE_5_0 = ReleaseLine("5.0", min_java=21, batched_writes=True, scalable_transactions=True)

PARENT_BOM = "Pulsar's parent POM imported as a BOM (the versions its build aligned)"
NOT_SERVED = "the mirror answers 404 for pulsar-broker {version}'s POM"
#: 2.10.5 to 3.2.0 log through SLF4J 1.7, and their broker POM brings no binding
PARENT_BOM_SLF4J = PARENT_BOM + "; log4j-slf4j-impl added (SLF4J 1.7: the broker's POM brings no binding)"
BOTH_V4 = ("v4", "v4-batched")

PULSAR_5 = PulsarRelease(
    "5.0.1", LINE_5_0, bookkeeper="4.18.2", zookeeper="3.9.5", netty="4.2.17.Final", perf=True,
    pins="BOMs for netty 4.2.17 (4.2.19's epoll natives not served), jackson, grpc, jetty, okhttp (a Gradle-"
         "published POM); BookKeeper 4.18.2's jars copied over 4.18.0's (its parent POM not served); "
         "ZooKeeper 3.9.5 (3.9.6 not served); bc-fips and log4j-slf4j-impl excluded",
    checked=Checked("2026-11-29", resolves=True, starts=("v4", "v4-batched", "v5")))
PULSAR_4_LTS = PulsarRelease(
    "4.0.8", LINE_4_0, bookkeeper="4.17.2", zookeeper="3.9.4", netty="4.1.128.Final", perf=True,
    pins="jetcd-core-shaded and pulsar-opentelemetry at 4.0.7 (4.0.8's not served)",
    checked=Checked("2026-11-29", resolves=True, starts=BOTH_V4))

RELEASES: dict[str, PulsarRelease] = {r.version: r for r in (
    PULSAR_5,
    PulsarRelease("5.0.0", LINE_5_0, checked=Checked("2026-11-29", resolves=False,
                                                     why_not=NOT_SERVED.format(version="5.0.0"))),
    PulsarRelease("4.0.14", LINE_4_0, checked=Checked("2026-11-29", resolves=False,
                                                      why_not=NOT_SERVED.format(version="4.0.14"))),
    PULSAR_4_LTS,
    PulsarRelease("4.0.4", LINE_4_0, checked=Checked("2026-11-29", resolves=False, why_not=(
        "the mirror serves pulsar-broker 4.0.4's POM but not its own server modules at 4.0.4 (404: managed-ledger, "
        "pulsar-broker-common, pulsar-metadata, pulsar-transaction-common, pulsar-transaction-coordinator, "
        "pulsar-websocket, pulsar-functions-worker, pulsar-cli-utils, jetcd-core-shaded, pulsar-opentelemetry); "
        "mvn: \"Failed to read artifact descriptor for org.apache.pulsar:pulsar-websocket:jar:4.0.4\". Pinning "
        "another patch release's modules would not run 4.0.4"))),
    PulsarRelease("4.0.0", LINE_4_0, bookkeeper="4.17.1", zookeeper="3.9.2", netty="4.1.113.Final", pins=PARENT_BOM,
                  checked=Checked("2026-11-29", resolves=True, starts=BOTH_V4)),
    PulsarRelease("3.3.2", LINE_3_3, bookkeeper="4.17.1", zookeeper="3.9.2", netty="4.1.113.Final", pins=PARENT_BOM,
                  checked=Checked("2026-11-29", resolves=True, starts=BOTH_V4)),
    PulsarRelease("3.2.0", LINE_3_2, bookkeeper="4.16.3", zookeeper="3.9.1", netty="4.1.104.Final", pins=PARENT_BOM_SLF4J,
                  checked=Checked("2026-11-29", resolves=True, starts=BOTH_V4)),
    PulsarRelease("3.1.0", LINE_3_1, bookkeeper="4.16.2", zookeeper="3.8.1", netty="4.1.94.Final", pins=PARENT_BOM_SLF4J,
                  checked=Checked("2026-11-29", resolves=True, starts=BOTH_V4)),
    PulsarRelease("3.0.1", LINE_3_0, checked=Checked("2026-11-29", resolves=False,
                                                     why_not=NOT_SERVED.format(version="3.0.1"))),
    PulsarRelease("3.0.0", LINE_3_0, bookkeeper="4.16.1", zookeeper="3.8.1", netty="4.1.89.Final", pins=PARENT_BOM_SLF4J,
                  checked=Checked("2026-11-29", resolves=True, starts=BOTH_V4)),
    PulsarRelease("2.11.0", LINE_2_11, bookkeeper="4.15.3", zookeeper="3.8.0", netty="4.1.86.Final", pins=PARENT_BOM_SLF4J,
                  checked=Checked("2026-11-29", resolves=True, starts=BOTH_V4)),
    PulsarRelease("2.10.6", LINE_2_10, checked=Checked("2026-11-29", resolves=False,
                                                       why_not=NOT_SERVED.format(version="2.10.6"))),
    PulsarRelease("2.10.5", LINE_2_10, bookkeeper="4.14.7", zookeeper="3.6.4", netty="4.1.93.Final", pins=PARENT_BOM_SLF4J,
                  checked=Checked("2026-11-29", resolves=True, starts=("v4",))),
)}

#: One version for all three paths, so the comparison between them is fair.
DEFAULT_RELEASE = PULSAR_5


def path_needs(txn_path: TxnPath) -> str:
    """What a path needs of a release, for messages: PIP-160 (2.11+) or PIP-473 (5.0)."""
    return {TxnPath.V5: "PIP-473 (Pulsar 5.0)", TxnPath.V4_BATCHED: "PIP-160 (Pulsar 2.11 on)"}.get(txn_path, "nothing")


def listed(version: str) -> PulsarRelease:
    """Any release of the table, also one not known to run (what `txnbench releases --check` tries)."""
    try:
        return RELEASES[version]
    except KeyError:
        raise ValueError(f"Pulsar {version} is not in the pulsar target's table of releases "
                         f"(targets/pulsar/versions.py); it lists {', '.join(RELEASES)}") from None


def runnable() -> list[PulsarRelease]:
    """The releases recorded as resolving and starting here, newest first."""
    return [r for r in RELEASES.values() if r.checked.runs]


def release(version: str | None) -> PulsarRelease:
    """The release named `version` (None: the default), if it is known to run; ValueError says why not."""
    if version is None:
        return DEFAULT_RELEASE
    chosen = listed(version)
    if not chosen.checked.runs:
        why = chosen.checked.why_not or "it did not start"
        raise ValueError(f"Pulsar {version} does not run here ({why}); choose one of "
                         f"{', '.join(r.version for r in runnable())} (`txnbench releases` lists them; "
                         f"`txnbench releases --check {version}` tries it again)")
    return chosen
