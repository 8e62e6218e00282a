"""unload: unload a topic, partition or v5 segment: its ownership moves without a crash (admin REST)."""

from __future__ import annotations

from faults.actions import UnloadAction
from faults.environment import Capability
from faults.kinds.base import TOPIC_TARGETS, Draw, Kind, one_segment, through_admin
from faults.resolution import ResolveContext, Target, resolve_topic
from faults.selectors import Selector, TopicSelector
from harness.txn_paths import TxnPath


def _resolve(selector: Selector, ctx: ResolveContext, txn_path: TxnPath) -> tuple[Target, ...]:
    """`topic:` takes the whole topic (every partition or segment); `segment:` one of them."""
    if isinstance(selector, TopicSelector):
        return (resolve_topic(selector, ctx),)
    return one_segment(selector, ctx, txn_path)


KIND = Kind(
    "unload", "unload a topic, partition or v5 segment: ownership moves without a crash (admin REST)",
    TOPIC_TARGETS, lambda _p: "topic:random", _resolve, through_admin(UnloadAction),
    Draw(("topic:random", "segment:random"), aimed=("topic:trigger", "segment:trigger")),
    healable=False, needs=frozenset({Capability.ADMIN, Capability.TOPICS}))
