"""Lookup decisions: connect to a known owner, take over our own stale record, rendezvous otherwise."""

from __future__ import annotations

from collections import Counter

from embedded.broker.lookup_policy import LookupAction, choose_broker, decide
from embedded.broker.txn_api import BrokerInfo, OwnerInfo

LIVE = {i: BrokerInfo(i, f"pulsar://b{i}", f"http://b{i}") for i in range(3)}


def test_known_owner_is_answered_with_connect() -> None:
    owner = OwnerInfo(2, "pulsar://b2", "http://b2", session_id=7, version_id=1)
    decision = decide("t", self_id=0, self_session=3, owner=owner, live=LIVE, authoritative=False)
    assert (decision.action, decision.url) == (LookupAction.CONNECT, "pulsar://b2")
    mine = OwnerInfo(0, "pulsar://b0", "http://b0", session_id=3, version_id=1)
    assert decide("t", self_id=0, self_session=3, owner=mine, live=LIVE, authoritative=False).action \
        is LookupAction.CONNECT


def test_own_record_from_an_earlier_session_is_taken_over() -> None:
    stale = OwnerInfo(0, "pulsar://b0", "http://b0", session_id=1, version_id=1)
    assert decide("t", self_id=0, self_session=9, owner=stale, live=LIVE, authoritative=False).action \
        is LookupAction.TAKE_OVER


def test_unowned_topics_go_to_the_rendezvous_choice_and_authoritative_lookups_acquire() -> None:
    topic = "persistent://public/default/x"
    chosen = choose_broker(topic, LIVE)
    for self_id in LIVE:
        decision = decide(topic, self_id=self_id, self_session=1, owner=None, live=LIVE, authoritative=False)
        if self_id == chosen:
            assert decision.action is LookupAction.ACQUIRE
        else:
            assert (decision.action, decision.broker_id) == (LookupAction.REDIRECT, chosen)
        assert decide(topic, self_id=self_id, self_session=1, owner=None, live=LIVE,
                      authoritative=True).action is LookupAction.ACQUIRE


def test_rendezvous_spreads_topics_and_is_stable_when_a_broker_leaves() -> None:
    topics = [f"persistent://public/default/t{i}" for i in range(600)]
    counts = Counter(choose_broker(t, LIVE) for t in topics)
    assert all(150 < n < 250 for n in counts.values()), counts
    without_2 = {i: b for i, b in LIVE.items() if i != 2}
    for t in topics:
        before = choose_broker(t, LIVE)
        if before != 2:
            assert choose_broker(t, without_2) == before   # only broker 2's topics move
    assert choose_broker("t", {}) is None


def test_a_broker_missing_from_the_live_set_still_serves_what_it_is_asked() -> None:
    alone = {1: LIVE[1]}
    decision = decide("anything", self_id=5, self_session=1, owner=None, live=alone, authoritative=False)
    assert decision.action in (LookupAction.ACQUIRE, LookupAction.REDIRECT)
