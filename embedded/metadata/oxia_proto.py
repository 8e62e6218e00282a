"""Oxia's client protocol messages, taken from the installed `oxia` package.

Why import rather than generate: the PyPI `oxia` client ships the betterproto2 classes
generated from its `client.proto`; serving exactly those classes means the store speaks
the protocol version of the client it is checked with. Nothing of the package is copied
into the project: this module only names where the classes live and what the service is
called on the wire, so a newer `oxia` release that moves them fails here with one clear
message instead of deep inside the server.
"""

from __future__ import annotations

try:
    from oxia.internal.proto.io.streamnative.oxia import proto as pb
except ImportError as err:   # pragma: no cover - a broken install, reported in one line
    raise ImportError(
        f"the Oxia frontend needs the `oxia` package (PyPI oxia 0.2.x, installed by `make setup`): {err}"
    ) from None

#: The gRPC service name in `client.proto` (`package io.streamnative.oxia.proto; service OxiaClient`).
SERVICE = "io.streamnative.oxia.proto.OxiaClient"

#: The namespace every Oxia client uses unless told otherwise; our store has only this one.
DEFAULT_NAMESPACE = "default"

#: Our store is one shard covering the whole 32-bit xxhash range.
SHARD = 0
HASH_MIN = 0
HASH_MAX = 0xFFFFFFFF

#: Oxia's session timeout bounds (`common/constant/constants.go`: MinSessionTimeout 2 s,
#: MaxSessionTimeout 5 min); a request outside them is INVALID_ARGUMENT.
MIN_SESSION_TIMEOUT_MS = 2_000
MAX_SESSION_TIMEOUT_MS = 5 * 60 * 1000

__all__ = ["DEFAULT_NAMESPACE", "HASH_MAX", "HASH_MIN", "MAX_SESSION_TIMEOUT_MS", "MIN_SESSION_TIMEOUT_MS",
           "SERVICE", "SHARD", "pb"]
