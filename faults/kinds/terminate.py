"""terminate: terminate a v4 topic or partition, or seal a v5 segment (admin REST); it stays."""

from __future__ import annotations

from faults.actions import TerminateAction
from faults.environment import Capability
from faults.kinds.base import TOPIC_TARGETS, Draw, Kind, operators, through_admin, writes_only
from faults.resolution import ResolveContext, Target, resolve_segment, resolve_topic
from faults.selectors import SegmentSelector, Selector, TopicSelector
from harness.history.schema import FaultEffect
from harness.txn_paths import TxnPath


def _resolve(selector: Selector, ctx: ResolveContext, txn_path: TxnPath) -> tuple[Target, ...]:
    """`topic:` on v4 and v4-batched: the whole partitioned topic (every partition); else one segment
    or partition."""
    assert isinstance(selector, (TopicSelector, SegmentSelector))
    ctx = writes_only(ctx)
    if txn_path is not TxnPath.V5 and isinstance(selector, TopicSelector):
        return (resolve_topic(selector, ctx),)
    return (resolve_segment(selector, ctx),)


KIND = Kind(
    "terminate", "terminate a v4 topic or partition, or seal a v5 segment (admin REST)",
    TOPIC_TARGETS, lambda p: "segment:random" if p is TxnPath.V5 else "topic:random", _resolve,
    through_admin(TerminateAction),
    # v4: a whole topic (a terminated partition alone is not named by the sends that fail on it, so its
    # expected anomalies could not be attributed); v5: one of its segments, sealed. Capped: a terminated
    # v4 topic refuses every later send, so more would leave nothing to test.
    Draw(("topic:random",), aimed=("topic:trigger",), cap=lambda spec: spec.terminates), operators(),
    healable=False, needs=frozenset({Capability.ADMIN, Capability.TOPICS}),
    effects=frozenset({FaultEffect.STAYS}))
