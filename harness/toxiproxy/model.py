"""Toxiproxy's vocabulary: toxic types, the streams they affect, their attribute names.

Why its own module: the words are shared by the client (`harness.toxiproxy.client`),
the fault model and its actions (`faults`), and our proxy server (`faultproxy`), and
none of those should import another just to name a toxic. Names, defaults (0) and units
are Toxiproxy's:

| type | attributes |
|---|---|
| latency | `latency` ms, `jitter` ms (each chunk waits latency +/- jitter) |
| bandwidth | `rate` KB/s (1 KB = 1000 bytes, as Toxiproxy computes it) |
| slow_close | `delay` ms before the close goes through |
| timeout | `timeout` ms; data is dropped, the connection closes after it; 0 = never |
| reset_peer | `timeout` ms after the first data, both sockets are reset (RST) |
| slicer | `average_size` bytes, `size_variation` bytes, `delay` microseconds |
| limit_data | `bytes`: the connection closes once that many bytes went through |
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class Stream(StrEnum):
    UPSTREAM = "upstream"       # client -> server
    DOWNSTREAM = "downstream"   # server -> client


class ToxicType(StrEnum):
    LATENCY = "latency"
    BANDWIDTH = "bandwidth"
    SLOW_CLOSE = "slow_close"
    TIMEOUT = "timeout"
    RESET_PEER = "reset_peer"
    SLICER = "slicer"
    LIMIT_DATA = "limit_data"


ATTRIBUTES: Mapping[ToxicType, tuple[str, ...]] = MappingProxyType({
    ToxicType.LATENCY: ("latency", "jitter"),
    ToxicType.BANDWIDTH: ("rate",),
    ToxicType.SLOW_CLOSE: ("delay",),
    ToxicType.TIMEOUT: ("timeout",),
    ToxicType.RESET_PEER: ("timeout",),
    ToxicType.SLICER: ("average_size", "size_variation", "delay"),
    ToxicType.LIMIT_DATA: ("bytes",),
})
