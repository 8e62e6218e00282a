"""Topic and segment actions for the nemesis, over the cluster's admin REST.

Two transports, one behaviour (`faults.model.TopicAdmin`):

* `ClientTopicAdmin` on `harness.client.admin.AdminClient`, for the embedded and
  external targets, whose brokers' web URLs the host can reach (a 307 from a broker
  that does not own the topic is followed as is).
* `ComposeTopicAdmin` on the compose target's `ComposeAdmin`, which follows such
  redirects to the brokers' published ports.

What the answers mean for the history: a 4xx is the broker refusing (the segment is
not active, the topic is gone): certainly not done, `NotInjected` (history `fail`). No
answer or a 5xx leaves the outcome unknown (`info`), and is never retried on another
broker: a split that happened twice would be a different fault than the one
recorded. Reads (metadata, partitions) may go to any broker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from faults.model import NotInjected, TopicAdmin
from harness.client.rest import AdminRequestFailed, TopicName
from harness.target import ClusterInfo, ProcessControl, ServiceRole

T = TypeVar("T")
_PARTITION = re.compile(r"-partition-\d+$")


def active_segment_names(topic: str, metadata: Mapping[str, Any]) -> list[str]:
    """The active segments of scalable topic `topic` in an admin metadata answer.

    Pulsar 5.0 answers `GET /admin/v2/scalable/{t}/{ns}/{topic}` with the segment DAG:
    `segments` maps each id to a SegmentInfo `{segmentId, hashRange: {start, end},
    state: ACTIVE|SEALED, parentIds, childIds, ...}`; active segments are the leaves.
    A list of segments, `hashStart`/`hashEnd` fields or a `sealed` flag are read too.
    """
    from harness.client.topics import segment_name

    raw = metadata.get("segments", metadata.get("dag", []))
    items: Iterable[Any] = raw.values() if isinstance(raw, Mapping) else raw
    names = []
    for seg in items:
        if not isinstance(seg, Mapping):
            continue
        state = str(seg.get("state", "ACTIVE")).upper()
        if state != "ACTIVE" or seg.get("sealed") is True or seg.get("childIds"):
            continue
        hash_range = seg.get("hashRange") or {}
        start = seg.get("hashStart", hash_range.get("start"))
        end = seg.get("hashEnd", hash_range.get("end"))
        seg_id = seg.get("segmentId", seg.get("id"))
        if start is None or end is None or seg_id is None:
            continue
        names.append(segment_name(topic, int(start), int(end), int(seg_id)))
    return sorted(names)


def _refusal(status: int | None) -> bool:
    return status is not None and 400 <= status < 500 and status not in (408, 429)


def _act(call: Callable[[], T], error_types: tuple[type[Exception], ...]) -> T:
    """Run an admin change; a refusal becomes NotInjected, anything else stays as it is."""
    try:
        return call()
    except error_types as err:
        if _refusal(getattr(err, "status", None)):
            raise NotInjected(str(err)) from err
        raise


class ClientTopicAdmin:
    """TopicAdmin on harness.client.admin.AdminClient; changes go to the first broker that runs."""

    def __init__(self, web_urls: list[str], is_running: Callable[[str], bool] | None = None,
                 names: list[str] | None = None, timeout_s: float = 30.0, *,
                 segments_move_with_namespace: bool = False) -> None:
        """`segments_move_with_namespace`: the brokers have no per-segment unload (real Pulsar
        5.0.1 answers 404 to `/admin/v2/segments/.../unload`), so unloading a segment or a
        scalable topic unloads the namespace it lives in: the one graceful move 5.0.1 offers,
        and a wider one (every topic of the namespace moves with it)."""
        import requests

        from harness.client.admin import AdminClient, AdminError

        if not web_urls:
            raise ValueError("no broker web URL to send admin requests to")
        self._session = requests.Session()
        self._clients = [AdminClient(url, timeout_s=timeout_s, session=self._session) for url in web_urls]
        self._names = names or [f"broker-{i}" for i in range(len(web_urls))]
        self._is_running = is_running
        self._errors: tuple[type[Exception], ...] = (AdminError,)
        self._namespace_moves = segments_move_with_namespace

    def _ordered(self) -> list[Any]:
        if self._is_running is None:
            return list(self._clients)
        running = [c for c, n in zip(self._clients, self._names, strict=True) if self._is_running(n)]
        return running + [c for c in self._clients if c not in running]

    def _change(self, fn: Callable[[Any], Any]) -> None:
        client = self._ordered()[0]
        _act(lambda: fn(client), self._errors)

    def _read(self, fn: Callable[[Any], T]) -> T:
        last: Exception | None = None
        for client in self._ordered():
            try:
                return fn(client)
            except self._errors as err:
                if getattr(err, "status", None) is not None:
                    raise
                last = err
        assert last is not None
        raise last

    def terminate_topic(self, topic: str) -> None:
        if _PARTITION.search(topic) or self.partitions(topic) == 0:
            self._change(lambda c: c.terminate_topic(topic))
        else:
            self._change(lambda c: c.terminate_partitioned_topic(topic))

    def terminate_segment(self, segment: str) -> None:
        self._change(lambda c: c.terminate_segment(segment))

    def unload_topic(self, topic: str) -> None:
        if self._namespace_moves and topic.startswith("topic://"):
            self._unload_namespace_of(topic)
            return
        for name in _unload_names(topic, self.partitions, self.active_segments):
            if name.startswith("segment://"):
                self.unload_segment(name)
            else:
                self._change(lambda c, n=name: c.unload_topic(n))  # type: ignore[misc]

    def unload_segment(self, segment: str) -> None:
        if self._namespace_moves:
            self._unload_namespace_of(segment)
            return
        self._change(lambda c: c.unload_segment(segment))

    def _unload_namespace_of(self, name: str) -> None:
        tenant, namespace = name.split("://", 1)[1].split("/")[:2]
        self._change(lambda c: c.unload_namespace(tenant, namespace))

    def split_segment(self, topic: str, segment_id: int) -> None:
        self._change(lambda c: c.split_segment(topic, segment_id))

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> None:
        self._change(lambda c: c.merge_segments(topic, first_id, second_id))

    def partitions(self, topic: str) -> int:
        return int(self._read(lambda c: c.partitions(topic)))

    def active_segments(self, topic: str) -> list[str]:
        return active_segment_names(topic, self._read(lambda c: c.scalable_topic_metadata(topic)))

    def close(self) -> None:
        self._session.close()


class ComposeTopicAdmin:
    """TopicAdmin on the compose target's admin (redirects followed to published ports)."""

    def __init__(self, admin: Any) -> None:
        self._admin = admin
        self._errors: tuple[type[Exception], ...] = (AdminRequestFailed,)

    def _rest(self, topic: str) -> str:
        return TopicName.parse(topic).rest_path

    def terminate_topic(self, topic: str) -> None:
        partitioned = not _PARTITION.search(topic) and self.partitions(topic) > 0
        _act(lambda: self._admin.terminate(topic, partitioned=partitioned), self._errors)

    def terminate_segment(self, segment: str) -> None:
        _act(lambda: self._admin.terminate(segment), self._errors)

    def unload_topic(self, topic: str) -> None:
        for name in _unload_names(topic, self.partitions, self.active_segments):
            if name.startswith("segment://"):
                self.unload_segment(name)
            else:
                _act(lambda n=name: self._admin.request(  # type: ignore[misc]
                    "PUT", f"/admin/v2/persistent/{self._rest(n)}/unload"), self._errors)

    def unload_segment(self, segment: str) -> None:
        raise NotInjected(f"unloading a single segment ({segment}) is not wired for the compose target; "
                          "unload the topic:, or restart its broker")

    def split_segment(self, topic: str, segment_id: int) -> None:
        _act(lambda: self._admin.split_segment(topic, segment_id), self._errors)

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> None:
        _act(lambda: self._admin.merge_segments(topic, first_id, second_id), self._errors)

    def partitions(self, topic: str) -> int:
        answer = self._admin.request("GET", f"/admin/v2/persistent/{self._rest(topic)}/partitions").json()
        return int(answer.get("partitions", 0))

    def active_segments(self, topic: str) -> list[str]:
        answer = self._admin.request("GET", f"/admin/v2/scalable/{self._rest(topic)}").json()
        return active_segment_names(topic, answer)

    def close(self) -> None:
        self._admin.close()


