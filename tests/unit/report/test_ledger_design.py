"""The cost ledger's v5 design prediction and the model-only settings a report names (pure)."""

from __future__ import annotations

from analysis.perf.ledger import Shape, design_v5, model_settings
from embedded.broker.config import Settings
from embedded.broker.v5.settings import V5Settings
from harness.model_settings import MODEL_SETTINGS

SHAPE = Shape(committed=10, aborted=0, sends=40, acks=20, writes=20, ack_parts=10, writes_aborted=0, plain_sends=0)


def test_each_model_only_setting_turns_its_behaviour_on_in_the_cluster_and_is_named_by_the_report() -> None:
    # one table (harness.model_settings) for both; its "on" value must change the cluster's settings
    default = V5Settings.from_settings(Settings({}))
    for key, setting in MODEL_SETTINGS.items():
        assert V5Settings.from_settings(Settings({key: setting.on})) != default, key
        assert [m["setting"] for m in model_settings({key: setting.on})] == [key]


def test_a_report_names_the_ack_header_read_when_a_run_turns_it_on() -> None:
    assert model_settings({}) == []
    named = model_settings({"txnbenchV5AckReadsHeader": "true"})
    assert [m["setting"] for m in named] == ["txnbenchV5AckReadsHeader"]
    assert "model-only" in named[0]["meaning"]


def test_acks_read_no_header_as_in_pulsar_unless_the_setting_is_on() -> None:
    default = design_v5(SHAPE, {})["reads"]["txn-header"]
    with_read = design_v5(SHAPE, {"txnbenchV5AckReadsHeader": "true"})["reads"]["txn-header"]
    assert default == SHAPE.txns + SHAPE.writes               # END_TXN's read and the first send per segment
    assert with_read == default + SHAPE.ack_parts              # plus the first ack per (segment, subscription)
    assert design_v5(SHAPE, {})["metadata"] == design_v5(SHAPE, {"txnbenchV5AckReadsHeader": "true"})["metadata"]


def test_on_zookeeper_every_sequence_key_append_also_reads_and_cas_increments_a_counter() -> None:
    # Pulsar 5.0.1 AbstractMetadataStore.putWithSequenceKeysCompat: get + CAS of the counter, then the create.
    # Measured on real 5.0.1 over ZooKeeper: 23.9 writes per committed transaction where the
    # native-sequence-key prediction was 15.4 (+ up to 3.0 watermark CAS) for the same transactions.
    native = design_v5(SHAPE, {}, "oxia")
    on_zk = design_v5(SHAPE, {}, "zookeeper")
    appends = SHAPE.sends + SHAPE.acks + SHAPE.writes + SHAPE.ack_parts   # op records and events
    assert sum(on_zk["metadata"].values()) - sum(native["metadata"].values()) == appends
    assert on_zk["metadata"][("cas", "seq-counter")] == appends
    assert on_zk["reads"]["seq-counter"] == appends
    assert ("cas", "seq-counter") not in native["metadata"]
    assert design_v5(SHAPE, {}) == design_v5(SHAPE, {}, "oxia-like") == native
