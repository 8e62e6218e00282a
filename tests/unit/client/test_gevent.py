"""The client under gevent's monkey-patching, as Locust runs it: many greenlets, one process.

The fake cluster runs in this (unpatched) test process; a child process patches
everything first, then drives the client from 50 greenlets and reports what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.wire import CommandType as T
from tests.unit.client.fake_broker import FakeCluster

REPO = Path(__file__).resolve().parents[3]

SCRIPT = r"""
from gevent import monkey
monkey.patch_all()

import json, sys, time
import gevent
from harness.client import PulsarClient

url = sys.argv[1]
client = PulsarClient(url, operation_timeout_s=10)
producer = client.create_producer("persistent://public/default/greenlets")
consumer = client.subscribe("persistent://public/default/idle", "idle", sub_type="Shared")

# 1. blocking waits yield: 50 concurrent 0.5 s receives take ~0.5 s, not 25 s
started = time.monotonic()
gevent.joinall([gevent.spawn(consumer.receive, 0.5) for _ in range(50)], timeout=30)
concurrent_wait_s = time.monotonic() - started

# 2. 50 greenlets, each 4 transactions of 2 sends
results = {"committed": 0, "errors": []}

def worker(index):
    for round_ in range(4):
        try:
            txn = client.new_transaction(timeout_s=30)
            producer.send(f"{index}-{round_}-a".encode(), key=str(index), txn=txn)
            producer.send(f"{index}-{round_}-b".encode(), key=str(index), txn=txn)
            txn.commit()
            results["committed"] += 1
        except Exception as exc:
            results["errors"].append(repr(exc))

started = time.monotonic()
gevent.joinall([gevent.spawn(worker, i) for i in range(50)], timeout=60)
elapsed = time.monotonic() - started
reader = client.create_reader("persistent://public/default/greenlets")
read = reader.read_to_end(20)
client.close()
print(json.dumps({
    "patched": monkey.is_module_patched("socket") and monkey.is_module_patched("threading"),
    "concurrent_wait_s": concurrent_wait_s,
    "committed": results["committed"],
    "errors": results["errors"][:5],
    "elapsed_s": elapsed,
    "read": len(read),
}))
"""


def test_client_runs_cooperatively_under_gevent_with_many_greenlets() -> None:
    cluster = FakeCluster(1, tc_count=2)
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-c", SCRIPT, cluster.url], capture_output=True,
                              text=True, timeout=120, cwd=REPO, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        cluster.stop()
    assert report["patched"]
    assert report["concurrent_wait_s"] < 5.0, report  # 50 x 0.5 s waits overlapped
    assert report["errors"] == []
    assert report["committed"] == 200
    assert report["read"] == 400
    assert len(cluster.commands(T.END_TXN)) == 200
