"""A terminated topic loaded again, on real Pulsar 2.10.5: our reader against the broker's answer.

What it proves: on 2.10.5 (docs/findings/historical/terminated-topic-unreadable-after-reload.md,
apache/pulsar#24063) a terminated partitioned topic that was unloaded closes the connection on
GET_LAST_MESSAGE_ID, the reader reports that as `LastMessageIdLostError` (not as any lost
connection), and a read to REACHED_END_OF_TOPIC gets every message, which is what the drain does
with such a topic. Slow (a 2.10.5 cluster start, about a minute once the jars are cached).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from harness.client import LastMessageIdLostError, PulsarClient
from harness.client.admin import AdminClient
from tests.cluster.test_run_scenarios import txnbench
from tests.prerequisites import or_skip, real_pulsar_ready

pytestmark = [pytest.mark.pulsar, pytest.mark.slow, pytest.mark.timeout(1500)]

RELEASE = "2.10.5"
UP_TIMEOUT_S = 1200


@pytest.fixture(scope="module")
def old_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with or_skip():
        real_pulsar_ready(RELEASE)
    directory = tmp_path_factory.mktemp("pulsar-2.10.5")
    env = {"TXNBENCH_CLUSTER_DIR": str(directory)}
    up = txnbench("cluster", "up", "--target", "pulsar", "--pulsar-version", RELEASE, "--path", "v4",
                  env=env, timeout=UP_TIMEOUT_S)
    try:
        assert up.returncode == 0, f"cluster up failed:\n{up.stderr[-6000:]}"
        yield json.loads(txnbench("cluster", "status", "--json", env=env).stdout)
    finally:
        down = txnbench("cluster", "down", env=env)
        assert down.returncode == 0, down.stderr[-3000:]
        left = [p for p in psutil.process_iter(["cmdline"])
                if any(str(directory) in part for part in (p.info["cmdline"] or []))]
        assert not left, f"processes left after cluster down: {[p.pid for p in left]}"


def test_a_reloaded_terminated_topic_refuses_its_last_message_id_and_reads_to_its_end(
        old_cluster: dict[str, Any]) -> None:
    admin = AdminClient(old_cluster["admin_url"])
    topic = f"persistent://public/default/terminated-{uuid.uuid4().hex[:6]}"
    admin.create_partitioned_topic(topic, 2)
    with PulsarClient(old_cluster["service_url"], txn_path="v4", operation_timeout_s=10,
                      listener_name="external") as client:
        producer = client.create_producer(topic)
        sent = {f"v{i}" for i in range(10)}
        for value in sorted(sent):
            producer.send(value.encode(), key=value)
        producer.close()
        subscription = client.subscribe(topic, "keep", sub_type="Exclusive")   # the data stays
        subscription.close()
        admin.terminate_partitioned_topic(topic)
        for index in range(2):
            admin.unload_topic(f"{topic}-partition-{index}")
        reader = client.create_reader(topic)
        try:
            with pytest.raises(LastMessageIdLostError):
                reader.read_to_end(15)
            read = reader.read_to_end(60, ask_last=False)
        finally:
            reader.close()
    assert {m.data.decode() for m in read} == sent
