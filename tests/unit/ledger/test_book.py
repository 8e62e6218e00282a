"""The ledger state machine, without I/O: states, fencing, ids, confirmation, replay."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedded.ledger.book import SEAL_TRANSITIONS, LedgerBook, Replayed
from embedded.ledger.model import (
    MAX_ENTRY_BYTES,
    Fenced,
    InvalidRequest,
    LedgerClosed,
    LedgerError,
    LedgerKind,
    LedgerMetadata,
    LedgerState,
    NoSuchEntry,
    NoSuchLedger,
)
from embedded.ledger.records import (
    CreateRecord,
    DeleteRecord,
    EntryRecord,
    JournalCorrupt,
    Record,
    SealRecord,
)

DATA = LedgerMetadata(LedgerKind.DATA, "persistent://t/n/topic")


def _created(book: LedgerBook, metadata: LedgerMetadata = DATA) -> int:
    record = book.create(metadata)
    book.confirm(record)
    return record.ledger_id


def _append_confirmed(book: LedgerBook, ledger_id: int, payload: bytes = b"x") -> int:
    record = book.append(ledger_id, payload)
    book.confirm(record)
    return record.entry_id


def test_ids_grow_and_a_ledger_appears_only_once_its_creation_is_durable() -> None:
    book = LedgerBook()
    first, second = book.create(DATA), book.create(DATA)
    assert second.ledger_id == first.ledger_id + 1
    with pytest.raises(NoSuchLedger):
        book.info(first.ledger_id)
    assert book.list_ledgers() == []
    book.confirm(first)
    info = book.info(first.ledger_id)
    assert (info.state, info.last_entry_id, info.metadata) == (LedgerState.OPEN, -1, DATA)


def test_entry_ids_are_dense_and_reads_see_only_durable_entries() -> None:
    book = LedgerBook()
    ledger = _created(book)
    records = [book.append(ledger, b"e%d" % i) for i in range(3)]
    assert [r.entry_id for r in records] == [0, 1, 2]
    assert book.info(ledger).last_entry_id == -1
    with pytest.raises(NoSuchEntry):
        book.check_read(ledger, 0, 0)
    book.confirm(records[0])
    book.confirm(records[1])
    assert book.info(ledger).last_entry_id == 1
    book.check_read(ledger, 0, 1)
    with pytest.raises(NoSuchEntry, match="entry 2"):
        book.check_read(ledger, 1, 2)


@pytest.mark.parametrize(("first", "last"), [(-1, 0), (3, 2)])
def test_bad_read_ranges_are_invalid(first: int, last: int) -> None:
    book = LedgerBook()
    ledger = _created(book)
    _append_confirmed(book, ledger)
    with pytest.raises(InvalidRequest):
        book.check_read(ledger, first, last)


def test_fence_stops_the_writer_at_once_and_reports_every_accepted_entry() -> None:
    book = LedgerBook()
    ledger = _created(book)
    _append_confirmed(book, ledger)
    in_flight = book.append(ledger, b"not yet durable")
    seal = book.fence(ledger)
    assert seal == SealRecord(ledger, LedgerState.FENCED, in_flight.entry_id)
    with pytest.raises(Fenced):
        book.append(ledger, b"late")
    book.confirm(in_flight)   # the journal is ordered: the in-flight append is durable before the fence
    book.confirm(seal)
    assert book.info(ledger).last_entry_id == seal.last_entry_id == 1


def test_recoverer_closes_a_fenced_ledger() -> None:
    book = LedgerBook()
    ledger = _created(book)
    _append_confirmed(book, ledger)
    book.fence(ledger)
    assert book.close(ledger) == SealRecord(ledger, LedgerState.CLOSED, 0)
    with pytest.raises(LedgerClosed):
        book.append(ledger, b"x")


def test_seal_transitions_cover_every_action_and_state() -> None:
    for action in ("close", "fence"):
        for state in LedgerState:
            book = LedgerBook()
            ledger = _created(book)
            _append_confirmed(book, ledger)
            if state is LedgerState.CLOSED:
                book.close(ledger)
            elif state is LedgerState.FENCED:
                book.fence(ledger)
            record = book.close(ledger) if action == "close" else book.fence(ledger)
            assert record.state is SEAL_TRANSITIONS[(action, state)]
            assert record.last_entry_id == 0
            assert book.info(ledger).state is record.state
    assert set(SEAL_TRANSITIONS) == {(a, s) for a in ("close", "fence") for s in LedgerState}


def test_fencing_a_closed_ledger_keeps_it_closed() -> None:
    book = LedgerBook()
    ledger = _created(book)
    book.close(ledger)
    assert book.fence(ledger).state is LedgerState.CLOSED
    with pytest.raises(LedgerClosed):
        book.append(ledger, b"x")


def test_deleted_ledgers_are_gone_and_late_confirmations_are_ignored() -> None:
    book = LedgerBook()
    ledger = _created(book)
    in_flight = book.append(ledger, b"x")
    assert book.delete(ledger) == DeleteRecord(ledger)
    book.confirm(in_flight)
    for op in (book.info, book.fence, book.close, book.delete):
        with pytest.raises(NoSuchLedger):
            op(ledger)
    with pytest.raises(NoSuchLedger):
        book.append(ledger, b"x")
    assert _created(book) == ledger + 1


def test_an_oversized_entry_is_refused_with_the_limit() -> None:
    book = LedgerBook()
    ledger = _created(book)
    with pytest.raises(InvalidRequest, match=str(MAX_ENTRY_BYTES)):
        book.append(ledger, bytes(MAX_ENTRY_BYTES + 1))
    assert book.append(ledger, bytes(MAX_ENTRY_BYTES)).entry_id == 0


def test_metadata_validation_names_the_problem() -> None:
    with pytest.raises(InvalidRequest, match="kind"):
        LedgerMetadata.from_json({"kind": "topic", "name": "x"})
    with pytest.raises(InvalidRequest, match="unknown keys"):
        LedgerMetadata.from_json({"kind": "data", "name": "x", "owner": 1})
    assert LedgerMetadata.from_json({"kind": "txn-log", "name": "tc-0"}).kind is LedgerKind.TXN_LOG


def test_state_counts_follow_every_transition() -> None:
    book = LedgerBook()
    a, b, c = _created(book), _created(book), _created(book)
    book.fence(a)
    book.close(b)
    book.delete(c)
    assert book.state_counts == {LedgerState.OPEN: 0, LedgerState.FENCED: 1, LedgerState.CLOSED: 1}


# ---- replay ---------------------------------------------------------------------------------------

def _replay(records: list[Record]) -> tuple[LedgerBook, list[Replayed]]:
    book = LedgerBook()
    outcomes = []
    for record in records:
        if isinstance(record, EntryRecord):
            outcomes.append(book.replay_entry(record.ledger_id, record.entry_id))
        else:
            outcomes.append(book.replay(record))
    return book, outcomes


def test_replay_flags_a_gap_in_entry_ids() -> None:
    _, outcomes = _replay([CreateRecord(1, DATA), EntryRecord(1, 0, b""), EntryRecord(1, 2, b"")])
    assert outcomes[-1] is Replayed.INCONSISTENT


def test_replay_flags_a_seal_that_disagrees_with_the_entries() -> None:
    _, outcomes = _replay([CreateRecord(1, DATA), EntryRecord(1, 0, b""), SealRecord(1, LedgerState.CLOSED, 5)])
    assert outcomes[-1] is Replayed.INCONSISTENT


def test_replay_flags_entries_after_a_seal_and_refuses_double_creation() -> None:
    _, outcomes = _replay([CreateRecord(1, DATA), SealRecord(1, LedgerState.FENCED, -1), EntryRecord(1, 0, b"")])
    assert outcomes == [Replayed.APPLIED, Replayed.APPLIED, Replayed.INCONSISTENT]
    with pytest.raises(JournalCorrupt, match="twice"):
        _replay([CreateRecord(1, DATA), CreateRecord(1, DATA)])


def test_replay_of_unknown_ledgers_reports_them_and_never_reuses_their_ids() -> None:
    book = LedgerBook()
    assert book.replay_entry(7, 3) is Replayed.UNKNOWN_LEDGER
    assert book.replay(DeleteRecord(9)) is Replayed.UNKNOWN_LEDGER
    assert book.next_ledger_id == 10


_commands = st.lists(st.tuples(st.sampled_from(["create", "append", "close", "fence", "delete"]),
                               st.integers(0, 4)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(_commands)
def test_replaying_the_journal_rebuilds_the_same_book(commands: list[tuple[str, int]]) -> None:
    """Whatever commands ran, replaying their durable records gives the same ledgers and next id."""
    live = LedgerBook()
    journal: list[Record] = []
    ids: list[int] = []
    for command, pick in commands:
        target = ids[pick % len(ids)] if ids else 1
        try:
            if command == "create":
                record: Record = live.create(LedgerMetadata(LedgerKind.OTHER, f"l{pick}"))
                ids.append(record.ledger_id)
            elif command == "append":
                record = live.append(target, b"p%d" % pick)
            elif command == "close":
                record = live.close(target)
            elif command == "fence":
                record = live.fence(target)
            else:
                record = live.delete(target)
        except LedgerError:
            continue
        live.confirm(record)
        journal.append(record)
    replayed, outcomes = _replay(journal)
    assert set(outcomes) <= {Replayed.APPLIED}
    assert replayed.list_ledgers() == live.list_ledgers()
    assert replayed.next_ledger_id == live.next_ledger_id
    assert replayed.state_counts == live.state_counts
