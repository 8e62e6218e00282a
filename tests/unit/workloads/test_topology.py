"""The run's topology: names, domains, splits, subscriptions, and the round trip through the spec."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from harness.config import load_scenario
from harness.txn_paths import TxnPath
from tests.unit.workloads.conftest import scenario
from workloads.topology import SubscriptionRole, SubType, TopicRole, Topology, plan


def test_atomic_produce_on_v4_partitioned() -> None:
    config = scenario("workload: {kind: atomic-produce, topics: 3, partitions: 4, topics_per_txn: 2}")
    topology = plan(config, "20260101-000000-x-v4")
    assert topology.topics == [f"persistent://public/txnbench/20260101-000000-x-v4-ap-{i}" for i in range(3)]
    assert all(t.partitions == 4 and t.segments == 0 for t in topology.topic_plans)
    assert topology.subscriptions == [(t, "verify") for t in topology.topics]
    assert all(s.sub_type is SubType.FAILOVER for s in topology.subscription_plans)


def test_v5_uses_scalable_topics_with_segments() -> None:
    config = scenario("path: v5\nworkload: {kind: ack-only, topics: 2, segments: 3, topics_per_txn: 1}")
    topology = plan(config, "r")
    assert topology.topics == ["topic://public/txnbench/r-ack-0", "topic://public/txnbench/r-ack-1"]
    assert all(t.segments == 3 and t.partitions == 0 for t in topology.topic_plans)
    assert topology.subscriptions == [(t, "acks") for t in topology.topics]
    assert {s.sub_type for s in topology.subscription_plans} == {SubType.SHARED}


def test_ctp_has_inputs_with_the_pipeline_subscription_and_verified_outputs() -> None:
    config = scenario("workload: {kind: consume-transform-produce, topics: 1, topics_per_txn: 1}")
    topology = plan(config, "r")
    assert topology.topics_for(TopicRole.CTP_INPUT) == ["persistent://public/txnbench/r-ctp-in-0"]
    assert topology.topics_for(TopicRole.CTP_OUTPUT) == ["persistent://public/txnbench/r-ctp-out-0"]
    assert topology.subscriptions == [("persistent://public/txnbench/r-ctp-in-0", "ctp"),
                                      ("persistent://public/txnbench/r-ctp-out-0", "verify")]


def test_mixed_has_the_families_of_weighted_kinds_only() -> None:
    config = scenario("workload: {kind: mixed, topics: 2, mix: {atomic-produce: 1, ack-only: 0, "
                      "consume-transform-produce: 2}}")
    roles = {t.role for t in plan(config, "r").topic_plans}
    assert roles == {TopicRole.ATOMIC, TopicRole.CTP_INPUT, TopicRole.CTP_OUTPUT}


def test_no_verify_subscriptions_without_verifiers() -> None:
    config = scenario("workload: {kind: atomic-produce, verifiers: 0}")
    assert plan(config, "r").subscriptions == []


def test_round_trip_through_json_and_lookups() -> None:
    config = load_scenario("bench").for_path(TxnPath.V5)
    topology = plan(config, "run-7")
    again = Topology.from_dict(json.loads(json.dumps(topology.to_dict())))
    assert again == topology
    data = topology.to_dict()
    assert data["topics"] == topology.topics
    assert data["subscriptions"][0] == {"topic": topology.subscriptions[0][0],
                                        "subscription": topology.subscriptions[0][1]}
    ack_topic = topology.topics_for(TopicRole.ACK)[0]
    assert topology.subscription_on(ack_topic, SubscriptionRole.ACKS).name == "acks"
    with pytest.raises(KeyError, match="no verify subscription"):
        topology.subscription_on(ack_topic, SubscriptionRole.VERIFY)


@pytest.mark.parametrize("damage", [
    lambda d: d.pop("topic_plans"),
    lambda d: d.update(version=99),
    lambda d: d["topic_plans"][0].update(role="bogus"),
    lambda d: d["subscription_plans"][0].update(topic="persistent://x/y/z"),
])
def test_a_damaged_topology_is_refused_with_a_reason(damage: Callable[[dict[str, Any]], object]) -> None:
    data = plan(load_scenario("mixed"), "r").to_dict()
    damage(data)
    with pytest.raises(ValueError, match="topology"):
        Topology.from_dict(data)


def test_every_shipped_workload_scenario_plans_unique_topics() -> None:
    for name in ("atomic-produce", "consume-transform-produce", "ack-only", "mixed", "bench"):
        config = load_scenario(name)
        for path in TxnPath:
            topics = plan(config.for_path(path), "r").topics
            assert len(topics) == len(set(topics)) > 0, name


def test_workloads_that_consume_need_feeders() -> None:
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"workload\.feeders: .*set feeders to 1 or more"):
        scenario("workload: {kind: ack-only, feeders: 0, topics_per_txn: 1}")
    with pytest.raises(ConfigError, match=r"workload\.feeders"):
        scenario("workload: {kind: mixed, feeders: 0, mix: {atomic-produce: 1, consume-transform-produce: 1}}")
    assert scenario("workload: {kind: atomic-produce, feeders: 0}").workload.feeders == 0
    with pytest.raises(ConfigError, match=r"workload\.conflict_ratio: 2\.0 is above the maximum"):
        scenario("workload: {conflict_ratio: 2}")
