"""Transaction ids of one coordinator partition, from the CAS counter `/txn/tc-seq/<tcId>`.

Theory of operation (Pulsar's `TxnMetadataStore.nextTxnSequence`). The record holds
`{"next": n}`; drawing an id is a compare-and-set from n to n + k, so two brokers that
both believe they lead the partition can never hand out the same `least` (the
participants' aborted sets are keyed by txn id: reuse would be wrong). As Pulsar 5.0
does, each id is one read of the counter and one CAS (draws of one partition are
serialized here, so they do not conflict with each other). With `txnbenchV5IdBlocks`
(model-only, off by default) NEW_TXNs that arrive while a CAS is in flight wait for the
next one, which reserves a block for all of them at once, and the record's version is
kept between draws and re-read only after a conflict (or a change of leadership,
`reset`): the same counter, fewer reads and writes under load.
"""

from __future__ import annotations

import asyncio
import json
import logging

from embedded.broker.tasks import spawn
from embedded.broker.v5.txn import keys
from embedded.metadata.backend import MetadataBackend
from embedded.metadata.model import MUST_NOT_EXIST, BadVersion

log = logging.getLogger(__name__)

_MAX_CONFLICTS = 20


class SequenceExhausted(Exception):
    """The counter kept changing under us: another broker is drawing ids for this partition."""


class SequenceAllocator:
    def __init__(self, client: MetadataBackend, tc_id: int, *, blocks: bool = False) -> None:
        self.client = client
        self.blocks = blocks
        self.tc_id = tc_id
        self.key = keys.tc_sequence(tc_id)
        self._cached: tuple[int, int] | None = None   # (next, version id)
        self._waiters: list[asyncio.Future[int]] = []
        self._draining = False
        self._one_at_a_time = asyncio.Lock()
        self.cas_writes = 0

    def reset(self) -> None:
        self._cached = None

    async def prime(self) -> int:
        """Read the counter (on becoming leader); returns the next id."""
        self._cached = await self._read()
        return self._cached[0]

    async def next(self) -> int:
        if not self.blocks:
            # Pulsar 5.0: one get + CAS per id, done by the request that needs it (serialized per partition)
            async with self._one_at_a_time:
                self._cached = None
                return await self._reserve(1)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        if not self._draining:
            self._draining = True
            spawn(self._drain(), f"drawing ids of coordinator {self.tc_id}")
        return await future

    async def _drain(self) -> None:
        try:
            while self._waiters:   # bounded: each round serves everyone waiting when it started
                batch, self._waiters = self._waiters, []
                try:
                    first = await self._reserve(len(batch))
                except Exception as err:
                    for future in batch:
                        if not future.done():
                            future.set_exception(err)
                    continue
                for i, future in enumerate(batch):
                    if not future.done():
                        future.set_result(first + i)
        finally:
            self._draining = False

    async def _read(self) -> tuple[int, int]:
        got = await self.client.get_or_none(self.key)
        if got is None:
            return 0, MUST_NOT_EXIST
        return int(json.loads(got.value or "{}").get("next", 0)), got.version.version_id

    async def _reserve(self, count: int) -> int:
        for _ in range(_MAX_CONFLICTS):
            if self._cached is None:
                self._cached = await self._read()
            first, version = self._cached
            try:
                result = await self.client.put(self.key, json.dumps({"next": first + count}),
                                               expected_version=version)
            except BadVersion:
                self._cached = None
                continue
            except BaseException:
                self._cached = None   # unknown outcome: re-read before the next draw
                raise
            self.cas_writes += 1
            self._cached = (first + count, result.version.version_id)
            return first
        raise SequenceExhausted(f"{self.key} changed {_MAX_CONFLICTS} times while drawing ids; is another broker "
                                f"leading coordinator {self.tc_id}?")
