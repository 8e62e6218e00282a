"""Clients of the ledger store: `LedgerClient` (asyncio, for brokers) and `BlockingLedgerClient`.

Theory of operation. Both speak the store RPC (`embedded.rpc`) and turn its answers
into typed outcomes: `Fenced`, `LedgerClosed`, `NoSuchLedger`, `NoSuchEntry`,
`InvalidRequest` are definite (the request was not applied); `LedgerUnavailable`
means no answer arrived (connection lost or refused, timeout) and the outcome is
unknown: an append may or may not be in the ledger.

`LedgerClient` keeps one connection and pipelines: any number of appends may be in
flight, each written the moment it is called, so the store assigns entry ids in call
order and answers them in that order (it answers each once its group commit is
durable). When the connection drops, the calls in flight fail `LedgerUnavailable`
and the next call reconnects (bounded attempts within its timeout). Reads, info,
list, fence and close are idempotent, so they are retried once on a fresh connection;
appends, creates and deletes never are (a retry could apply twice).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from embedded.ledger.model import (
    Fenced,
    InvalidRequest,
    LedgerClosed,
    LedgerError,
    LedgerInfo,
    LedgerKind,
    LedgerMetadata,
    LedgerState,
    LedgerUnavailable,
    NoSuchEntry,
    NoSuchLedger,
    error_from_code,
)
from embedded.rpc import AsyncRpcClient, BlockingRpcClient, RpcError, RpcUnavailable

T = TypeVar("T")

DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_CONNECT_ATTEMPTS = 5
_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)


def parse_address(address: str) -> tuple[str, int]:
    """`127.0.0.1:PORT` -> (host, port), with an error that says what is expected."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"ledger address {address!r} must look like 127.0.0.1:PORT")
    return host, int(port)


def _kind_value(kind: LedgerKind | str) -> str:
    return kind.value if isinstance(kind, LedgerKind) else LedgerKind(kind).value


def _split_entries(sizes: list[int], payload: bytes) -> list[bytes]:
    if sum(sizes) != len(payload):
        raise LedgerUnavailable(f"read answer sizes {sum(sizes)} do not match its {len(payload)} payload bytes")
    out, pos = [], 0
    for size in sizes:
        out.append(payload[pos:pos + size])
        pos += size
    return out


def _definite(err: RpcError) -> LedgerError:
    return error_from_code(err.code, err.message)


