"""Topic names: parsing, partitions, namespaces, and the names derived for storage.

Theory of operation. A topic name is `<domain>://<tenant>/<namespace>/<local name>`:

* `persistent://t/ns/x` is an ordinary topic; `x-partition-3` is partition 3 of the
  partitioned topic `x` (Pulsar's `TopicName.getPartitionIndex`: the suffix after the
  last `-partition-`);
* `segment://t/ns/x/<hashStart>-<hashEnd>-<segmentId>` (PIP-460) is one segment of a
  scalable topic. Its local name is `x/<lo>-<hi>-<id>`; it is stored and served exactly
  like a persistent topic (a managed ledger, cursors, ownership). Only its transaction
  components differ, which the provider registry chooses by `domain`;
* `topic://t/ns/x` (PIP-460) is a scalable topic: not stored itself; commands naming
  one are routed to the handler the v5 path registers;
* short forms as Pulsar accepts them: `x` is `persistent://public/default/x`, and
  `t/ns/x` is `persistent://t/ns/x`.

Storage names follow Pulsar's `getPersistenceNamingEncoding`: `t/ns/<domain>/<url-encoded
local name>`, so a segment's `/` never splits a metadata path.
"""

from __future__ import annotations

import enum
import urllib.parse
from dataclasses import dataclass

PARTITION_SUFFIX = "-partition-"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"


class TopicDomain(enum.Enum):
    PERSISTENT = "persistent"
    NON_PERSISTENT = "non-persistent"
    SEGMENT = "segment"      # PIP-460 segment of a scalable topic: stored like persistent
    TOPIC = "topic"          # PIP-460 scalable topic: routed to the v5 handler

    @property
    def is_stored(self) -> bool:
        """Whether topics of this domain are managed ledgers served by this broker."""
        return self in (TopicDomain.PERSISTENT, TopicDomain.SEGMENT)


class InvalidTopicName(ValueError):
    """The text is not a topic name; the message says what is expected."""


def _check_part(part: str, what: str, text: str) -> None:
    if not part:
        raise InvalidTopicName(f"topic {text!r} has an empty {what}; expected "
                               "persistent://<tenant>/<namespace>/<topic>")
    if any(c in part for c in "/\n\r") or part.strip() != part:
        raise InvalidTopicName(f"topic {text!r}: {what} {part!r} may not contain '/' or whitespace")


@dataclass(frozen=True, slots=True)
class SegmentDescriptor:
    """`<hashStart>-<hashEnd>-<segmentId>`: hex hash bounds (inclusive), decimal id."""

    hash_start: int
    hash_end: int
    segment_id: int

    def __str__(self) -> str:
        return f"{self.hash_start:04x}-{self.hash_end:04x}-{self.segment_id}"

    @classmethod
    def parse(cls, text: str) -> SegmentDescriptor:
        parts = text.split("-")
        if len(parts) != 3:
            raise InvalidTopicName(f"segment descriptor {text!r} is not <hashStart>-<hashEnd>-<segmentId>")
        try:
            return cls(int(parts[0], 16), int(parts[1], 16), int(parts[2], 10))
        except ValueError:
            raise InvalidTopicName(f"segment descriptor {text!r}: hash bounds are hex, the id decimal") from None


