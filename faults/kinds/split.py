"""split: split an active segment of a v5 scalable topic mid-transaction (admin REST); it stays."""

from __future__ import annotations

from faults.actions import SplitAction
from faults.environment import Capability
from faults.kinds import base
from faults.kinds.base import Draw, Kind
from harness.txn_paths import TxnPath

KIND = Kind(
    "split", "split an active segment of a scalable topic (admin REST)",
    base.TOPIC_TARGETS, lambda _p: "segment:random", lambda s, ctx, p: base.one_segment(s, base.writes_only(ctx), p),
    base.through_admin(SplitAction), Draw(("segment:random",), aimed=("segment:trigger",)), base.operators(),
    healable=False, paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.ADMIN, Capability.TOPICS}))
