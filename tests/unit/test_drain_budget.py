"""The drain's bound grows with what the load sent (orchestrator.run.drain_budget_s).

The bug it would have caught: a peer run on real Pulsar sent 551,244 messages and the drain, bounded
by the scenario's 60 s, read 488,020 of them before its time ran out, so the run's verdict was
unknown (2026-11-28, `results/20261128-074453-peer-atomic-produce-v4-4.0.8`)."""

from __future__ import annotations

import pytest

from orchestrator.run import DRAIN_READ_FLOOR_PER_S, drain_budget_s


def test_a_small_run_keeps_about_the_scenarios_bound() -> None:
    assert drain_budget_s(60.0, 0) == 60.0
    assert drain_budget_s(60.0, 8_000) == pytest.approx(62.0)


def test_half_a_million_messages_get_the_time_to_be_read_back() -> None:
    budget = drain_budget_s(60.0, 551_244)
    # the measured read rate (about 8,000 a second) must finish well inside the budget
    assert budget - 60.0 >= 551_244 / 8_000 * 1.5
    assert budget == pytest.approx(60.0 + 551_244 / DRAIN_READ_FLOOR_PER_S)


def test_a_missing_or_negative_count_adds_nothing() -> None:
    assert drain_budget_s(90.0, -5) == 90.0
