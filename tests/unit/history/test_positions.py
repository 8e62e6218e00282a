"""One parser for stored positions (harness/history/positions.py): the drain, its probes and the
checker order the history's message ids and the admin API's positions the same way."""

from __future__ import annotations

from harness.history.positions import ledger_entry


def test_message_ids_and_managed_ledger_positions_are_ledger_and_entry() -> None:
    assert ledger_entry("746:3:-1") == (746, 3)
    assert ledger_entry("1089:9") == (1089, 9)
    assert ledger_entry("2351:-1") == (2351, -1)          # a terminated ledger's "before its first entry"
    assert ledger_entry("7:2") < ledger_entry("8:0:-1")      # type: ignore[operator]


def test_what_is_not_a_position_is_none() -> None:
    for text in (None, "", "746", "a:b", "1:x:0", 5):
        assert ledger_entry(text) is None, text
