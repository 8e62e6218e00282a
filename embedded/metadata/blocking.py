"""A blocking, thread-safe client of the metadata store for tools and tests.

Request/response only: no watches and no automatic keepalives (call
`session_keepalive` yourself). Errors are the same typed exceptions as the asyncio
client: KeyNotFound, BadVersion, SessionExpired, InvalidOptions (definite) and
MetadataUnavailable (no answer: the outcome is unknown). A lost connection is
reopened on the next call.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from typing import Any

from embedded.metadata import requests
from embedded.metadata.client import parse_address
from embedded.metadata.model import (
    Comparison,
    GetResult,
    KeyNotFound,
    MetadataUnavailable,
    PutResult,
    Version,
    error_from_code,
)
from embedded.metadata.state import prefix_end
from embedded.rpc import BlockingRpcClient, RpcError, RpcUnavailable


class BlockingMetadataClient:
    def __init__(self, address: str | tuple[str, int], timeout: float = 10.0) -> None:
        host, port = parse_address(address)
        self._rpc = BlockingRpcClient(host, port, timeout)
        self.address = f"{host}:{port}"

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        try:
            header, _ = self._rpc.call(op, **args)
        except RpcError as err:
            raise error_from_code(err.code, err.message) from None
        except RpcUnavailable as err:
            raise MetadataUnavailable(f"{op} on the metadata store at {self.address}: {err}") from None
        return header

    def close(self) -> None:
        self._rpc.close()

    def __enter__(self) -> BlockingMetadataClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self) -> None:
        self.call("ping")

    def stats(self) -> dict[str, Any]:
        return dict(self.call("stats")["stats"])

    def get(self, key: str, *, comparison: Comparison = Comparison.EQUAL, use_index: str | None = None,
            include_value: bool = True) -> GetResult:
        return requests.parse_get(self.call("get", **requests.get_args(key, comparison, use_index, include_value)))

    def get_or_none(self, key: str) -> GetResult | None:
        try:
            return self.get(key)
        except KeyNotFound:
            return None

    def put(self, key: str, value: str, *, expected_version: int | None = None, ephemeral: bool = False,
            session_id: int | None = None, partition_key: str | None = None,
            sequence_keys_deltas: Sequence[int] | None = None,
            secondary_indexes: Mapping[str, str] | None = None) -> PutResult:
        return requests.parse_put(self.call("put", **requests.put_args(
            key, value, expected_version=expected_version, ephemeral=ephemeral, session_id=session_id,
            partition_key=partition_key, sequence_keys_deltas=sequence_keys_deltas,
            secondary_indexes=secondary_indexes)))

    def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        args: dict[str, Any] = {"key": key}
        if expected_version is not None:
            args["expected_version"] = expected_version
        return bool(self.call("delete", **args)["deleted"])

    def delete_range(self, min_key: str, max_key: str) -> int:
        return int(self.call("delete_range", min=min_key, max=max_key)["count"])

    def list(self, min_key: str, max_key: str, *, use_index: str | None = None) -> builtins.list[str]:
        return [str(k) for k in self.call("list", **requests.range_args(min_key, max_key, use_index))["keys"]]

    def list_prefix(self, prefix: str) -> builtins.list[str]:
        return self.list(prefix, prefix_end(prefix))

    def range_scan(self, min_key: str, max_key: str, *, use_index: str | None = None, limit: int | None = None,
                   include_value: bool = True) -> builtins.list[GetResult]:
        return requests.parse_records(self.call("range_scan", **requests.range_args(
            min_key, max_key, use_index, limit, include_value)))

    def get_json(self, key: str) -> tuple[Any, Version]:
        result = self.get(key)
        return json.loads(result.value or "null"), result.version

    def put_json(self, key: str, obj: Any, *, expected_version: int | None = None, **kw: Any) -> PutResult:
        return self.put(key, json.dumps(obj, separators=(",", ":"), sort_keys=True),
                        expected_version=expected_version, **kw)

    def session_open(self, timeout_ms: int, client: str = "") -> int:
        return int(self.call("session_open", timeout_ms=timeout_ms, client=client)["session_id"])

    def session_keepalive(self, session_id: int) -> None:
        self.call("session_keepalive", session_id=session_id)

    def session_close(self, session_id: int) -> int:
        return int(self.call("session_close", session_id=session_id)["deleted"])
