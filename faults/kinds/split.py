"""split: split an active segment of a v5 scalable topic mid-transaction (admin REST); it stays."""

from __future__ import annotations

from faults.actions import SplitAction
from faults.environment import Capability
from faults.kinds.base import (
    TOPIC_TARGETS,
    Draw,
    Kind,
    one_segment,
    operators,
    through_admin,
    writes_only,
)
from harness.txn_paths import TxnPath

KIND = Kind(
    "split", "split an active segment of a scalable topic (admin REST)",
    TOPIC_TARGETS, lambda _p: "segment:random", lambda s, ctx, p: one_segment(s, writes_only(ctx), p),
    through_admin(SplitAction), Draw(("segment:random",), aimed=("segment:trigger",)), operators(),
    healable=False, paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.ADMIN, Capability.TOPICS}))
