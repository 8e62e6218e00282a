"""The topics and subscriptions of one run, planned before anything is created.

Theory of operation. Every run gets its own topics, named after the run id inside
`workload.namespace`, so runs never see each other's messages and the drain knows
exactly what to read. The plan depends only on the config and the run id: the
orchestrator plans it, `orchestrator.load.setup.prepare` creates it, the load process
rebuilds it from the load spec (`Topology.from_dict`), and the drain reads it.

Each workload kind owns a family of topics, by role:

| role | topics | subscriptions |
|---|---|---|
| `atomic` | `<run>-ap-<i>` | `verify` (Failover) when the run has verifiers |
| `ctp-input` | `<run>-ctp-in-<i>` | `ctp` (Shared): the pipeline's input; on the last one `ctp` is Failover when `workload.ctp_cumulative_users` > 0 (its users ack cumulatively) |
| `ctp-output` | `<run>-ctp-out-<i>` | `verify` (Failover) when the run has verifiers |
| `ack` | `<run>-ack-<i>` | `acks` (Shared): transactional acks, consumers that conflict |

with `i < workload.topics`. A `mixed` workload has the families of every kind with a
positive weight. On `v4` and `v4-batched` topics are `persistent://` (partitioned when
`workload.partitions`, which follows `workload.participants`, is > 0); on `v5` they are
`topic://` scalable topics with as many initial segments (`workload.participants`, or
`workload.segments` where a scenario sets it apart).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from harness.config import RunConfig, WorkloadKind
from harness.txn_paths import TxnPath

TOPOLOGY_VERSION = 1


class TopicRole(StrEnum):
    ATOMIC = "atomic"
    CTP_INPUT = "ctp-input"
    CTP_OUTPUT = "ctp-output"
    ACK = "ack"


class SubscriptionRole(StrEnum):
    VERIFY = "verify"        # the verifying consumer: records everything it receives
    CTP = "ctp"              # consume-transform-produce inputs
    ACKS = "acks"            # ack-only: transactional acks by consumers that conflict


class SubType(StrEnum):
    """Subscription types the workloads use (Pulsar's names)."""

    SHARED = "Shared"
    FAILOVER = "Failover"


_STEMS = {TopicRole.ATOMIC: "ap", TopicRole.CTP_INPUT: "ctp-in", TopicRole.CTP_OUTPUT: "ctp-out",
          TopicRole.ACK: "ack"}
_ROLES_OF_KIND = {
    WorkloadKind.ATOMIC_PRODUCE: (TopicRole.ATOMIC,),
    WorkloadKind.CONSUME_TRANSFORM_PRODUCE: (TopicRole.CTP_INPUT, TopicRole.CTP_OUTPUT),
    WorkloadKind.ACK_ONLY: (TopicRole.ACK,),
}
_SUBSCRIPTIONS_OF_ROLE = {
    TopicRole.CTP_INPUT: (SubscriptionRole.CTP, SubType.SHARED),
    TopicRole.ACK: (SubscriptionRole.ACKS, SubType.SHARED),
}
_VERIFIED_ROLES = (TopicRole.ATOMIC, TopicRole.CTP_OUTPUT)


@dataclass(frozen=True)
class TopicPlan:
    """One logical topic: its full name, its role, and how it is split."""

    name: str
    role: TopicRole
    partitions: int = 0     # v4: 0 = not partitioned
    segments: int = 0       # v5: initial segments of the scalable topic

    @property
    def local_name(self) -> str:
        """The last part of the name (`<run>-ap-0`)."""
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class SubscriptionPlan:
    topic: str
    name: str
    role: SubscriptionRole
    sub_type: SubType


@dataclass(frozen=True)
class Topology:
    """The run's topics and subscriptions, in a fixed order."""

    run_id: str
    txn_path: TxnPath
    namespace: str
    topic_plans: tuple[TopicPlan, ...]
    subscription_plans: tuple[SubscriptionPlan, ...]

    @property
    def topics(self) -> list[str]:
        return [t.name for t in self.topic_plans]

    @property
    def subscriptions(self) -> list[tuple[str, str]]:
        return [(s.topic, s.name) for s in self.subscription_plans]

    def topics_for(self, role: TopicRole) -> list[str]:
        return [t.name for t in self.topic_plans if t.role is role]

    def subscriptions_for(self, role: SubscriptionRole) -> list[SubscriptionPlan]:
        return [s for s in self.subscription_plans if s.role is role]

    def ctp_inputs(self, *, cumulative: bool) -> list[str]:
        """The input topics of consume-transform-produce users that ack cumulatively (their `ctp`
        subscription is Failover) or individually (Shared)."""
        wanted = SubType.FAILOVER if cumulative else SubType.SHARED
        return [s.topic for s in self.subscriptions_for(SubscriptionRole.CTP) if s.sub_type is wanted]

    def subscription_on(self, topic: str, role: SubscriptionRole) -> SubscriptionPlan:
        for sub in self.subscription_plans:
            if sub.topic == topic and sub.role is role:
                return sub
        raise KeyError(f"the topology has no {role.value} subscription on {topic}")

    def topic_plan(self, name: str) -> TopicPlan:
        for topic in self.topic_plans:
            if topic.name == name:
                return topic
        raise KeyError(f"{name} is not a topic of run {self.run_id}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": TOPOLOGY_VERSION,
            "run_id": self.run_id,
            "path": self.txn_path.value,
            "namespace": self.namespace,
            "topics": self.topics,
            "subscriptions": [{"topic": t, "subscription": s} for t, s in self.subscriptions],
            "topic_plans": [{"name": t.name, "role": t.role.value, "partitions": t.partitions,
                             "segments": t.segments} for t in self.topic_plans],
            "subscription_plans": [{"topic": s.topic, "name": s.name, "role": s.role.value,
                                    "sub_type": s.sub_type.value} for s in self.subscription_plans],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Rebuild a topology from `to_dict()` output (the load spec).

        Raises:
            ValueError: the data is not a topology this version wrote.
        """
        try:
            if data.get("version") != TOPOLOGY_VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {TOPOLOGY_VERSION}")
            topics = tuple(TopicPlan(str(t["name"]), TopicRole(t["role"]), int(t["partitions"]),
                                     int(t["segments"])) for t in data["topic_plans"])
            subs = tuple(SubscriptionPlan(str(s["topic"]), str(s["name"]), SubscriptionRole(s["role"]),
                                          SubType(s["sub_type"])) for s in data["subscription_plans"])
            topology = cls(str(data["run_id"]), TxnPath(data["path"]), str(data["namespace"]), topics, subs)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a txnbench topology ({type(err).__name__}: {err}); "
                             "was the load spec written by this version?") from None
        names = set(topology.topics)
        for sub in subs:
            if sub.topic not in names:
                raise ValueError(f"not a txnbench topology: subscription {sub.name!r} names an unknown "
                                 f"topic {sub.topic}")
        return topology


def workload_kinds(config: RunConfig) -> list[WorkloadKind]:
    """The concrete kinds a run's users are of (a `mixed` run: those with a positive weight)."""
    workload = config.workload
    if workload.kind is WorkloadKind.MIXED:
        return [k for k in _ROLES_OF_KIND if workload.mix.get(k, 0) > 0]
    return [workload.kind]


NEEDS_FEEDERS = (WorkloadKind.CONSUME_TRANSFORM_PRODUCE, WorkloadKind.ACK_ONLY)


class HelperUsers(NamedTuple):
    """The fixed-count users of one load process, beside the weighted transactional ones."""

    feeders: int
    verifiers: int
    ctp_cumulative: int


def helper_users_per_process(config: RunConfig) -> HelperUsers:
    """The users each load process runs beside the weighted transactional ones: the
    workloads that consume need feeders, verifying consumers exist only where the
    topology has a verified subscription, and cumulative consume-transform-produce users
    only where it has their Failover input. Pure, so the count is known without Locust.
    Fixed-count, so a Failover subscription has a consumer in every load process (one
    active, the others on standby) whatever the mix draws."""
    workload = config.workload
    kinds = workload_kinds(config)
    feeders = workload.feeders if any(kind in NEEDS_FEEDERS for kind in kinds) else 0
    topology = plan(config, "probe")
    verified = bool(topology.subscriptions_for(SubscriptionRole.VERIFY))
    cumulative = workload.ctp_cumulative_users if topology.ctp_inputs(cumulative=True) else 0
    return HelperUsers(max(0, feeders), max(0, workload.verifiers) if verified else 0, cumulative)


def fixed_users(config: RunConfig, processes: int | None = None) -> int:
    """Feeders, verifiers and cumulative consume-transform-produce users over all load processes
    (local workers and remote ones by default): Locust's fixed-count users, started on top of
    `load.users`."""
    processes = config.load.processes if processes is None else max(1, processes)
    return sum(helper_users_per_process(config)) * processes


def topic_name(txn_path: TxnPath, namespace: str, local: str) -> str:
    domain = "topic" if txn_path.uses_scalable_topics else "persistent"
    return f"{domain}://{namespace}/{local}"


def plan(config: RunConfig, run_id: str) -> Topology:
    """The topics and subscriptions of run `run_id` (see the module docstring)."""
    workload = config.workload
    txn_path = config.path
    topics: list[TopicPlan] = []
    subs: list[SubscriptionPlan] = []
    for kind in workload_kinds(config):
        for role in _ROLES_OF_KIND[kind]:
            for index in range(workload.topics):
                name = topic_name(txn_path, workload.namespace, f"{run_id}-{_STEMS[role]}-{index}")
                if txn_path.uses_scalable_topics:
                    topics.append(TopicPlan(name, role, partitions=0, segments=workload.v5_segments))
                else:
                    topics.append(TopicPlan(name, role, partitions=workload.v4_partitions, segments=0))
                if role in _SUBSCRIPTIONS_OF_ROLE:
                    sub_role, sub_type = _SUBSCRIPTIONS_OF_ROLE[role]
                    if (role is TopicRole.CTP_INPUT and workload.ctp_cumulative_users
                            and index == workload.topics - 1):
                        sub_type = SubType.FAILOVER
                    subs.append(SubscriptionPlan(name, sub_role.value, sub_role, sub_type))
                if role in _VERIFIED_ROLES and workload.verifiers > 0:
                    subs.append(SubscriptionPlan(name, SubscriptionRole.VERIFY.value, SubscriptionRole.VERIFY,
                                                 SubType.FAILOVER))
    return Topology(run_id, txn_path, workload.namespace, tuple(topics), tuple(subs))
