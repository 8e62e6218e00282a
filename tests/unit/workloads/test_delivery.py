"""`receive` events carry when the broker's frame arrived, on the run clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from workloads.api import MessageApi, delivery_extra


@dataclass
class _Message:
    redelivery_count: int
    arrived_ns: int


def test_delivered_ns_is_the_arrival_on_the_run_clock() -> None:
    assert delivery_extra(cast(MessageApi, _Message(2, arrived_ns=1_000_500)), clock_base_ns=1_000_000) == {
        "redelivery": 2, "delivered_ns": 500}


def test_unknown_arrival_is_left_out_not_guessed() -> None:
    assert delivery_extra(cast(MessageApi, _Message(0, arrived_ns=0)), clock_base_ns=1_000_000) == {"redelivery": 0}
