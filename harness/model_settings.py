"""The embedded cluster's model-only v5 settings: behaviour with no source in PIP-473 or
Pulsar 5.0 (or the PIP text where 5.0 differs), each off by default.

Why here: the cluster reads them (embedded/broker/v5/settings.py) and the analysis names
every one a run turned on in its report (analysis/perf/ledger.py), and analysis may not
import the cluster; one table in the base package both import keeps them from drifting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

DELETE_CONSUMED_EVENTS = "txnbenchV5DeleteConsumedEvents"
ID_BLOCKS = "txnbenchV5IdBlocks"
GC_LEFTOVER_OPS = "txnbenchV5GcLeftoverOps"
ANSWER_END_TXN_AFTER_CAS = "txnbenchV5AnswerEndTxnAfterCas"
ACK_READS_HEADER = "txnbenchV5AckReadsHeader"


@dataclass(frozen=True)
class ModelSetting:
    on: str        # the value that turns the behaviour on
    meaning: str   # what a report says it does


MODEL_SETTINGS: Mapping[str, ModelSetting] = MappingProxyType({
    DELETE_CONSUMED_EVENTS: ModelSetting("true", "participants delete consumed decision events (model-only)"),
    ID_BLOCKS: ModelSetting("true", "NEW_TXNs share counter CAS in blocks (model-only)"),
    GC_LEFTOVER_OPS: ModelSetting("force-delete", "GC force-deletes leftover op records (PIP text; 5.0 re-drives)"),
    ANSWER_END_TXN_AFTER_CAS: ModelSetting("true", "END_TXN answered after the CAS, events published behind it "
                                                   "(PIP text; 5.0 answers after the events)"),
    ACK_READS_HEADER: ModelSetting("true", "a subscription's first transactional ack reads the txn header and "
                                           "refuses a decided txn (model-only; 5.0 checks memory only)"),
})


def turned_on(settings: Mapping[str, object], key: str) -> bool:
    """Whether a run's settings (text or typed values) turn `key` on."""
    return str(settings.get(key, "")).lower() == MODEL_SETTINGS[key].on
