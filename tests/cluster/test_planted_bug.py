"""A planted bug is really active when its setting is on, and only then.

`txnbenchBugV5GcRetentionInMillis` makes the v5 GC sweep read its retention window in
milliseconds. With a 30 s window and a subscription that materializes decisions 2 s
late, the correct sweep leaves the committed acks alone; the planted bug collects the
transaction's op records after 30 ms and the 5 committed acks are lost (their messages
come back), exactly the PIP-473 review's race that `test_v5_gc_race.py` provokes with a
short window instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from embedded import planted_bugs
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_gc_race import (
    acks_committed_on_a_slow_subscription,
    assert_acks_kept,
    assert_acks_lost,
)
from tests.cluster.test_v5_helpers import start_v5

BUG = planted_bugs.V5_GC_RETENTION_UNITS
SLOW: dict[str, Any] = {"txnbenchV5GcRetentionMillis": 30_000, "txnbenchV5GcIntervalMillis": 200,
                        "txnbenchV5ParticipantDelayMillis": 2000, "txnbenchV5ParticipantDelayMatch": "|slow-sub",
                        "txnbenchV5GcLeftoverOps": "force-delete"}


@pytest.mark.parametrize("planted", [False, True], ids=["off", "on"])
def test_the_planted_gc_bug_loses_committed_acks_only_when_on(cluster_factory: ClusterFactory,
                                                             planted: bool) -> None:
    cluster = start_v5(cluster_factory, brokers=1, **SLOW, **({BUG: True} if planted else {}))
    with acks_committed_on_a_slow_subscription(cluster, "topic://public/default/planted-gc") as consumer:
        (assert_acks_lost if planted else assert_acks_kept)(cluster, consumer)
    assert ("PLANTED BUGS ON" in cluster.records["broker-0"].log_path.read_text()) is planted
