"""merge: merge two adjacent active segments of a v5 scalable topic mid-transaction (admin REST); it stays."""

from __future__ import annotations

from faults.actions import MergeAction
from faults.environment import Capability
from faults.kinds.base import TOPIC_TARGETS, Draw, Kind, operators, through_admin, writes_only
from faults.resolution import ResolveContext, Target, resolve_adjacent_pair
from faults.selectors import SegmentSelector, Selector, TopicSelector
from harness.txn_paths import TxnPath


def _pair(selector: Selector, ctx: ResolveContext, _path: TxnPath) -> tuple[Target, ...]:
    """Two active segments with touching hash ranges, of one topic."""
    assert isinstance(selector, (TopicSelector, SegmentSelector))
    return resolve_adjacent_pair(selector, writes_only(ctx))


KIND = Kind(
    "merge", "merge two adjacent active segments of a scalable topic (admin REST)",
    TOPIC_TARGETS, lambda _p: "topic:random", _pair, through_admin(MergeAction),
    Draw(("topic:random",), aimed=("topic:trigger",)), operators(),
    healable=False, paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.ADMIN, Capability.TOPICS}))