class LedgerClient:
    """asyncio client with pipelined appends and transparent reconnect. Use on one event loop."""

    def __init__(self, address: str, *, request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
                 connect_timeout: float = 5.0, connect_attempts: int = DEFAULT_CONNECT_ATTEMPTS) -> None:
        self.address = address
        self.host, self.port = parse_address(address)
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.connect_attempts = max(1, connect_attempts)
        self._rpc: AsyncRpcClient | None = None
        self._connect_lock: asyncio.Lock | None = None
        self._closed = False
        self.reconnects = 0

    async def __aenter__(self) -> LedgerClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._rpc is not None and not self._rpc.closed

    async def connect(self) -> None:
        """Connect, trying up to `connect_attempts` times with backoff; LedgerUnavailable after."""
        await self._ensure_connected(deadline=None)

    async def close(self) -> None:
        self._closed = True
        if self._rpc is not None:
            await self._rpc.close()
            self._rpc = None

    # ---- operations ----------------------------------------------------------------------------

    async def create_ledger(self, kind: LedgerKind | str, name: str) -> int:
        header, _ = await self._call("create", metadata={"kind": _kind_value(kind), "name": name})
        return int(header["ledger_id"])

    async def append(self, ledger_id: int, entry: bytes) -> int:
        """Append one entry; returns its entry id once it is durable."""
        header, _ = await self._call("append", entry, ledger_id=ledger_id)
        return int(header["entry_id"])

    async def read(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """Entries first..last (all durable), asking again while the store answers part of them."""
        entries: list[bytes] = []
        for _ in range(last - first + 2):  # each answer carries at least one entry
            start = first + len(entries)
            if start > last:
                break
            header, payload = await self._call("read", idempotent=True, ledger_id=ledger_id, first=start, last=last)
            got = _split_entries(list(header["sizes"]), payload)
            if not got:
                raise LedgerUnavailable(f"read of ledger {ledger_id} from {start} returned no entries")
            entries.extend(got)
        return entries

    async def close_ledger(self, ledger_id: int) -> int:
        """Close the ledger; returns its last entry id (-1 when empty)."""
        header, _ = await self._call("close", idempotent=True, ledger_id=ledger_id)
        return int(header["last_entry_id"])

    async def fence(self, ledger_id: int) -> int:
        """Fence the ledger (later appends fail Fenced); returns its last entry id, all durable."""
        header, _ = await self._call("fence", idempotent=True, ledger_id=ledger_id)
        return int(header["last_entry_id"])

    async def recover_ledger(self, ledger_id: int) -> int:
        """BookKeeper's open-with-recovery: fence (the old writer is stopped), then close.

        Returns the last entry id; entries 0..that id are all durable and readable.
        """
        await self.fence(ledger_id)
        return await self.close_ledger(ledger_id)

    async def info(self, ledger_id: int) -> LedgerInfo:
        header, _ = await self._call("info", idempotent=True, ledger_id=ledger_id)
        return LedgerInfo.from_json(header)

    async def delete_ledger(self, ledger_id: int) -> None:
        await self._call("delete", ledger_id=ledger_id)

    async def list_ledgers(self, kind: LedgerKind | str | None = None) -> list[LedgerInfo]:
        args: dict[str, Any] = {} if kind is None else {"kind": _kind_value(kind)}
        header, _ = await self._call("list", idempotent=True, **args)
        return [LedgerInfo.from_json(item) for item in header["ledgers"]]

    async def ping(self) -> None:
        await self._call("ping", idempotent=True)

    # ---- internals -----------------------------------------------------------------------------

    async def _call(self, op: str, payload: bytes = b"", *, idempotent: bool = False,
                    **args: Any) -> tuple[dict[str, Any], bytes]:
        deadline = time.monotonic() + self.request_timeout
        attempts = 2 if idempotent else 1
        last_error: RpcUnavailable | LedgerUnavailable | None = None
        for _ in range(attempts):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                rpc = await self._ensure_connected(deadline)
                return await rpc.call(op, payload, timeout=max(0.001, deadline - time.monotonic()), **args)
            except RpcError as err:
                raise _definite(err) from None
            except (RpcUnavailable, LedgerUnavailable) as err:
                last_error = err
        if isinstance(last_error, LedgerUnavailable):
            raise LedgerUnavailable(f"{op}: {last_error}")
        raise LedgerUnavailable(f"{op} to the ledger store at {self.address}: {last_error or 'timed out'} "
                                "(outcome unknown)")

    async def _ensure_connected(self, deadline: float | None) -> AsyncRpcClient:
        if self._rpc is not None and not self._rpc.closed:
            return self._rpc
        if self._closed:
            raise LedgerUnavailable("the ledger client was closed")
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._rpc is not None and not self._rpc.closed:
                return self._rpc
            error: Exception | None = None
            for attempt in range(self.connect_attempts):
                timeout = self.connect_timeout
                if deadline is not None:
                    timeout = min(timeout, deadline - time.monotonic())
                    if timeout <= 0:
                        break
                rpc = AsyncRpcClient(self.host, self.port)
                try:
                    await rpc.connect(timeout=timeout)
                except RpcUnavailable as err:
                    error = err
                    pause = _BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)]
                    if attempt + 1 < self.connect_attempts and (deadline is None or
                                                                time.monotonic() + pause < deadline):
                        await asyncio.sleep(pause)
                        continue
                    break
                if self._rpc is not None:
                    self.reconnects += 1
                self._rpc = rpc
                return rpc
            raise LedgerUnavailable(f"{error or f'cannot connect to {self.address} in time'}; "
                                    "is the ledger store running (txnbench cluster status)?")


