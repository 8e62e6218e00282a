"""Pulsar's admin REST API (4.x and 5.0 paths), with timeouts and errors that say what failed.

Paths, as the brokers serve them:

=====================================  =========================================================
what                                   method and path
=====================================  =========================================================
clusters                               GET /admin/v2/clusters
tenants                                GET /admin/v2/tenants, PUT|GET|DELETE /admin/v2/tenants/{t}
namespaces                             GET /admin/v2/namespaces/{t}, PUT|DELETE /admin/v2/namespaces/{t}/{ns}
create a non-partitioned topic         PUT /admin/v2/persistent/{t}/{ns}/{topic}
create a partitioned topic             PUT /admin/v2/persistent/{t}/{ns}/{topic}/partitions  (body: N)
partitions of a topic                  GET /admin/v2/persistent/{t}/{ns}/{topic}/partitions
list topics / partitioned topics       GET /admin/v2/persistent/{t}/{ns}[/partitioned]
stats                                  GET .../{topic}/stats, GET .../{topic}/partitioned-stats
internal stats                         GET .../{topic}/internalStats
terminate                              POST .../{topic}/terminate, POST .../{topic}/terminate/partitions
delete                                 DELETE .../{topic}[/partitions]?force=true
lookup                                 GET /lookup/v2/topic/persistent/{t}/{ns}/{topic}
scalable topics (PIP-460)              GET /admin/v2/scalable/{t}/{ns}
                                       PUT /admin/v2/scalable/{t}/{ns}/{topic}?numInitialSegments=N
                                       GET .../{topic} (metadata, the DAG), GET .../{topic}/stats
                                       GET .../{topic}/segments/{id}/stats
                                       POST .../{topic}/split/{segmentId}
                                       POST .../{topic}/merge/{id1}/{id2}
                                       DELETE .../{topic}?force=true
message by id (stored entry)           GET /admin/v2/persistent/{t}/{ns}/{topic}/ledger/{ledgerId}/entry/{entryId}
terminate (seal) one segment           POST /admin/v2/segments/{t}/{ns}/{topic}/{descriptor}/terminate
broker health                          GET /admin/v2/brokers/health, GET /admin/v2/brokers/ready
coordinator stats (v4)                 GET /admin/v3/transactions/coordinatorStats
metrics                                GET /metrics
=====================================  =========================================================

A broker that does not own a topic answers with a 307 redirect to the owner's web
URL; `requests` follows it (method and body kept). Every call has a timeout.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from harness.client.topics import SegmentName, normalize_topic
from harness.errors import TxnbenchError


class AdminError(TxnbenchError):
    """An admin call the broker refused or that could not be delivered.

    Attributes:
        status: the HTTP status, or None when no answer came (connection, timeout).
        method, url: the request.
    """

    def __init__(self, message: str, *, status: int | None = None, method: str = "",
                 url: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.method = method
        self.url = url


class CoordinatorNotLoadedError(AdminError):
    """The transaction's coordinator is not loaded on the broker that should serve it (Pulsar's
    404 "Transaction coordinator with id N not found!"): nothing is known of the transaction,
    which is not the 404 of a transaction the coordinator no longer knows."""


#: the start of Pulsar's CoordinatorNotFoundException message (2.10 to 5.0)
_COORDINATOR_NOT_FOUND = "transaction coordinator with id"


def _split(topic: str, domain: str) -> tuple[str, str, str]:
    name = normalize_topic(topic if "://" in topic or domain != "topic" else f"topic://{topic}")
    scheme, _, rest = name.partition("://")
    if scheme != domain:
        raise ValueError(f"{topic!r} is a {scheme}:// topic; this call takes {domain}:// topics")
    tenant, namespace, local = rest.split("/")
    return tenant, namespace, local


def _path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


@dataclass(frozen=True)
class StoredEntry:
    """What the owner said about one stored position (`AdminClient.stored_entry`).

    `found`: the entry was returned. `non_recoverable`: the broker says it acknowledged
    the position and its storage has lost it (404 with `nonRecoverable`); every other
    refusal (the position does not exist, a store that is down) has both false.
    """

    found: bool
    non_recoverable: bool
    status: int
    reason: str
    marker_type: int | None = None   # a found entry that is a server-only marker (a transaction's commit or abort)
    txn: str | None = None           # a found entry written in a transaction: "most:least"


def _int_header(response: requests.Response, name: str) -> int | None:
    value = response.headers.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _txn_bits(response: requests.Response) -> tuple[int, int] | None:
    """getMessageById's `X-Pulsar-txnid-*` headers: the stored message's transaction, if any."""
    most = _int_header(response, "X-Pulsar-txnid-most-bits")
    least = _int_header(response, "X-Pulsar-txnid-least-bits")
    return (most, least) if most is not None and least is not None else None


def _txn_header(response: requests.Response) -> str | None:
    """The stored message's transaction as the history writes ids ("most:least")."""
    bits = _txn_bits(response)
    return None if bits is None else f"{bits[0]}:{bits[1]}"


