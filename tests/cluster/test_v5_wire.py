"""The v5 commands at the wire level, as a Pulsar 5.0 (v5) client sends them.

* CONNECTED announces `supports_scalable_topics` and `supports_tc_metadata_discovery`;
* WATCH_TC_ASSIGNMENTS answers a full snapshot (parallelism 4, a leader for each);
  TC_CLIENT_CONNECT with `scalable` is accepted by the leader only;
* SCALABLE_TOPIC_LOOKUP answers the DAG and pushes the next one after a split on any
  broker; SCALABLE_TOPIC_CLOSE ends the pushes;
* WATCH_SCALABLE_TOPICS gives a snapshot, then a diff when a topic is created;
* a `topic://` name in LOOKUP is refused with the way to resolve it, and
  SCALABLE_TOPIC_SUBSCRIBE with the alternative.
"""

from __future__ import annotations

import functools
import socket
from typing import Any

import pytest

from harness.wire import Command, CommandType, Connection, Role, ServerError, commands
from tests.cluster.conftest import ClusterFactory, WireClient
from tests.cluster.test_v5_helpers import admin_of, start_v5


def connect_tc(request_id: int, tc_id: int) -> Command:
    return commands.tc_client_connect_request(request_id, tc_id, scalable=True)


def connected_flags(url: str) -> Any:
    """The FeatureFlags of the broker's CONNECTED, for a client announcing the v5 features."""
    host, port = url.removeprefix("pulsar://").rsplit(":", 1)
    conn = Connection(Role.CLIENT)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(conn.send(commands.connect("wire-v5", feature_flags=[
            "supports_scalable_topics", "supports_tc_metadata_discovery"])))
        for _ in range(100):   # bounded: CONNECTED is the first answer
            data = sock.recv(1 << 16)
            if not data:
                break
            conn.receive_data(data)
            for event in conn.events():
                if isinstance(event, Command) and event.type is CommandType.CONNECTED:
                    return event.body.feature_flags
    raise AssertionError("no CONNECTED")


def test_v5_discovery_and_scalable_topic_commands(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory)
    admin = admin_of(cluster)
    urls = {n: cluster.records[n].service_url or "" for n in ("broker-0", "broker-1")}
    flags = connected_flags(urls["broker-0"])
    assert flags.supports_scalable_topics and flags.supports_tc_metadata_discovery
    wire = WireClient(urls["broker-0"])
    try:

        wire.send(commands.watch_tc_assignments(11))
        snapshot = wire.wait(lambda c: c.type is CommandType.WATCH_TC_ASSIGNMENTS_UPDATE
                             and len(c.body.snapshot.assignments) == 4, 20).body.snapshot
        assert snapshot.parallelism == 4
        leaders = {a.tc_id: a.broker_service_url for a in snapshot.assignments}
        assert set(leaders.values()) <= set(urls.values())
        for tc_id, url in leaders.items():
            other = next(u for u in urls.values() if u != url)
            for target, ok in ((url, True), (other, False)):
                client = WireClient(target)
                try:
                    answer = client.request(functools.partial(connect_tc, tc_id=tc_id),
                                            CommandType.TC_CLIENT_CONNECT_RESPONSE)
                finally:
                    client.close()
                error = commands.error_of(answer)
                assert (error is None) is ok, commands.describe(answer)
                if not ok:
                    assert error is not None and error[0] is ServerError.TransactionCoordinatorNotFound

        topic = "topic://public/default/wire-dag"
        wire.send(commands.watch_scalable_topics(12, "public/default"))
        first = wire.wait(lambda c: c.type is CommandType.WATCH_SCALABLE_TOPICS_UPDATE)
        assert topic not in first.body.snapshot.topics
        admin.create_scalable_topic(topic, 2)
        diff = wire.wait(lambda c: c.type is CommandType.WATCH_SCALABLE_TOPICS_UPDATE, 15)
        assert list(diff.body.diff.added) == [topic]

        wire.send(commands.scalable_topic_lookup(21, topic))
        update = wire.wait(lambda c: c.type is CommandType.SCALABLE_TOPIC_UPDATE and c.body.session_id == 21)
        dag = update.body.dag
        assert dag.epoch == 0 and [(s.hash_start, s.hash_end) for s in dag.segments] == [(0, 0x7FFF), (0x8000, 0xFFFF)]
        assert update.body.resolved_topic_name == topic
        admin_of(cluster, skip=["broker-0"]).split_segment(topic, 1)   # on the other broker
        pushed = wire.wait(lambda c: c.type is CommandType.SCALABLE_TOPIC_UPDATE and c.body.dag.epoch == 1, 15)
        states = {s.segment_id: (s.state, tuple(s.parent_ids), tuple(s.child_ids)) for s in pushed.body.dag.segments}
        assert states[1] == (1, (), (2, 3)) and states[2][1] == (1,) and states[3][1] == (1,)
        wire.send(commands.scalable_topic_close(21))
        admin.merge_segments(topic, 2, 3)
        with pytest.raises(TimeoutError):
            wire.wait(lambda c: c.type is CommandType.SCALABLE_TOPIC_UPDATE, 1.5)

        # Java's DagWatchClient looks the topic:// name up first (found by tests/cluster/test_java_txn_check.py)
        looked_up = wire.request(lambda r: commands.lookup(topic, r), CommandType.LOOKUP_RESPONSE)
        assert commands.error_of(looked_up) is None and looked_up.body.brokerServiceUrl.startswith("pulsar://")
        missing = wire.request(lambda r: commands.partitioned_metadata(topic, r), CommandType.PARTITIONED_METADATA_RESPONSE)
        error = commands.error_of(missing)
        assert error is not None and error[0] is ServerError.NotAllowedError and "SCALABLE_TOPIC_LOOKUP" in error[1]
        refused = wire.request(lambda r: commands.scalable_topic_subscribe(r, topic, "s", "c", 1),
                               CommandType.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE)
        assert commands.error_of(refused) is not None
        wire.send(commands.scalable_topic_lookup(22, "topic://public/default/never-made", create_if_missing=False))
        absent = wire.wait(lambda c: c.type is CommandType.SCALABLE_TOPIC_UPDATE and c.body.session_id == 22)
        absent_error = commands.error_of(absent)
        assert absent_error is not None and absent_error[0] is ServerError.TopicNotFound
    finally:
        wire.close()