class BlockingLedgerClient:
    """Thread-safe blocking client for tools and tests: same operations, one call at a time."""

    def __init__(self, address: str, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        self.address = address
        host, port = parse_address(address)
        self._rpc = BlockingRpcClient(host, port, timeout=timeout)

    def __enter__(self) -> BlockingLedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._rpc.close()

    def connect(self, attempts: int = DEFAULT_CONNECT_ATTEMPTS) -> None:
        """Ping until the store answers, up to `attempts` tries with backoff."""
        for attempt in range(max(1, attempts)):
            try:
                self.ping()
                return
            except LedgerUnavailable:
                if attempt + 1 >= attempts:
                    raise
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])

    def _call(self, op: str, payload: bytes = b"", *, idempotent: bool = False,
              **args: Any) -> tuple[dict[str, Any], bytes]:
        return _retrying(lambda: self._rpc.call(op, payload, **args), op, self.address, 2 if idempotent else 1)

    def ping(self) -> None:
        self._call("ping", idempotent=True)

    def create_ledger(self, kind: LedgerKind | str, name: str) -> int:
        header, _ = self._call("create", metadata={"kind": _kind_value(kind), "name": name})
        return int(header["ledger_id"])

    def append(self, ledger_id: int, entry: bytes) -> int:
        header, _ = self._call("append", entry, ledger_id=ledger_id)
        return int(header["entry_id"])

    def read(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        entries: list[bytes] = []
        for _ in range(last - first + 2):
            start = first + len(entries)
            if start > last:
                break
            header, payload = self._call("read", idempotent=True, ledger_id=ledger_id, first=start, last=last)
            got = _split_entries(list(header["sizes"]), payload)
            if not got:
                raise LedgerUnavailable(f"read of ledger {ledger_id} from {start} returned no entries")
            entries.extend(got)
        return entries

    def close_ledger(self, ledger_id: int) -> int:
        header, _ = self._call("close", idempotent=True, ledger_id=ledger_id)
        return int(header["last_entry_id"])

    def fence(self, ledger_id: int) -> int:
        header, _ = self._call("fence", idempotent=True, ledger_id=ledger_id)
        return int(header["last_entry_id"])

    def recover_ledger(self, ledger_id: int) -> int:
        """Fence, then close; returns the last entry id (see `LedgerClient.recover_ledger`)."""
        self.fence(ledger_id)
        return self.close_ledger(ledger_id)

    def info(self, ledger_id: int) -> LedgerInfo:
        header, _ = self._call("info", idempotent=True, ledger_id=ledger_id)
        return LedgerInfo.from_json(header)

    def delete_ledger(self, ledger_id: int) -> None:
        self._call("delete", ledger_id=ledger_id)

    def list_ledgers(self, kind: LedgerKind | str | None = None) -> list[LedgerInfo]:
        args: dict[str, Any] = {} if kind is None else {"kind": _kind_value(kind)}
        header, _ = self._call("list", idempotent=True, **args)
        return [LedgerInfo.from_json(item) for item in header["ledgers"]]


def _retrying(call: Callable[[], T], op: str, address: str, attempts: int) -> T:
    error: RpcUnavailable | None = None
    for _ in range(attempts):
        try:
            return call()
        except RpcError as err:
            raise _definite(err) from None
        except RpcUnavailable as err:
            error = err
    raise LedgerUnavailable(f"{op} to the ledger store at {address}: {error} (outcome unknown)")


__all__ = [
    "BlockingLedgerClient", "Fenced", "InvalidRequest", "LedgerClient", "LedgerClosed", "LedgerError",
    "LedgerInfo", "LedgerKind", "LedgerMetadata", "LedgerState", "LedgerUnavailable", "NoSuchEntry",
    "NoSuchLedger", "parse_address",
]
