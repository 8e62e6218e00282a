"""What holds a v4 partition's read horizon, as the drain asks the owner (orchestrator/load/horizons.py).

Issue #47: Pulsar 4.0.8 hid thousands of committed values on two partitions after a chaos run;
the drain saw entries in the backlog and nothing more. These tests pin what it now records."""

from __future__ import annotations

from typing import Any

from orchestrator.load.horizons import HeldHorizon, held_horizon, held_horizons


class FakeAdmin:
    """Pulsar's admin answers for partitions: buffer stats, internal stats, entry headers, TC view."""

    def __init__(self, partitions: dict[str, dict[str, Any]], coordinator: dict[tuple[int, int], str | None]) -> None:
        self.parts, self.coordinator = partitions, coordinator

    def transaction_buffer_stats(self, partition: str) -> dict[str, Any]:
        part = self.parts[partition]
        if part.get("no_api"):
            raise RuntimeError("HTTP 404")
        return {"state": "Ready", "maxReadPosition": part["horizon"], "ongoingTxnSize": part.get("ongoing", 0),
                "lowWaterMarks": part.get("marks", {})}

    def internal_stats(self, partition: str) -> dict[str, Any]:
        return {"lastConfirmedEntry": self.parts[partition]["last"]}

    def entry_transaction(self, partition: str, ledger: int, entry: int) -> tuple[int, int] | None:
        return self.parts[partition].get("entries", {}).get(f"{ledger}:{entry}")

    def transaction_metadata(self, most: int, least: int) -> dict[str, Any] | None:
        status = self.coordinator.get((most, least))
        return None if status is None else {"status": status}


def test_a_horizon_held_by_a_transaction_its_coordinator_forgot_is_stuck_for_good() -> None:
    admin = FakeAdmin({"t-partition-0": {"horizon": "340:137", "last": "340:140", "ongoing": 1,
                                         "marks": {"1": 165}, "entries": {"340:138": (1, 354)}}}, {})
    held = held_horizon(admin, "t-partition-0")
    assert held == HeldHorizon("t-partition-0", "340:137", "340:140", 1, "1:354", "NOT_FOUND", {"1": 165})
    assert held.stuck_for_good
    text = held.describe()
    assert "held at 340:137" in text and "transaction 1:354" in text and "NOT_FOUND" in text
    assert "low watermark for coordinator 1 is 165" in text
    assert held.to_json()["stuck_for_good"] is True


def test_a_horizon_held_by_an_open_transaction_may_still_move() -> None:
    admin = FakeAdmin({"p": {"horizon": "5:1", "last": "5:9", "ongoing": 1, "entries": {"5:2": (0, 7)}}},
                      {(0, 7): "OPEN"})
    held = held_horizon(admin, "p")
    assert held is not None and held.holder_status == "OPEN" and not held.stuck_for_good


def test_partitions_read_to_their_last_entry_or_without_the_admin_call_hold_nothing() -> None:
    admin = FakeAdmin({"a": {"horizon": "3:4", "last": "3:4"}, "b": {"horizon": "3:4", "last": "2:9"},
                       "c": {"no_api": True, "horizon": "1:1", "last": "1:5"},
                       "d": {"horizon": "7:0", "last": "7:3", "entries": {}}}, {})
    found = held_horizons(admin, ["a", "b", "c", "d"])
    assert [h.partition for h in found] == ["d"]
    assert found[0].holder is None and "did not name" in found[0].describe()
