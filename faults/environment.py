"""What the nemesis can reach in a run: the Toxiproxy API, process control, admin REST,
the coordinator locator and the run's topics; and what is missing, with the reason.

The embedded and compose targets give all of them; the external target has no
process control and usually no Toxiproxy. Admin REST and the coordinator locator
come from `harness.client` (the only package that opens client connections).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from faults.model import CoordinatorLocator, LoadControl, NetworkApi, TopicAdmin
from harness.config import Target
from harness.target import ClusterInfo, CorruptionControl, PowerLossControl, ProcessControl
from harness.txn_paths import TxnPath


class Capability(StrEnum):
    """What a fault needs from the target and the run (a kind's `needs`); here, beside what
    provides each, so the kinds depend on the environment and never the other way round."""

    NETWORK = "network"        # a Toxiproxy API in front of the links
    PROCESSES = "processes"    # kill/start/pause/resume (ProcessControl)
    ADMIN = "admin"            # admin REST for topics and segments
    TOPICS = "topics"          # the run's topic list (the workload topology)
    COORDINATORS = "coordinators"  # a client that can say which broker hosts each coordinator
    LOAD = "load"              # the load process kills and replaces its workers (harness.load_control)
    STORE_FILES = "store-files"    # tear or damage a store's own files (PowerLossControl, CorruptionControl)


def _lacks_store_files(target: Target) -> Mapping[Capability, str]:
    return MappingProxyType({Capability.STORE_FILES: f"cannot run on the {target.value} target (only the embedded "
                             "cluster's stores record what they fsynced, in files txnbench can tear or damage)"})


#: What a target cannot give a fault, known before its cluster exists, and why: the plan leaves such
#: faults out (faults.schedule.plan_run), so one scenario (chaos.yaml's crashes) runs on every target.
TARGET_LACKS: Mapping[Target, Mapping[Capability, str]] = MappingProxyType(
    {target: _lacks_store_files(target) for target in (Target.PULSAR, Target.COMPOSE, Target.EXTERNAL)})


@dataclass
class FaultEnvironment:
    cluster: ClusterInfo
    txn_path: TxnPath
    control: ProcessControl | None = None
    network: NetworkApi | None = None
    admin: TopicAdmin | None = None
    coordinators: CoordinatorLocator | None = None
    load: LoadControl | None = None
    topics: tuple[str, ...] = ()
    missing: dict[Capability, str] = field(default_factory=dict)
    """Why a capability is absent, in words a user can act on."""

    def capabilities(self) -> set[Capability]:
        have = set()
        if self.network is not None:
            have.add(Capability.NETWORK)
        if self.control is not None:
            have.add(Capability.PROCESSES)
        if self.admin is not None:
            have.add(Capability.ADMIN)
        if self.coordinators is not None:
            have.add(Capability.COORDINATORS)
        if self.topics:
            have.add(Capability.TOPICS)
        if self.load is not None:
            have.add(Capability.LOAD)
        if isinstance(self.control, PowerLossControl) and isinstance(self.control, CorruptionControl):
            have.add(Capability.STORE_FILES)
        return have

    def why_missing(self, capability: Capability) -> str:
        default = {
            Capability.NETWORK: "the target has no Toxiproxy API in front of its links",
            Capability.PROCESSES: "the target cannot kill, start or pause processes (external cluster)",
            Capability.ADMIN: "no admin REST client is available",
            Capability.COORDINATORS: "no client is available to locate the transaction coordinators",
            Capability.TOPICS: "the run has no workload topology to take topics from",
            Capability.LOAD: "the load runs in one process (load.workers 0): there is no worker to kill; "
                             "set load.workers to 2 or more",
            Capability.STORE_FILES: "the target cannot tear or damage a store's files (only the embedded "
                                    "cluster's stores record what they fsynced)",
        }
        return self.missing.get(capability, default[capability])

    def is_running(self) -> Callable[[str], bool] | None:
        return self.control.is_running if self.control is not None else None

    def coordinator_brokers(self) -> Callable[[], Mapping[int, str]] | None:
        return self.coordinators.coordinator_brokers if self.coordinators is not None else None

    def owner_of(self) -> Callable[[str], str] | None:
        """A topic's (partition's, segment's) owner: its broker's service URL."""
        return self.coordinators.owner_broker if self.coordinators is not None else None

    def segments_of(self) -> Callable[[str], Sequence[str]] | None:
        """v5: a topic's active segments; v4: its partitions, or the topic itself."""
        admin = self.admin
        if admin is None:
            return None
        if self.txn_path is TxnPath.V5:
            return admin.active_segments

        def partitions(topic: str) -> list[str]:
            count = admin.partitions(topic)
            return [f"{topic}-partition-{i}" for i in range(count)] if count > 0 else [topic]

        return partitions

    def close(self) -> None:
        for part in (self.network, self.admin, self.coordinators, self.load):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()


def topology_topics(topology: Any) -> tuple[str, ...]:
    """The logical topics of the run's workload topology, in its order.

    Accepts what `workloads.topology.plan()` returns (a `Topology`, whose `topics` are
    names) or its `to_dict()` form; items may also be objects or mappings with a `name`.
    """
    if topology is None:
        return ()
    topics: Any = topology.get("topics") if isinstance(topology, Mapping) else getattr(topology, "topics", None)
    if topics is None and hasattr(topology, "to_dict"):
        topics = topology.to_dict().get("topics")
    if topics is None:
        return ()
    return tuple(_topic_name(t) for t in topics)


def _topic_name(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        return str(item.get("name") or item.get("topic"))
    return str(getattr(item, "name", None) or item.topic)


def for_run(cluster: ClusterInfo, txn_path: TxnPath, control: ProcessControl | None, topics: tuple[str, ...],
            *, operation_timeout_s: float = 10.0, load: LoadControl | None = None) -> FaultEnvironment:
    """The real environment of a run: clients built from the cluster's URLs; `load` when the
    run's load process has workers it can kill and replace."""
    from faults.admin import make_topic_admin
    from faults.coordinators import make_coordinator_locator
    from harness.toxiproxy.client import ToxiproxyClient

    env = FaultEnvironment(cluster=cluster, txn_path=txn_path, control=control, topics=topics, load=load)
    if cluster.toxiproxy_url:
        env.network = ToxiproxyClient(cluster.toxiproxy_url, timeout_s=operation_timeout_s)
    else:
        env.missing[Capability.NETWORK] = (f"the {cluster.target} target has no Toxiproxy API in front of "
                                           "its links")
    if control is None:
        env.missing[Capability.PROCESSES] = f"the {cluster.target} target cannot kill or pause processes"
    env.admin, reason = make_topic_admin(cluster, control, timeout_s=operation_timeout_s)
    if reason:
        env.missing[Capability.ADMIN] = reason
    env.coordinators = make_coordinator_locator(cluster, txn_path, timeout_s=operation_timeout_s)
    return env
