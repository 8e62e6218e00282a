"""A real cluster is ready when a transaction commits on it, not when its ports answer.

Why: a broker answers `/admin/v2/brokers/ready` long before the coordinators of
`transaction_coordinator_assign` are loaded (v4) or elected (v5); a run started then
fails its first transactions and blames the path. So readiness is one real round
trip on the cluster's path, through the proxied client addresses the run will use:
open a transaction, publish one message in it, commit. Retried with a bounded backoff
until the deadline; the error names the last failure.
"""

from __future__ import annotations

import time

from harness.client import PulsarClient
from harness.errors import EnvironmentProblem, OperationError, TxnbenchError
from harness.target import ClusterInfo
from harness.txn_paths import TxnPath

READY_TOPIC = {TxnPath.V5: "topic://public/default/txnbench-ready",
               TxnPath.V4: "persistent://public/default/txnbench-ready"}
REQUEST_TIMEOUT_S = 10.0
BACKOFF_S = (0.5, 4.0)


def transaction_round_trip(cluster: ClusterInfo, deadline: float) -> int:
    """Commit one transaction holding one message; returns the attempts it took."""
    v5 = cluster.txn_path is TxnPath.V5
    topic = READY_TOPIC[TxnPath.V5 if v5 else TxnPath.V4]
    pause, attempts = BACKOFF_S[0], 0
    last: BaseException | None = None
    while True:
        attempts += 1
        try:
            with PulsarClient(cluster.service_url, txn_path="v5" if v5 else "v4",
                              operation_timeout_s=REQUEST_TIMEOUT_S, listener_name=cluster.listener_name) as client:
                producer = client.create_producer(topic)
                txn = client.new_transaction(timeout_s=60)
                producer.send(b'{"v": "ready", "i": [], "p": ""}', txn=txn)
                txn.commit()
                return attempts
        except (OperationError, TxnbenchError, OSError) as err:
            last = err
        if time.monotonic() + pause >= deadline:
            raise EnvironmentProblem(
                f"no transaction committed on the {cluster.txn_path.value} path within the start-up timeout "
                f"({attempts} attempts; last error: {type(last).__name__}: {last}); see the brokers' logs")
        time.sleep(pause)
        pause = min(pause * 2, BACKOFF_S[1])