class AdminClient:
    """Admin REST calls against one broker's web service URL (`http://host:port`)."""

    def __init__(self, web_url: str, *, timeout_s: float = 30.0,
                 session: requests.Session | None = None) -> None:
        if not web_url.startswith(("http://", "https://")):
            raise ValueError(f"admin URL {web_url!r} must be http://host:port (the broker's web "
                             "service, 8080 by default), not the pulsar:// service URL")
        self.web_url = web_url.rstrip("/")
        self.timeout_s = timeout_s
        self._session = session or requests.Session()

    # ---- plumbing -------------------------------------------------------------------

    def _call(self, method: str, url_path: str, *, json_body: Any = None,
              params: Mapping[str, Any] | None = None, expect_json: bool = True,
              ok_statuses: Iterable[int] = ()) -> Any:
        url = f"{self.web_url}{url_path}"
        try:
            response = self._session.request(method, url, json=json_body, params=params,
                                             timeout=self.timeout_s)
        except requests.Timeout:
            raise AdminError(f"{method} {url}: no answer within {self.timeout_s}s", method=method,
                             url=url) from None
        except requests.RequestException as exc:
            raise AdminError(f"{method} {url}: cannot reach the broker's web service ({exc}); "
                             "is the cluster up and is this its admin URL?", method=method,
                             url=url) from None
        if response.status_code >= 400 and response.status_code not in set(ok_statuses):
            raise AdminError(f"{method} {url} failed: HTTP {response.status_code}: "
                             f"{_reason(response)}", status=response.status_code,
                             method=method, url=url)
        if not expect_json or not response.content:
            return response.text
        try:
            return response.json()
        except ValueError:
            return response.text

    # ---- clusters, tenants, namespaces ------------------------------------------------

    def clusters(self) -> list[str]:
        """Cluster names."""
        return list(self._call("GET", "/admin/v2/clusters"))

    def tenants(self) -> list[str]:
        """Tenant names."""
        return list(self._call("GET", "/admin/v2/tenants"))

    def create_tenant(self, tenant: str, *, allowed_clusters: list[str] | None = None,
                      admin_roles: list[str] | None = None, exist_ok: bool = True) -> None:
        """Create a tenant (allowed on every cluster when `allowed_clusters` is None)."""
        clusters = allowed_clusters if allowed_clusters is not None else self.clusters()
        self._call("PUT", f"/admin/v2/tenants/{_path(tenant)}",
                   json_body={"adminRoles": admin_roles or [], "allowedClusters": clusters},
                   ok_statuses=(409,) if exist_ok else ())

    def delete_tenant(self, tenant: str) -> None:
        """Delete an (empty) tenant."""
        self._call("DELETE", f"/admin/v2/tenants/{_path(tenant)}")

    def namespaces(self, tenant: str) -> list[str]:
        """`tenant/ns` names of a tenant."""
        return list(self._call("GET", f"/admin/v2/namespaces/{_path(tenant)}"))

    def create_namespace(self, tenant: str, namespace: str, *, exist_ok: bool = True) -> None:
        """Create `tenant/namespace`."""
        self._call("PUT", f"/admin/v2/namespaces/{_path(tenant, namespace)}",
                   ok_statuses=(409,) if exist_ok else ())

    def unload_namespace(self, tenant: str, namespace: str) -> None:
        """Unload every bundle of a namespace (`PUT /admin/v2/namespaces/{t}/{ns}/unload`).

        Real Pulsar 5.0.1 has no per-segment unload endpoint; this is how a segment is moved
        gracefully there (with every other topic of the namespace)."""
        self._call("PUT", f"/admin/v2/namespaces/{_path(tenant, namespace)}/unload", expect_json=False)

    def delete_namespace(self, tenant: str, namespace: str, *, force: bool = False) -> None:
        """Delete a namespace."""
        self._call("DELETE", f"/admin/v2/namespaces/{_path(tenant, namespace)}",
                   params={"force": "true"} if force else None)

    # ---- persistent topics ------------------------------------------------------------

    def _topic(self, topic: str) -> str:
        return "/admin/v2/persistent/" + _path(*_split(topic, "persistent"))

    def create_topic(self, topic: str, *, exist_ok: bool = True) -> None:
        """Create a non-partitioned persistent topic."""
        self._call("PUT", self._topic(topic), ok_statuses=(409,) if exist_ok else ())

    def create_partitioned_topic(self, topic: str, partitions: int, *,
                                 exist_ok: bool = True) -> None:
        """Create a partitioned topic with `partitions` partitions."""
        if partitions < 1:
            raise ValueError(f"a partitioned topic needs >= 1 partition, got {partitions}")
        self._call("PUT", self._topic(topic) + "/partitions", json_body=partitions,
                   ok_statuses=(409,) if exist_ok else ())

    def partitions(self, topic: str) -> int:
        """The partition count of a topic (0: not partitioned)."""
        return int(self._call("GET", self._topic(topic) + "/partitions").get("partitions", 0))

    def topics(self, tenant: str, namespace: str) -> list[str]:
        """Persistent topics of a namespace (partitions listed one by one)."""
        return list(self._call("GET", f"/admin/v2/persistent/{_path(tenant, namespace)}"))

    def partitioned_topics(self, tenant: str, namespace: str) -> list[str]:
        """Partitioned topics of a namespace."""
        return list(self._call("GET",
                               f"/admin/v2/persistent/{_path(tenant, namespace)}/partitioned"))

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """Topic stats (msgIn/Out, subscriptions, backlog ...)."""
        return dict(self._call("GET", self._topic(topic) + "/stats"))

    def internal_stats(self, topic: str) -> dict[str, Any]:
        """Managed-ledger internals (ledgers, cursors)."""
        return dict(self._call("GET", self._topic(topic) + "/internalStats"))

    def stored_entry(self, topic: str, ledger_id: int, entry_id: int) -> StoredEntry:
        """Pulsar's getMessageById on one concrete topic or partition: is ledger:entry readable?

        Raises AdminError only when no answer came; any HTTP answer is a `StoredEntry`.
        """
        url = f"{self.web_url}{self._topic(topic)}/ledger/{int(ledger_id)}/entry/{int(entry_id)}"
        try:
            response = self._session.get(url, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise AdminError(f"GET {url}: no answer ({exc})", method="GET", url=url) from None
        if response.status_code == 200:
            return StoredEntry(True, False, 200, "", _int_header(response, "X-Pulsar-marker-type"),
                               _txn_header(response))
        body: Any = None
        with contextlib.suppress(ValueError):
            body = response.json()
        lost = response.status_code == 404 and isinstance(body, dict) and body.get("nonRecoverable") is True
        return StoredEntry(False, lost, response.status_code, _reason(response))

    def terminate_topic(self, topic: str) -> Any:
        """Terminate a non-partitioned topic (no more writes); returns the last message id."""
        return self._call("POST", self._topic(topic) + "/terminate")

    def unload_topic(self, topic: str) -> None:
        """Unload a topic or one partition (`PUT .../{topic}/unload`): its owner lets it go."""
        self._call("PUT", self._topic(topic) + "/unload", expect_json=False)

    def terminate_partitioned_topic(self, topic: str) -> Any:
        """Terminate every partition of a partitioned topic."""
        return self._call("POST", self._topic(topic) + "/terminate/partitions")

    def delete_topic(self, topic: str, *, force: bool = True, missing_ok: bool = True) -> None:
        """Delete a non-partitioned topic."""
        self._call("DELETE", self._topic(topic), params={"force": str(force).lower()},
                   ok_statuses=(404,) if missing_ok else ())

    def delete_partitioned_topic(self, topic: str, *, force: bool = True,
                                 missing_ok: bool = True) -> None:
        """Delete a partitioned topic and its partitions."""
        self._call("DELETE", self._topic(topic) + "/partitions",
                   params={"force": str(force).lower()}, ok_statuses=(404,) if missing_ok else ())

    def lookup(self, topic: str) -> dict[str, Any]:
        """The owner of a topic: `{"brokerUrl": ..., "httpUrl": ...}`."""
        return dict(self._call("GET", "/lookup/v2/topic/persistent/"
                               + _path(*_split(topic, "persistent"))))

    # ---- scalable topics and segments (v5) ---------------------------------------------

    def _scalable(self, topic: str) -> str:
        return "/admin/v2/scalable/" + _path(*_split(topic, "topic"))

    def create_scalable_topic(self, topic: str, segments: int = 1, *,
                              properties: Mapping[str, str] | None = None,
                              exist_ok: bool = True) -> None:
        """Create `topic://t/ns/x` with `segments` initial segments."""
        if segments < 1:
            raise ValueError(f"a scalable topic needs >= 1 segment, got {segments}")
        self._call("PUT", self._scalable(topic), params={"numInitialSegments": segments},
                   json_body=dict(properties or {}), ok_statuses=(409,) if exist_ok else ())

    def scalable_topic_metadata(self, topic: str) -> dict[str, Any]:
        """The topic's metadata: its segment DAG."""
        return dict(self._call("GET", self._scalable(topic)))

    def scalable_topic_stats(self, topic: str) -> dict[str, Any]:
        """Stats over every segment."""
        return dict(self._call("GET", self._scalable(topic) + "/stats"))

    def segment_stats(self, topic: str, segment_id: int) -> dict[str, Any]:
        """Stats of one segment."""
        return dict(self._call("GET", self._scalable(topic) + f"/segments/{int(segment_id)}/stats"))

    def split_segment(self, topic: str, segment_id: int) -> Any:
        """Split a segment in two (seals it)."""
        return self._call("POST", self._scalable(topic) + f"/split/{int(segment_id)}")

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> Any:
        """Merge two adjacent segments (seals both)."""
        return self._call("POST", self._scalable(topic)
                          + f"/merge/{int(first_id)}/{int(second_id)}")

    def delete_scalable_topic(self, topic: str, *, force: bool = True,
                              missing_ok: bool = True) -> None:
        """Delete a scalable topic and its segments."""
        self._call("DELETE", self._scalable(topic), params={"force": str(force).lower()},
                   ok_statuses=(404,) if missing_ok else ())

    def terminate_segment(self, segment: str) -> Any:
        """Seal one segment (`segment://t/ns/x/<start>-<end>-<id>`)."""
        parsed = SegmentName.parse(segment)
        tenant, namespace, local = _split(parsed.parent, "topic")
        descriptor = segment.rsplit("/", 1)[1]
        return self._call("POST", "/admin/v2/segments/"
                          + _path(tenant, namespace, local, descriptor) + "/terminate")

    def unload_segment(self, segment: str) -> None:
        """Unload one segment (`PUT /admin/v2/segments/{t}/{ns}/{topic}/{descriptor}/unload`)."""
        parsed = SegmentName.parse(segment)
        tenant, namespace, local = _split(parsed.parent, "topic")
        descriptor = segment.rsplit("/", 1)[1]
        self._call("PUT", "/admin/v2/segments/" + _path(tenant, namespace, local, descriptor) + "/unload",
                   expect_json=False)

    # ---- brokers, transactions, metrics ------------------------------------------------

    def health(self) -> bool:
        """Whether the broker's health check passes (`GET /admin/v2/brokers/health`)."""
        try:
            return str(self._call("GET", "/admin/v2/brokers/health", expect_json=False)
                       ).strip().strip('"') == "ok"
        except AdminError:
            return False

    def ready(self) -> bool:
        """Whether the broker reports ready (`GET /admin/v2/brokers/ready`)."""
        try:
            self._call("GET", "/admin/v2/brokers/ready", expect_json=False)
        except AdminError:
            return False
        return True

    def wait_healthy(self, timeout_s: float = 60.0, interval_s: float = 0.5) -> None:
        """Poll `health()` until it passes (bounded).

        Raises:
            AdminError: still unhealthy after `timeout_s`.
        """
        deadline = time.monotonic() + timeout_s
        while not self.health():
            if time.monotonic() >= deadline:
                raise AdminError(f"{self.web_url} not healthy within {timeout_s}s; check the "
                                 "broker log", url=self.web_url)
            time.sleep(interval_s)

    def transaction_buffer_stats(self, topic: str) -> dict[str, Any]:
        """One partition's transaction buffer as its owner sees it (Pulsar's TransactionBufferStats:
        `state`, `maxReadPosition`, `ongoingTxnSize`, `lowWaterMarks` per coordinator)."""
        path = "/admin/v3/transactions/transactionBufferStats/" + _path(*_split(topic, "persistent"))
        return dict(self._call("GET", path, params={"lowWaterMarks": "true"}))

    def entry_transaction(self, topic: str, ledger_id: int, entry_id: int) -> tuple[int, int] | None:
        """The transaction id (most, least) of the message stored at ledger:entry of one partition,
        from the `X-Pulsar-txnid-*` headers of getMessageById; None for a message outside any
        transaction, or an entry the broker would not return."""
        url = f"{self.web_url}{self._topic(topic)}/ledger/{int(ledger_id)}/entry/{int(entry_id)}"
        try:
            response = self._session.get(url, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise AdminError(f"GET {url}: no answer ({exc})", method="GET", url=url) from None
        return _txn_bits(response) if response.status_code == 200 else None

    def coordinator_stats(self) -> dict[str, Any]:
        """Per-coordinator stats of the v4 transaction coordinators."""
        return dict(self._call("GET", "/admin/v3/transactions/coordinatorStats"))

    def transaction_metadata(self, most: int, least: int) -> dict[str, Any] | None:
        """The coordinator's view of one transaction (Pulsar's TransactionMetadata: `status`,
        `openTimestamp`, `timeoutAt`, `producedPartitions`, `ackedPartitions`); None when the
        coordinator does not know it (HTTP 404: ended and forgotten, or never created). Pulsar
        redirects to the broker serving coordinator `most`; the redirect is followed.

        Raises:
            CoordinatorNotLoadedError: the 404 says the coordinator itself is not loaded.
        """
        url_path = f"/admin/v3/transactions/transactionMetadata/{most}/{least}"
        found = self._call("GET", url_path, ok_statuses=(404,))
        if isinstance(found, dict) and "status" in found:
            return dict(found)
        reason = str(found.get("reason", "")) if isinstance(found, dict) else str(found)
        if reason.strip().lower().startswith(_COORDINATOR_NOT_FOUND):
            raise CoordinatorNotLoadedError(f"GET {url_path}: {reason.strip()} (the coordinator is not loaded: "
                                            "nothing is known of the transaction)", status=404, method="GET",
                                            url=f"{self.web_url}{url_path}")
        return None

    def metrics(self) -> str:
        """The Prometheus text exposition of `/metrics`."""
        return str(self._call("GET", "/metrics", expect_json=False))


def _reason(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason
    if isinstance(body, dict) and "reason" in body:
        return str(body["reason"])
    return str(body)[:500]