def _unload_names(topic: str, partitions: Callable[[str], int],
                  active_segments: Callable[[str], list[str]]) -> list[str]:
    """What unloading `topic` unloads: itself (a partition or a plain topic), each partition
    of a partitioned topic, or each active segment of a scalable (topic://) one."""
    if topic.startswith("topic://"):
        return list(active_segments(topic))
    if _PARTITION.search(topic):
        return [topic]
    count = partitions(topic)
    return [f"{topic}-partition-{i}" for i in range(count)] if count > 0 else [topic]


def make_topic_admin(cluster: ClusterInfo, control: ProcessControl | None,
                     *, timeout_s: float = 30.0) -> tuple[TopicAdmin | None, str]:
    """The admin for this cluster, or None and the reason."""
    compose_admin = getattr(control, "admin", None)
    if callable(compose_admin):
        return ComposeTopicAdmin(compose_admin()), ""
    brokers = sorted((s for s in cluster.by_role(ServiceRole.BROKER) if s.admin_url), key=lambda s: s.name)
    urls = [s.admin_url for s in brokers if s.admin_url] or ([cluster.admin_url] if cluster.admin_url else [])
    if not urls:
        return None, f"the {cluster.target} target gave no admin URL"
    names = [s.name for s in brokers] if brokers else ["broker-0"]
    running = control.is_running if control is not None else None
    return ClientTopicAdmin(urls, running, names, timeout_s,
                            segments_move_with_namespace=cluster.target == "pulsar"), ""
