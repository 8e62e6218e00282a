"""Pulsar's admin REST API, as the host reaches it in a compose cluster.

Why not plain `requests`: a Pulsar broker answers a request for a topic it does not
own with a 307 redirect to the owner's web service URL, and inside the cluster that
URL is `http://broker-<j>:<port>`, a name the host cannot resolve. This client
follows such a redirect to the owner's published port on 127.0.0.1 instead, so an
admin action reaches the broker Pulsar meant, and it never sends anything to an
address that is not one of this cluster's published ports.

The fault actions on segments and topics use Pulsar's paths:

| action | method and path |
|---|---|
| split a segment of a scalable topic (PIP-460) | POST /admin/v2/scalable/{tenant}/{ns}/{topic}/split/{segmentId} |
| merge two adjacent segments | POST /admin/v2/scalable/{tenant}/{ns}/{topic}/merge/{id1}/{id2} |
| seal (terminate) one segment | POST /admin/v2/segments/{tenant}/{ns}/{topic}/{descriptor}/terminate |
| terminate a v4 topic | POST /admin/v2/persistent/{tenant}/{ns}/{topic}/terminate |
| terminate every partition of a partitioned v4 topic | POST /admin/v2/persistent/{tenant}/{ns}/{topic}/terminate/partitions |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import requests

from harness.client.rest import AdminRequestFailed, TopicName

MAX_REDIRECTS = 5


class ComposeAdmin:
    """Admin REST over the brokers' published ports.

    `published` maps each broker's in-cluster web address (`broker-1:8081`) to its
    published base URL (`http://127.0.0.1:18081`).
    """

    def __init__(self, base_url: str, published: Mapping[str, str], timeout_s: float = 30.0,
                 session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.published = {k.lower(): v.rstrip("/") for k, v in published.items()}
        self.timeout_s = timeout_s
        self.session = session or requests.Session()
        self.session.headers.setdefault("User-Agent", "txnbench-compose-admin")

    def close(self) -> None:
        self.session.close()

    def _reachable(self, url: str) -> str:
        """The URL the host can use for `url` (an in-cluster broker address or a published one)."""
        parts = urlsplit(url)
        netloc = parts.netloc.lower()
        if netloc in self.published:
            base = self.published[netloc]
            tail = parts.path + (f"?{parts.query}" if parts.query else "")
            return base + tail
        own = {urlsplit(v).netloc for v in self.published.values()} | {urlsplit(self.base_url).netloc}
        if netloc in own:
            return url
        raise AdminRequestFailed(f"a broker redirected to {url}, which is not one of this cluster's brokers "
                                 f"(known: {sorted(self.published)}); is the compose file's "
                                 "advertisedAddress/webServicePort consistent with its labels?")

    def request(self, method: str, url_path: str, *, params: Mapping[str, Any] | None = None,
                json: Any = None, ok: tuple[int, ...] = (200, 204)) -> requests.Response:
        url = self.base_url + url_path
        for _ in range(MAX_REDIRECTS + 1):
            try:
                response = self.session.request(method, url, params=params, json=json,
                                                timeout=self.timeout_s, allow_redirects=False)
            except requests.RequestException as err:
                raise AdminRequestFailed(f"{method} {url}: no answer ({err}); is the broker up?") from None
            if response.status_code in (301, 302, 303, 307, 308) and "Location" in response.headers:
                url = self._reachable(urljoin(url, response.headers["Location"]))
                params = None   # the Location carries the query
                continue
            if response.status_code in ok:
                return response
            detail = response.text.strip()[:500]
            raise AdminRequestFailed(f"{method} {url}: {response.status_code} {detail}", response.status_code)
        raise AdminRequestFailed(f"{method} {url_path}: more than {MAX_REDIRECTS} redirects")

    # ---- segment and topic actions ------------------------------------------------------------

    def split_segment(self, topic: str, segment_id: int) -> None:
        name = TopicName.parse(topic)
        if name.scheme != "topic":
            raise ValueError(f"split needs a scalable topic (topic://...), not {topic!r}")
        self.request("POST", f"/admin/v2/scalable/{name.rest_path}/split/{int(segment_id)}")

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> None:
        name = TopicName.parse(topic)
        if name.scheme != "topic":
            raise ValueError(f"merge needs a scalable topic (topic://...), not {topic!r}")
        self.request("POST", f"/admin/v2/scalable/{name.rest_path}/merge/{int(first_id)}/{int(second_id)}")

    def terminate(self, topic: str, *, partitioned: bool = False) -> None:
        """Seal a v5 segment or terminate a v4 topic (all partitions when `partitioned`)."""
        name = TopicName.parse(topic)
        if name.scheme == "segment":
            assert name.descriptor is not None
            self.request("POST", f"/admin/v2/segments/{name.rest_path}/{quote(name.descriptor, safe='')}"
                                 "/terminate")
        elif name.scheme == "persistent":
            suffix = "/terminate/partitions" if partitioned else "/terminate"
            self.request("POST", f"/admin/v2/persistent/{name.rest_path}{suffix}")
        else:
            raise ValueError(f"terminate takes a segment:// or persistent:// topic, not {topic!r}; "
                             "seal one segment of a scalable topic")