@dataclass(frozen=True, slots=True)
class TopicName:
    domain: TopicDomain
    tenant: str
    namespace_part: str
    local_name: str

    # ---- parsing ------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> TopicName:
        if not isinstance(text, str) or not text:
            raise InvalidTopicName("empty topic name")
        if "://" in text:
            scheme, rest = text.split("://", 1)
            try:
                domain = TopicDomain(scheme)
            except ValueError:
                known = ", ".join(d.value for d in TopicDomain)
                raise InvalidTopicName(f"topic {text!r}: unknown domain {scheme!r}; use one of {known}") from None
            parts = rest.split("/", 2)
            if len(parts) != 3:
                raise InvalidTopicName(f"topic {text!r} is not {scheme}://<tenant>/<namespace>/<topic>")
            tenant, namespace, local = parts
        else:
            parts = text.split("/")
            if len(parts) == 1:
                domain, tenant, namespace, local = TopicDomain.PERSISTENT, DEFAULT_TENANT, DEFAULT_NAMESPACE, text
            elif len(parts) == 3:
                domain, (tenant, namespace, local) = TopicDomain.PERSISTENT, parts
            else:
                raise InvalidTopicName(f"topic {text!r}: use <topic>, <tenant>/<namespace>/<topic> or "
                                       "persistent://<tenant>/<namespace>/<topic>")
        _check_part(tenant, "tenant", text)
        _check_part(namespace, "namespace", text)
        if domain is TopicDomain.SEGMENT:
            parent, sep, descriptor = local.rpartition("/")
            if not sep:
                raise InvalidTopicName(f"segment {text!r} is not segment://<tenant>/<namespace>/<topic>/"
                                       "<hashStart>-<hashEnd>-<segmentId>")
            _check_part(parent, "topic", text)
            SegmentDescriptor.parse(descriptor)
        else:
            _check_part(local, "topic", text)
        return cls(domain, tenant, namespace, local)

    # ---- derived names ------------------------------------------------------------------------

    def __str__(self) -> str:
        return f"{self.domain.value}://{self.tenant}/{self.namespace_part}/{self.local_name}"

    @property
    def namespace(self) -> str:
        return f"{self.tenant}/{self.namespace_part}"

    @property
    def partition_index(self) -> int:
        """The partition number of `x-partition-N`, else -1."""
        if self.domain is TopicDomain.SEGMENT:
            return -1
        base, sep, suffix = self.local_name.rpartition(PARTITION_SUFFIX)
        if sep and base and suffix.isdigit():
            return int(suffix)
        return -1

    @property
    def is_partition(self) -> bool:
        return self.partition_index >= 0

    @property
    def partitioned_base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself when not a partition)."""
        if not self.is_partition:
            return self
        base = self.local_name.rpartition(PARTITION_SUFFIX)[0]
        return TopicName(self.domain, self.tenant, self.namespace_part, base)

    def partition(self, index: int) -> TopicName:
        if index < 0:
            raise ValueError(f"partition index must be >= 0, got {index}")
        return TopicName(self.domain, self.tenant, self.namespace_part, f"{self.local_name}{PARTITION_SUFFIX}{index}")

    @property
    def encoded_local_name(self) -> str:
        return urllib.parse.quote(self.local_name, safe="")

    @property
    def persistence_name(self) -> str:
        """`t/ns/<domain>/<encoded local name>`: the managed ledger's name."""
        return f"{self.tenant}/{self.namespace_part}/{self.domain.value}/{self.encoded_local_name}"

    @property
    def segment(self) -> SegmentDescriptor | None:
        if self.domain is not TopicDomain.SEGMENT:
            return None
        return SegmentDescriptor.parse(self.local_name.rpartition("/")[2])

    @property
    def scalable_parent(self) -> TopicName | None:
        """For a segment, its scalable topic `topic://t/ns/x`."""
        if self.domain is not TopicDomain.SEGMENT:
            return None
        return TopicName(TopicDomain.TOPIC, self.tenant, self.namespace_part, self.local_name.rpartition("/")[0])

    @classmethod
    def from_persistence_name(cls, name: str) -> TopicName:
        parts = name.split("/")
        if len(parts) != 4:
            raise InvalidTopicName(f"{name!r} is not a managed-ledger name t/ns/<domain>/<encoded topic>")
        tenant, namespace, domain, encoded = parts
        return cls(TopicDomain(domain), tenant, namespace, urllib.parse.unquote(encoded))


def encode_component(text: str) -> str:
    """A metadata path component for arbitrary text (subscription names)."""
    return urllib.parse.quote(text, safe="")


def decode_component(text: str) -> str:
    return urllib.parse.unquote(text)
