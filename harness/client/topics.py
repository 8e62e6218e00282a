"""Topic names as Pulsar spells them, and the service URL.

Pulsar accepts short names (`my-topic` means `persistent://public/default/my-topic`,
`tenant/ns/topic` means `persistent://tenant/ns/topic`); the client normalizes every
name it is given so lookups, transaction registrations and history records agree.

Three domains matter here:

* `persistent://tenant/ns/topic` (and its partitions `...-partition-<i>`),
* `topic://tenant/ns/topic`: a PIP-460 scalable topic, only usable with `txn_path="v5"`,
* `segment://tenant/ns/topic/<hashStart>-<hashEnd>-<segmentId>`: one of its segments,
  hash bounds as 4-digit lowercase hex and the id decimal (Java `SegmentTopicName`).
"""

from __future__ import annotations

from dataclasses import dataclass

PARTITION_SUFFIX = "-partition-"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
DOMAINS = ("persistent", "non-persistent", "topic", "segment")


def normalize_topic(name: str) -> str:
    """The fully qualified form of `name`.

    Raises:
        ValueError: the name has the wrong number of parts or an unknown domain.
    """
    if not name or name.strip() != name:
        raise ValueError(f"topic name {name!r} is empty or has surrounding spaces")
    if "://" in name:
        domain, _, rest = name.partition("://")
        if domain not in DOMAINS:
            raise ValueError(
                f"topic {name!r} has unknown domain {domain!r}; use one of {', '.join(DOMAINS)}"
            )
        parts = rest.split("/")
        expected = 4 if domain == "segment" else 3
        if len(parts) != expected or not all(parts):
            shape = "tenant/namespace/topic/<start>-<end>-<id>" if domain == "segment" \
                else "tenant/namespace/topic"
            raise ValueError(f"topic {name!r} is not {domain}://{shape}")
        return name
    parts = name.split("/")
    if len(parts) == 1:
        return f"persistent://{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}/{name}"
    if len(parts) == 3 and all(parts):
        return f"persistent://{name}"
    raise ValueError(
        f"topic {name!r} is neither a short name ('my-topic') nor 'tenant/namespace/topic'"
    )


def is_scalable(topic: str) -> bool:
    """Whether `topic` is a PIP-460 scalable topic (`topic://`)."""
    return topic.startswith("topic://")


def partition_name(topic: str, index: int) -> str:
    """The name of partition `index` of a partitioned topic."""
    return f"{topic}{PARTITION_SUFFIX}{index}"


def segment_name(parent: str, hash_start: int, hash_end: int, segment_id: int) -> str:
    """`segment://t/ns/x/<start:04x>-<end:04x>-<id>` for the scalable topic `parent`.

    Raises:
        ValueError: `parent` is not a `topic://` name.
    """
    if not is_scalable(parent):
        raise ValueError(f"segments belong to topic:// scalable topics, not {parent!r}")
    return f"segment://{parent[len('topic://'):]}/{hash_start:04x}-{hash_end:04x}-{segment_id}"


@dataclass(frozen=True)
class SegmentName:
    """The parts of a `segment://` name."""

    parent: str
    hash_start: int
    hash_end: int
    segment_id: int

    @classmethod
    def parse(cls, name: str) -> SegmentName:
        """Parse `segment://t/ns/x/<start>-<end>-<id>`.

        Raises:
            ValueError: not a segment name.
        """
        if not name.startswith("segment://"):
            raise ValueError(f"{name!r} is not a segment:// name")
        rest = name[len("segment://"):]
        head, _, descriptor = rest.rpartition("/")
        pieces = descriptor.split("-")
        if len(pieces) != 3 or head.count("/") != 2:
            raise ValueError(f"{name!r} is not segment://tenant/ns/topic/<start>-<end>-<id>")
        try:
            start, end, seg = int(pieces[0], 16), int(pieces[1], 16), int(pieces[2])
        except ValueError:
            raise ValueError(f"{name!r}: descriptor must be <hex>-<hex>-<decimal>") from None
        return cls(f"topic://{head}", start, end, seg)


@dataclass(frozen=True)
class ServiceUrl:
    """A `pulsar://host:port[,host:port...]` service URL."""

    hosts: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, url: str) -> ServiceUrl:
        """Parse a binary-protocol service URL.

        Raises:
            ValueError: not `pulsar://host:port`; TLS and HTTP URLs are refused with the fix.
        """
        scheme, sep, rest = url.partition("://")
        if not sep:
            raise ValueError(f"service URL {url!r} has no scheme; use pulsar://host:6650")
        if scheme == "pulsar+ssl":
            raise ValueError(f"service URL {url!r}: TLS is not supported by harness.client; "
                             "use a plain pulsar:// listener")
        if scheme in ("http", "https"):
            raise ValueError(f"service URL {url!r} is an HTTP URL; this client speaks the binary "
                             "protocol only: use pulsar://host:6650 (the admin client takes http://)")
        if scheme != "pulsar":
            raise ValueError(f"service URL {url!r} has scheme {scheme!r}; use pulsar://host:port")
        hosts: list[tuple[str, int]] = []
        for item in rest.rstrip("/").split(","):
            host, colon, port = item.rpartition(":")
            if not colon or not host:
                raise ValueError(f"service URL {url!r}: {item!r} is not host:port")
            try:
                hosts.append((host, int(port)))
            except ValueError:
                raise ValueError(f"service URL {url!r}: port {port!r} is not a number") from None
        return cls(tuple(hosts))

    def urls(self) -> list[str]:
        """One `pulsar://host:port` per host."""
        return [f"pulsar://{host}:{port}" for host, port in self.hosts]


def address_of(url: str) -> tuple[str, int]:
    """(host, port) of a single-host `pulsar://host:port` URL.

    Raises:
        ValueError: not a single-host pulsar:// URL.
    """
    parsed = ServiceUrl.parse(url)
    if len(parsed.hosts) != 1:
        raise ValueError(f"{url!r} names {len(parsed.hosts)} hosts; a broker URL names one")
    return parsed.hosts[0]
