"""Before the load: create the run's namespace, topics and subscriptions; wait for transactions.

`prepare()` creates, through the admin REST API (harness.client.admin), the tenant and
namespace (both may exist already), every topic of the topology (`persistent://`,
partitioned when planned, or `topic://` scalable topics with their initial segments),
and, except on the embedded cluster (which never deletes data ledgers), asks for
infinite retention on the namespace so the drain's final reads still find messages
every subscription acknowledged (real Pulsar deletes consumed ledgers by default; a
broker that refuses the call is noted, not fatal). Subscriptions are created with the client
(subscribe, then close) before any message is sent, so they start at the beginning.

`wait_transactions_ready()` polls, with a bounded backoff, until one transaction can
be opened and committed on the run's path: the coordinators are assigned and loaded.

Every failure names what failed and what to check.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests

from harness.config import RunConfig
from harness.errors import EnvironmentProblem, OperationError, TxnbenchError
from harness.target import ClusterInfo
from workloads.topology import Topology

log = logging.getLogger(__name__)

T = TypeVar("T")

ADMIN_ATTEMPTS = 5
ADMIN_RETRY_PAUSE_S = 0.5
READY_BACKOFF_S = (0.2, 2.0)
READY_REQUEST_TIMEOUT_S = 5.0
_sleep = time.sleep          # backoff pauses (tests replace it)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _retry(what: str, call: Callable[[], T]) -> T:
    """Admin calls right after start-up may meet a broker still loading: retry 5xx and no-answer."""
    from harness.client.admin import AdminError

    for attempt in range(1, ADMIN_ATTEMPTS + 1):
        try:
            return call()
        except AdminError as err:
            transient = err.status is None or err.status >= 500
            if not transient or attempt == ADMIN_ATTEMPTS:
                raise EnvironmentProblem(f"setup: {what} failed: {err}") from None
            _sleep(ADMIN_RETRY_PAUSE_S * attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def _set_infinite_retention(admin_url: str, tenant: str, namespace: str) -> str | None:
    """POST the namespace's retention policy (-1/-1); returns why it was not set, or None."""
    url = f"{admin_url.rstrip('/')}/admin/v2/namespaces/{tenant}/{namespace}/retention"
    try:
        response = requests.post(url, json={"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}, timeout=30)
    except requests.RequestException as err:
        return f"no answer ({err})"
    if response.status_code in (200, 204):
        return None
    return f"HTTP {response.status_code}"


def prepare(cluster: ClusterInfo, config: RunConfig, topology: Topology, *, admin: Any = None,
            client: Any = None) -> None:
    """Create the namespace, topics and subscriptions of `topology` (see the module docstring).

    `admin` and `client` default to `AdminClient(cluster.admin_url)` and a new
    `PulsarClient` (tests pass fakes).
    """
    tenant, namespace = topology.namespace.split("/")
    if cluster.admin_url or admin is not None:
        if admin is None:
            from harness.client.admin import AdminClient

            admin = AdminClient(cluster.admin_url, timeout_s=30.0)
        _create_with_admin(admin, cluster.admin_url, cluster.target, tenant, namespace, topology)
    else:
        needs_admin = [t.name for t in topology.topic_plans if t.partitions > 0 or t.segments > 0]
        if needs_admin:
            raise EnvironmentProblem(
                f"setup: {needs_admin[0]} must be created through the admin REST API (partitioned or "
                "scalable), and the cluster has no admin URL; pass --admin-url http://HOST:8080")
        _say(f"setup: no admin URL; the {len(topology.topics)} topics are created on first use "
             "(the broker must allow topic auto-creation)")
    _create_subscriptions(cluster, config, topology, client)


def _create_with_admin(admin: Any, admin_url: str, target: str, tenant: str, namespace: str,
                       topology: Topology) -> None:
    if tenant not in _retry("listing tenants", admin.tenants):
        _retry(f"creating tenant {tenant}", lambda: admin.create_tenant(tenant))
    _retry(f"creating namespace {tenant}/{namespace}", lambda: admin.create_namespace(tenant, namespace))
    # The embedded broker never deletes data ledgers (embedded/README.md); elsewhere ask for it.
    why = None if target == "embedded" else (
        _set_infinite_retention(admin_url, tenant, namespace) if admin_url else "no admin URL")
    if why is not None:
        _say(f"setup: could not set infinite retention on {tenant}/{namespace} ({why}); on a broker that "
             "deletes consumed ledgers the final reads may miss acknowledged messages")
    for plan in topology.topic_plans:
        if plan.segments > 0:
            _retry(f"creating scalable topic {plan.name}",
                   lambda p=plan: admin.create_scalable_topic(p.name, p.segments))  # type: ignore[misc]
        elif plan.partitions > 0:
            _retry(f"creating partitioned topic {plan.name}",
                   lambda p=plan: admin.create_partitioned_topic(p.name, p.partitions))  # type: ignore[misc]
        else:
            _retry(f"creating topic {plan.name}", lambda p=plan: admin.create_topic(p.name))  # type: ignore[misc]


def _client(cluster: ClusterInfo, config: RunConfig, timeout_s: float) -> Any:
    from harness.client import PulsarClient

    return PulsarClient(cluster.service_url, txn_path=config.path.value, operation_timeout_s=timeout_s,
                        listener_name=cluster.listener_name)


def _create_subscriptions(cluster: ClusterInfo, config: RunConfig, topology: Topology, client: Any) -> None:
    if not topology.subscription_plans:
        return
    timeout = max(config.workload.op_timeout_s, 10.0)
    own = client is None
    if own:
        client = _client(cluster, config, timeout)
    try:
        for sub in topology.subscription_plans:
            last: BaseException | None = None
            for attempt in range(1, ADMIN_ATTEMPTS + 1):
                try:
                    consumer = client.subscribe(sub.topic, sub.name, sub_type=sub.sub_type.value,
                                                consumer_name="setup", receiver_queue_size=1, timeout_s=timeout)
                    consumer.close(timeout)
                    break
                except OperationError as err:
                    last = err
                    _sleep(ADMIN_RETRY_PAUSE_S * attempt)
            else:
                raise EnvironmentProblem(f"setup: creating subscription {sub.name!r} on {sub.topic} failed: {last}; "
                                         f"is {cluster.service_url} serving the {config.path.value} path?")
    finally:
        if own:
            client.close()


def wait_transactions_ready(cluster: ClusterInfo, config: RunConfig, timeout_s: float, *,
                            client: Any = None) -> None:
    """Poll until a transaction opens and commits on this path, at most `timeout_s`.

    Raises:
        EnvironmentProblem: no transaction could be committed in time (with the last error).
    """
    deadline = time.monotonic() + timeout_s
    own = client is None
    if own:
        client = _client(cluster, config, READY_REQUEST_TIMEOUT_S)
    pause = READY_BACKOFF_S[0]
    last: BaseException | None = None
    attempts = 0
    try:
        while True:
            attempts += 1
            remaining = deadline - time.monotonic()
            request_timeout = max(0.1, min(READY_REQUEST_TIMEOUT_S, remaining))
            try:
                txn = client.new_transaction(config.workload.txn_timeout_s, request_timeout_s=request_timeout)
                txn.commit(request_timeout)
                return
            except (OperationError, TxnbenchError) as err:
                last = err
            if time.monotonic() + pause >= deadline:
                break
            _sleep(pause)
            pause = min(pause * 2, READY_BACKOFF_S[1])
    finally:
        if own:
            client.close()
    raise EnvironmentProblem(
        f"transactions are not ready on the {config.path.value} path after {timeout_s:.0f}s "
        f"({attempts} attempts; last error: {type(last).__name__}: {last}); check that the brokers run "
        "transaction coordinators (transactionCoordinatorEnabled) and their logs")
