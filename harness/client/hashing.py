"""Key hashing for routing: Murmur3_32 as Pulsar computes it, and the two routing rules.

* v5 scalable topics (Java `SegmentRouter`/`ScalableTopicHashing`): the *raw* (unmasked)
  32-bit Murmur3 hash of the key's UTF-8 bytes, seed 0; its high 16 bits are the
  segment-routing hash in [0, 0xFFFF], matched against each active segment's inclusive
  [hash_start, hash_end] (the low 16 bits are reserved for PIP-486 entry buckets).
* v4 partitioned topics: `signSafeMod(Murmur3_32Hash.makeHash(key), partitions)`,
  where `makeHash` clears bit 31. That is Pulsar's `HashingScheme.Murmur3_32Hash`
  (the Java client's default scheme is `JavaStringHash`; we use Murmur3 so v4 and the
  v5 legacy-segment routing agree, and document it here).
"""

from __future__ import annotations

import functools

MAX_SEGMENT_HASH = 0xFFFF

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_M32 = 0xFFFFFFFF


def _rotl(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (32 - shift))) & _M32


_KEY_HASH_CACHE = 4096
"""Keys whose hash is remembered: a run's keys are few (`workload.keys`) and each message
of the load routes by one; hashing in pure Python was ~1% of the load process (issue #27)."""


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86_32 of `data` as an unsigned 32-bit int (Java's int bits, unsigned)."""
    length = len(data)
    h1 = seed & _M32
    rounded = length & ~3
    for offset in range(0, rounded, 4):
        k1 = int.from_bytes(data[offset:offset + 4], "little")
        k1 = (k1 * _C1) & _M32
        k1 = _rotl(k1, 15)
        k1 = (k1 * _C2) & _M32
        h1 ^= k1
        h1 = _rotl(h1, 13)
        h1 = (h1 * 5 + 0xE6546B64) & _M32
    k1 = 0
    for index, byte in enumerate(data[rounded:]):
        k1 ^= byte << (index * 8)
    k1 = (k1 * _C1) & _M32
    k1 = _rotl(k1, 15)
    k1 = (k1 * _C2) & _M32
    h1 ^= k1
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    h1 ^= h1 >> 16
    return h1


@functools.lru_cache(maxsize=_KEY_HASH_CACHE)
def key_hash(key: str) -> int:
    """Murmur3 (seed 0) of the key's UTF-8 bytes, remembered for the most recent keys."""
    return murmur3_32(key.encode("utf-8"))


def segment_hash(key: str) -> int:
    """The 16-bit segment-routing hash of a key (high half of the raw Murmur3)."""
    return (key_hash(key) >> 16) & MAX_SEGMENT_HASH


def partition_for_key(key: str, partitions: int) -> int:
    """The partition a keyed message goes to on a v4 partitioned topic.

    Raises:
        ValueError: `partitions` is not positive.
    """
    if partitions <= 0:
        raise ValueError(f"a partitioned topic has at least one partition, got {partitions}")
    return (key_hash(key) & 0x7FFFFFFF) % partitions
