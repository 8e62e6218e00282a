"""What both admin REST clients of the fault actions share: a topic's REST path and the refusal.

Why in the harness: the compose target's admin (`targets.compose.admin.ComposeAdmin`)
raises `AdminRequestFailed` and names topics with `TopicName`, and the nemesis
(`faults.admin.ComposeTopicAdmin`) catches the one and parses the other; the targets sit
above the faults, so these live below both, beside the admin REST client.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


class AdminRequestFailed(Exception):
    """An admin call that Pulsar refused or that could not be delivered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TopicName:
    """`topic://t/ns/x`, `segment://t/ns/x/<descriptor>` or `persistent://t/ns/x`."""

    scheme: str
    tenant: str
    namespace: str
    local: str
    descriptor: str | None = None

    @classmethod
    def parse(cls, text: str) -> TopicName:
        scheme, sep, rest = text.partition("://")
        parts = rest.split("/")
        if not sep or scheme not in ("topic", "segment", "persistent") or len(parts) < 3:
            raise ValueError(f"{text!r} is not topic://t/ns/x, segment://t/ns/x/<descriptor> "
                             "or persistent://t/ns/x")
        if scheme == "segment":
            if len(parts) != 4:
                raise ValueError(f"{text!r}: a segment is segment://tenant/ns/topic/<start>-<end>-<id>")
            return cls(scheme, parts[0], parts[1], parts[2], parts[3])
        if len(parts) != 3:
            raise ValueError(f"{text!r}: expected {scheme}://tenant/namespace/topic")
        return cls(scheme, parts[0], parts[1], parts[2])

    @property
    def rest_path(self) -> str:
        return "/".join(quote(p, safe="") for p in (self.tenant, self.namespace, self.local))
