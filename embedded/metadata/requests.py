"""Request arguments and response parsing shared by the asyncio and blocking clients (sans-IO)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embedded.metadata.model import Comparison, GetResult, PutResult, Version


def _compact(**args: Any) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v is not None}


def put_args(key: str, value: str, *, expected_version: int | None = None, ephemeral: bool = False,
             session_id: int | None = None, partition_key: str | None = None,
             sequence_keys_deltas: Sequence[int] | None = None,
             secondary_indexes: Mapping[str, str] | None = None) -> dict[str, Any]:
    if not isinstance(value, str):
        raise TypeError(f"metadata values are text; got {type(value).__name__} for {key!r} (use put_json for objects)")
    return _compact(key=key, value=value, expected_version=expected_version, ephemeral=ephemeral or None,
                    session_id=session_id, partition_key=partition_key,
                    sequence_keys_deltas=list(sequence_keys_deltas) if sequence_keys_deltas is not None else None,
                    secondary_indexes=dict(secondary_indexes) if secondary_indexes else None)


def get_args(key: str, comparison: Comparison, use_index: str | None, include_value: bool) -> dict[str, Any]:
    return _compact(key=key, comparison=None if comparison is Comparison.EQUAL else comparison.value,
                    use_index=use_index, include_value=None if include_value else False)


def range_args(min_key: str, max_key: str, use_index: str | None, limit: int | None = None,
               include_value: bool = True) -> dict[str, Any]:
    return _compact(min=min_key, max=max_key, use_index=use_index, limit=limit,
                    include_value=None if include_value else False)


def parse_put(header: Mapping[str, Any]) -> PutResult:
    return PutResult(str(header["key"]), Version.from_wire(header["version"]))


def parse_get(header: Mapping[str, Any]) -> GetResult:
    return GetResult.from_wire(dict(header))


def parse_records(header: Mapping[str, Any]) -> list[GetResult]:
    return [GetResult.from_wire(r) for r in header["records"]]
