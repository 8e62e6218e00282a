"""The v5 coordinator, transaction buffer and pending-ack store on a real, in-process metadata store.

No child processes: the metadata service runs in this test's event loop; the broker
around the components is faked (`fakes`). These check the metadata-level behaviour:
leadership and failover without replay, the header CAS and its indexes, decision
events, materialization and cleanup, recovery from the indexes, the sweeps, and the
PIP-473 review's GC race with a slow participant.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from embedded.broker.entry import EntryInfo
from embedded.broker.position import Position
from embedded.broker.txn_api import TxnAck, TxnError
from embedded.broker.v5.txn import keys
from embedded.broker.v5.txn.buffer import MetadataTransactionBuffer
from embedded.broker.v5.txn.pending_ack import MetadataPendingAckStore
from embedded.broker.v5.txn.records import TxnHeader, TxnState
from harness.wire import ServerError, TxnAction, TxnId
from tests.unit.v5.fakes import (
    SEGMENT,
    FakeLedger,
    FakeSubscription,
    FakeTopic,
    Node,
    metadata_service,
    start_node,
    stop_node,
)
from tests.waiting import eventually, eventually_async, run


@contextlib.asynccontextmanager
async def leading_node(tmp_path: Path, settings: dict[str, Any] | None = None) -> AsyncIterator[Node]:
    """One node on a fresh metadata store, once it leads coordinator partition 0; stopped after."""
    async with metadata_service(tmp_path) as address:
        node = await start_node(address, 0, settings)
        try:
            await eventually(lambda: node.coordinator.is_leader(0), what="leadership")
            yield node
        finally:
            await stop_node(node)


async def leader_of(nodes: list[Node], partition: int) -> Node:
    await eventually(lambda: any(n.coordinator.is_leader(partition) for n in nodes), what="a leader")
    return next(n for n in nodes if n.coordinator.is_leader(partition))


def test_leadership_ids_and_the_header_cas(tmp_path: Path) -> None:
    async def main() -> None:
        async with metadata_service(tmp_path) as address:
            nodes = [await start_node(address, 0), await start_node(address, 1)]
            try:
                leader = await leader_of(nodes, 0)
                other = next(n for n in nodes if n is not leader)
                if not other.coordinator.is_leader(0):
                    with pytest.raises(TxnError) as refused:
                        await other.coordinator.new_txn(0, 10_000)
                    assert refused.value.error is ServerError.TransactionCoordinatorNotFound
                with pytest.raises(TxnError, match="does not exist"):
                    await leader.coordinator.tc_client_connect(7)
                first = await leader.coordinator.new_txn(0, 10_000)
                second = await leader.coordinator.new_txn(0, 10_000)
                assert (first, second) == (TxnId(0, 0), TxnId(0, 1))
                client = leader.broker.metadata
                header = TxnHeader.from_json((await client.get(keys.header(first))).value)
                assert header.state is TxnState.OPEN and header.timeout_ms == 10_000
                assert await client.list("", "~", use_index=keys.IDX_TXN_BY_DEADLINE) == [
                    keys.header(first), keys.header(second)]

                await other.coordinator.end_txn(first, TxnAction.COMMIT)   # any broker may end it (CAS)
                await leader.coordinator.end_txn(first, TxnAction.COMMIT)  # a retry is fine
                with pytest.raises(TxnError) as invalid:
                    await leader.coordinator.end_txn(first, TxnAction.ABORT)
                assert invalid.value.error is ServerError.InvalidTxnStatus
                with pytest.raises(TxnError) as missing:
                    await leader.coordinator.end_txn(TxnId(0, 99), TxnAction.COMMIT)
                assert missing.value.error is ServerError.TransactionNotFound
                final = await client.list("COMMITTED:", "COMMITTED;", use_index=keys.IDX_TXN_BY_FINAL_STATE)
                assert final == [keys.header(first)]
                cas = nodes[0].broker.metrics.txn_md_header_cas.values
                cas1 = nodes[1].broker.metrics.txn_md_header_cas.values
                assert cas.get(("ok",), 0) + cas1.get(("ok",), 0) == 1
                assert cas.get(("reject",), 0) + cas1.get(("reject",), 0) == 2

                # the leader goes away: the other takes partition 0 over and continues the ids
                await stop_node(leader)
                nodes.remove(leader)
                survivor = await leader_of(nodes, 0)
                assert await survivor.coordinator.new_txn(0, 5_000) == TxnId(0, 2)
                recovery = survivor.broker.metrics.txn_recovery_seconds.get(coordinator_id="0")
                assert 0 <= recovery < 1.0
            finally:
                for node in nodes:
                    await stop_node(node)
    run(main)


def test_assignment_snapshots_follow_the_leaders(tmp_path: Path) -> None:
    class Channel:
        closed = False

        def __init__(self) -> None:
            self.sent: list[dict[int, str]] = []

        def send(self, command: object) -> None:
            snapshot = command.body.snapshot   # type: ignore[attr-defined]
            self.sent.append({a.tc_id: a.broker_service_url for a in snapshot.assignments})

        def add_close_listener(self, listener: object) -> None:
            return None

    async def main() -> None:
        async with metadata_service(tmp_path) as address:
            nodes = [await start_node(address, 0), await start_node(address, 1)]
            try:
                for p in (0, 1):
                    await leader_of(nodes, p)
                channel = Channel()
                await nodes[1].coordinator.watch_assignments(5, channel)   # type: ignore[arg-type]
                await eventually(lambda: bool(channel.sent) and len(channel.sent[-1]) == 2, what="a full snapshot")
                urls = {n.broker.advertised_service_url for n in nodes}
                assert set(channel.sent[-1].values()) <= urls
                gone = nodes[0]
                await stop_node(gone)
                nodes.remove(gone)
                survivor = nodes[0].broker.advertised_service_url
                await eventually(lambda: channel.sent[-1] == {0: survivor, 1: survivor}, what="the new snapshot")
            finally:
                for node in nodes:
                    await stop_node(node)
    run(main)


@pytest.mark.parametrize("delete_events", [False, True])
def test_buffer_writes_op_records_first_and_materializes_decisions(tmp_path: Path, delete_events: bool) -> None:
    """Pulsar 5.0 leaves consumed decision events in the store; the model-only setting deletes them."""
    async def main() -> None:
        async with metadata_service(tmp_path) as address:
            node = await start_node(address, 0, {"txnbenchV5DeleteConsumedEvents": delete_events})
            try:
                tc = node.coordinator
                await eventually(lambda: tc.is_leader(0) and tc.is_leader(1), what="leadership")
                ledger = FakeLedger()
                topic = FakeTopic(SEGMENT, ledger)
                tb = MetadataTransactionBuffer(topic, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
                ledger.listeners.append(tb.on_entry_added)
                moves: list[Position] = []
                tb.add_listener(lambda: moves.append(tb.max_read_position()))
                await tb.recover()

                await ledger.append(b"plain", EntryInfo())
                committed, aborted = await tc.new_txn(0, 60_000), await tc.new_txn(1, 60_000)
                p1 = await tb.append(committed, b"c1", EntryInfo(1, committed))
                p2 = await tb.append(aborted, b"a1", EntryInfo(1, aborted))
                await ledger.append(b"plain2", EntryInfo())
                assert tb.max_read_position() == Position(1, 0)   # pinned before p1
                ops = await node.store.writes_by_segment(str(SEGMENT))
                assert {o.txn for o in ops} == {committed, aborted}
                assert node.broker.metrics.txn_md_op_writes.get() == 2

                await tc.end_txn(committed, TxnAction.COMMIT)
                await eventually(lambda: tb.max_read_position() == Position(p2.ledger_id, p2.entry_id - 1),
                                 what="the commit to move the horizon")
                await tc.end_txn(aborted, TxnAction.ABORT)
                await eventually(lambda: tb.is_aborted(aborted, p2), what="the abort")
                await eventually(lambda: tb.max_read_position() == ledger.last_confirmed, what="the horizon")
                assert moves[-1] == ledger.last_confirmed   # listeners were told (no polling)
                assert p1 < p2

                await eventually_async(lambda: node.store.writes_by_segment(str(SEGMENT)), lambda ops: not ops,
                                       what="the op records to be deleted")
                assert await node.store.aborted_of(str(SEGMENT)) == [aborted]
                events = await node.store.pending_events(keys.segment_events_parent(str(SEGMENT)))
                assert len(events) == (0 if delete_events else 2)

                with pytest.raises(TxnError) as late:
                    await tb.append(committed, b"late", EntryInfo(1, committed))
                assert late.value.error is ServerError.TransactionConflict

                # a fresh buffer (another owner) recovers from the store alone
                open_txn = await tc.new_txn(0, 60_000)
                await tb.append(open_txn, b"o1", EntryInfo(1, open_txn))
                await tb.close()
                again = MetadataTransactionBuffer(topic, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
                await again.recover()
                assert again.is_aborted(aborted, p2)
                assert again.stats()["recoveredOpenTxnCount"] == 1
                assert again.max_read_position() <= Position(1, 3)   # pinned at the watermark, not past o1
                await tc.end_txn(open_txn, TxnAction.COMMIT)
                await eventually(lambda: again.max_read_position() == ledger.last_confirmed, what="recovered commit")
                await again.close()
            finally:
                await stop_node(node)
    run(main)


def test_pending_acks_commit_abort_conflict_and_recover(tmp_path: Path) -> None:
    async def main() -> None:
        async with leading_node(tmp_path) as node:
            tc = node.coordinator
            sub = FakeSubscription(FakeTopic(SEGMENT, FakeLedger()), "sub")
            store = MetadataPendingAckStore(sub, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
            await store.recover()
            a, b = await tc.new_txn(0, 60_000), await tc.new_txn(0, 60_000)
            await store.individual_ack(a, [TxnAck(Position(1, 0)), TxnAck(Position(1, 1))])
            assert store.is_pending(Position(1, 0))
            with pytest.raises(TxnError) as conflict:
                await store.individual_ack(b, [TxnAck(Position(1, 1))])
            assert conflict.value.error is ServerError.TransactionConflict
            await store.individual_ack(b, [TxnAck(Position(1, 2))])
            ops = await node.store.acks_by_subscription(str(SEGMENT), "sub")
            assert sorted((o.txn.least, o.op.entry_id) for o in ops) == [(0, 0), (0, 1), (1, 2)]

            await tc.end_txn(a, TxnAction.COMMIT)
            await eventually(lambda: sub.cursor.acked == {Position(1, 0), Position(1, 1)}, what="the commit")
            assert sub.cursor.flushes >= 1 and not store.is_pending(Position(1, 0))
            with pytest.raises(TxnError):
                await store.individual_ack(a, [TxnAck(Position(1, 5))])   # a ended: late acks refused

            await store.close()   # another owner takes the subscription over
            again = MetadataPendingAckStore(sub, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
            await again.recover()
            assert again.is_pending(Position(1, 2))   # recovered from idx:acks-by-segment-subscription
            await tc.end_txn(b, TxnAction.ABORT)
            await eventually(lambda: Position(1, 2) in sub.redelivered, what="the abort's redelivery")
            assert not again.is_pending(Position(1, 2)) and Position(1, 2) not in sub.cursor.acked
            await eventually(lambda: again.stats()["aborted"] == 1, what="the abort")
            await again.close()
            remaining = await node.store.acks_by_subscription(str(SEGMENT), "sub")
            assert remaining == []
    run(main)


def test_timeout_sweep_aborts_expired_transactions(tmp_path: Path) -> None:
    async def main() -> None:
        async with leading_node(tmp_path) as node:
            tc = node.coordinator
            short, long_ = await tc.new_txn(0, 1), await tc.new_txn(0, 600_000)
            created = TxnHeader.from_json((await node.broker.metadata.get(keys.header(short))).value)
            await eventually(lambda: time.time() * 1000 > created.deadline_ms, what="the deadline")
            assert await tc.sweep_timeouts() == 1
            header = TxnHeader.from_json((await node.broker.metadata.get(keys.header(short))).value)
            assert header.state is TxnState.ABORTED
            assert node.broker.metrics.txn_timeout.get(coordinator_id="0") == 1
            assert node.broker.metrics.txn_active.get(coordinator_id="0") == 2   # counted before the aborts
            await tc.end_txn(long_, TxnAction.COMMIT)
    run(main)


@pytest.mark.parametrize("policy", ["force-delete", "redrive"])
def test_gc_race_with_a_slow_participant(tmp_path: Path, policy: str) -> None:
    """The PIP-473 review: GC runs before a slow participant applied a commit.

    With the PIP's force-delete the participant's commit finds no op records and the
    committed acks are lost (the messages are delivered again: the checker's `lost-ack`);
    with Pulsar 5.0's re-drive the header and records stay and nothing is lost.
    """
    async def main() -> None:
        async with leading_node(tmp_path, {"txnbenchV5GcLeftoverOps": policy,
                                           "txnbenchV5ParticipantDelayMillis": 600,
                                           "txnbenchV5ParticipantDelayMatch": "|slow"}) as node:
            tc = node.coordinator
            sub = FakeSubscription(FakeTopic(SEGMENT, FakeLedger()), "slow")
            store = MetadataPendingAckStore(sub, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
            await store.recover()
            txn = await tc.new_txn(0, 60_000)
            acked = [Position(1, 0), Position(1, 1)]
            await store.individual_ack(txn, [TxnAck(p) for p in acked])
            await tc.end_txn(txn, TxnAction.COMMIT)
            await tc.sweep_gc()   # retention 0: the transaction is already collectable
            header = await node.broker.metadata.get_or_none(keys.header(txn))
            await eventually(lambda: store.stats()["committed"] == 1, what="the slow commit")
            if policy == "force-delete":
                assert header is None
                assert node.metrics.gc_forced_ops.get() == 2
                assert sub.cursor.acked == set()                  # the committed acks were never applied
                assert sorted(sub.redelivered) == acked            # ... and are delivered again
                assert node.metrics.lost_acks.get() == 2
            else:
                assert header is not None and json.loads(header.value or "{}")["state"] == "COMMITTED"
                assert node.metrics.gc_redrives.get() == 1
                assert sub.cursor.acked == set(acked) and sub.redelivered == []
                await eventually(lambda: node.metrics.lost_acks.get() == 0, what="nothing lost")
                await tc.sweep_gc()   # the participant cleaned up: now the header goes
                assert await node.broker.metadata.get_or_none(keys.header(txn)) is None
            await store.close()
    run(main)


@pytest.mark.parametrize("blocks", [False, True])
def test_ids_are_one_counter_cas_each_as_in_pulsar_unless_blocks_are_on(tmp_path: Path, blocks: bool) -> None:
    """5.0's `nextTxnSequence` is one get + CAS per id; `txnbenchV5IdBlocks` shares a CAS among waiters."""
    async def main() -> None:
        import asyncio

        from embedded.broker.v5.txn.ids import SequenceAllocator

        async with metadata_service(tmp_path) as address:
            node = await start_node(address, 0)
            try:
                allocator = SequenceAllocator(node.store.client, 3, blocks=blocks)
                ids = await asyncio.gather(*(allocator.next() for _ in range(10)))
                assert sorted(ids) == list(range(10))
                if blocks:
                    assert allocator.cas_writes < 10
                else:
                    assert allocator.cas_writes == 10
            finally:
                await stop_node(node)
    run(main)


@pytest.mark.parametrize("after_cas", [False, True])
def test_end_txn_is_answered_when_pulsar_answers_it(tmp_path: Path, after_cas: bool) -> None:
    """5.0's endTransaction completes after the events are written; the PIP text answers after the CAS."""
    async def main() -> None:
        from embedded.broker.v5.txn.records import TxnOp

        async with leading_node(tmp_path, {"txnbenchV5AnswerEndTxnAfterCas": after_cas}) as node:
            tc = node.coordinator
            txn = await tc.new_txn(0, 60_000)
            await node.store.append_op(txn, TxnOp.write(str(SEGMENT)))
            parent = keys.segment_events_parent(str(SEGMENT))
            await tc.end_txn(txn, TxnAction.COMMIT)
            header = await node.store.get_header(txn)
            assert header is not None and header[0].state is TxnState.COMMITTED
            if not after_cas:
                assert len(await node.store.pending_events(parent)) == 1   # written before the answer
            await eventually_async(lambda: node.store.pending_events(parent), lambda e: len(e) == 1,
                                   what="the decision event")
    run(main)


@pytest.mark.parametrize("reads_header", [False, True])
def test_late_acks_after_the_subscription_was_reloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      reads_header: bool) -> None:
    """An ack of a decided transaction reaching a store that does not remember the decision.

    Pulsar 5.0 (the default) reads no header on the ack path: the ack is held and recorded,
    and the header decides it later (a committed transaction applies it, an aborted one
    releases it). `txnbenchV5AckReadsHeader` (model-only) refuses it at once instead.
    """
    from embedded.broker.v5.txn import participant

    monkeypatch.setattr(participant, "RECONCILE_MIN_INTERVAL_S", 0.2)

    async def main() -> None:
        async with leading_node(tmp_path, {"txnbenchV5AckReadsHeader": reads_header,
                                           "txnbenchV5TimeoutSweepIntervalMillis": 200}) as node:
            tc = node.coordinator
            sub = FakeSubscription(FakeTopic(SEGMENT, FakeLedger()), "sub")
            store = MetadataPendingAckStore(sub, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
            await store.recover()
            committed, aborted = await tc.new_txn(0, 60_000), await tc.new_txn(0, 60_000)
            await store.individual_ack(committed, [TxnAck(Position(1, 0))])
            await store.individual_ack(aborted, [TxnAck(Position(1, 1))])
            await tc.end_txn(committed, TxnAction.COMMIT)
            await tc.end_txn(aborted, TxnAction.ABORT)
            await eventually(lambda: Position(1, 0) in sub.cursor.acked and Position(1, 1) in sub.redelivered,
                             what="both decisions")
            await eventually(lambda: store.stats()["committed"] == 1 and store.stats()["aborted"] == 1,
                             what="both decisions applied")
            await store.close()   # another owner loads the subscription: nothing of either is left
            reloaded = MetadataPendingAckStore(sub, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
            await reloaded.recover()

            header_reads = 0
            get_header = node.store.get_header

            async def counting(txn: TxnId) -> tuple[TxnHeader, int] | None:
                nonlocal header_reads
                header_reads += 1
                return await get_header(txn)

            monkeypatch.setattr(node.store, "get_header", counting)
            late = [(committed, Position(1, 5)), (aborted, Position(1, 6))]
            if reads_header:
                for txn, position in late:
                    with pytest.raises(TxnError) as refused:
                        await reloaded.individual_ack(txn, [TxnAck(position)])
                    assert refused.value.error is ServerError.TransactionConflict
                    assert not reloaded.is_pending(position)
                assert header_reads == 2
                assert await node.store.acks_by_subscription(str(SEGMENT), "sub") == []
            else:
                for txn, position in late:
                    await reloaded.individual_ack(txn, [TxnAck(position)])   # accepted, as in 5.0
                    assert reloaded.is_pending(position)
                assert header_reads == 0
                recorded = await node.store.acks_by_subscription(str(SEGMENT), "sub")
                assert sorted(o.op.entry_id for o in recorded) == [5, 6]
                # the headers decide: the committed transaction takes the late ack, the aborted one releases it
                await eventually(lambda: Position(1, 5) in sub.cursor.acked and Position(1, 6) in sub.redelivered,
                                 what="the late acks settled by the headers")
                assert not reloaded.is_pending(Position(1, 5)) and not reloaded.is_pending(Position(1, 6))
                assert Position(1, 6) not in sub.cursor.acked
                await eventually_async(lambda: node.store.acks_by_subscription(str(SEGMENT), "sub"),
                                       lambda left: left == [], what="the late op records deleted")
            await reloaded.close()
    run(main)


def test_a_header_read_answered_after_the_commit_and_its_collection_hides_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chaos.yaml's zombie coordinator (v5, `aborted-read` + `partial-txn` on one transaction).

    The participant's reconcile read a tracked transaction's header; before the answer
    came, the transaction's commit event was applied here (op records deleted) and the
    GC collected the header (no op records left, retention over). The late answer said
    "no header", which reads as ABORTED: the buffer then hid the committed, already
    delivered entries on this segment while the other segments showed theirs. Now the
    reconcile skips a transaction decided meanwhile, and a participant never replaces
    the decision it materialized first.
    """
    import asyncio

    from embedded.broker.v5.txn import participant

    monkeypatch.setattr(participant, "RECONCILE_MIN_INTERVAL_S", 0.2)

    async def main() -> None:
        async with leading_node(tmp_path, {"txnbenchV5TimeoutSweepIntervalMillis": 200}) as node:
            tc = node.coordinator
            ledger = FakeLedger()
            topic = FakeTopic(SEGMENT, ledger)
            tb = MetadataTransactionBuffer(topic, node.store, node.settings, node.metrics)  # type: ignore[arg-type]
            ledger.listeners.append(tb.on_entry_added)
            await tb.recover()
            committed, other = await tc.new_txn(0, 60_000), await tc.new_txn(0, 60_000)
            position = await tb.append(committed, b"c1", EntryInfo(1, committed))
            await tb.append(other, b"o1", EntryInfo(1, other))   # stays open: the reconcile reads it after

            entered, release, other_read = asyncio.Event(), asyncio.Event(), asyncio.Event()
            get_header = node.store.get_header

            async def held_once(txn: TxnId) -> tuple[TxnHeader, int] | None:
                if txn == committed and not entered.is_set():
                    entered.set()              # the reconcile's read of `committed` is on its way ...
                    await release.wait()       # ... and is answered only after the commit and the GC
                elif txn == other and release.is_set():
                    other_read.set()           # the reconcile went past `committed`
                return await get_header(txn)

            monkeypatch.setattr(node.store, "get_header", held_once)
            await asyncio.wait_for(entered.wait(), 5.0)
            await tc.end_txn(committed, TxnAction.COMMIT)
            await eventually(lambda: tb.stats()["committed"] == 1, what="the commit event applied")
            await eventually_async(lambda: node.store.writes_by_segment(str(SEGMENT)),
                                   lambda ops: {o.txn for o in ops} == {other}, what="its op record deleted")
            assert not tb.is_aborted(committed, position)
            assert await tc.sweep_gc() == 1   # retention 0 and no op records left: the header goes
            assert await node.broker.metadata.get_or_none(keys.header(committed)) is None

            release.set()   # the reconcile's read now answers "no header" (ABORTED)
            await asyncio.wait_for(other_read.wait(), 5.0)
            assert not tb.is_aborted(committed, position)
            assert tb.stats()["aborted"] == 0
            assert await node.store.aborted_of(str(SEGMENT)) == []

            # the narrower race (a stale answer racing the apply itself): the first decision stays
            await tb.materialize(committed, TxnState.ABORTED)
            assert tb.decision_of(committed) is TxnState.COMMITTED
            assert tb.stale_decisions == 1
            assert not tb.is_aborted(committed, position)
            assert await node.store.aborted_of(str(SEGMENT)) == []
            await tb.close()
    run(main)


@pytest.mark.parametrize("fails", ["read", "cas", "publish"])
def test_end_txn_says_retry_only_when_nothing_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          fails: str) -> None:
    """TransactionCoordinatorNotFound tells the client "not applied, resend"; after the header CAS
    was sent the answer is UnknownError (the outcome is unknown), as Pulsar maps a metadata-store
    exception. In the chaos run the zombie coordinator's CAS landed unanswered, the client was
    told to retry, the GC collected the header, and the retry's TransactionNotFound made the
    client report a committed transaction as failed (`aborted-read` on every value it wrote)."""
    from embedded.broker.v5.txn.records import TxnOp
    from embedded.metadata.model import MetadataUnavailable

    async def main() -> None:
        async with leading_node(tmp_path) as node:
            tc = node.coordinator
            txn = await tc.new_txn(0, 60_000)
            await node.store.append_op(txn, TxnOp.write(str(SEGMENT)))
            store = node.store
            real_get, real_update, real_publish = store.get_header, store.update_header, store.publish_segment_event

            async def get_header(t: TxnId) -> tuple[TxnHeader, int] | None:
                raise MetadataUnavailable("get timed out")

            async def update_header(t: TxnId, header: TxnHeader, expected_version: int) -> int:
                await real_update(t, header, expected_version)    # it lands ...
                raise MetadataUnavailable("put timed out after 5s; the outcome is unknown")   # ... unanswered

            async def publish(segment: str, event: object) -> str:
                raise MetadataUnavailable("put timed out")

            if fails == "read":
                monkeypatch.setattr(store, "get_header", get_header)
            elif fails == "cas":
                monkeypatch.setattr(store, "update_header", update_header)
            else:
                monkeypatch.setattr(store, "publish_segment_event", publish)
            with pytest.raises(TxnError) as failed:
                await tc.end_txn(txn, TxnAction.COMMIT)
            monkeypatch.setattr(store, "get_header", real_get)
            monkeypatch.setattr(store, "publish_segment_event", real_publish)
            got = await store.get_header(txn)
            assert got is not None
            if fails == "read":
                assert failed.value.error is ServerError.TransactionCoordinatorNotFound
                assert got[0].state is TxnState.OPEN
            else:
                assert failed.value.error is ServerError.UnknownError
                assert got[0].state is TxnState.COMMITTED
    run(main)
