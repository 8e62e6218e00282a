"""Lookup decisions, without I/O: who should serve a topic, and what to answer.

Pulsar's NamespaceService.findBrokerServiceUrl, simplified to per-topic ownership:

* the topic has an owner record: answer Connect with the owner's URL (Pulsar answers
  Connect, not Redirect, once the owner is known). If the record names *this* broker
  but another (older) metadata session, it is ours from before a restart: take it over;
* no owner and the request is authoritative (a broker redirected the client here):
  acquire it;
* no owner: choose a candidate among the live brokers by rendezvous hashing (every
  broker computes the same choice from the same live set, so redirects converge) and
  acquire when it is this broker, else Redirect (authoritative) to the candidate.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from embedded.broker.txn_api import BrokerInfo, OwnerInfo


class LookupAction(enum.Enum):
    CONNECT = "connect"        # answer Connect to `url`
    REDIRECT = "redirect"      # answer Redirect (authoritative) to `url`
    ACQUIRE = "acquire"        # try to become the owner here
    TAKE_OVER = "take-over"    # the record is ours from an earlier session: replace it


@dataclass(frozen=True)
class LookupAnswer:
    """What a lookup answers: the broker to connect to, and whether that is a redirect."""

    url: str
    web_url: str
    broker_id: int
    redirect: bool


@dataclass(frozen=True)
class LookupDecision:
    action: LookupAction
    broker_id: int | None = None
    url: str | None = None
    web_url: str | None = None


def rendezvous_score(topic: str, broker_id: int) -> int:
    digest = hashlib.blake2b(f"{topic}\x00{broker_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def choose_broker(topic: str, broker_ids: Iterable[int]) -> int | None:
    """The highest-random-weight broker for `topic` (stable when other brokers come and go)."""
    best: tuple[int, int] | None = None
    for broker_id in broker_ids:
        score = (rendezvous_score(topic, broker_id), -broker_id)
        if best is None or score > best:
            best = score
    return None if best is None else -best[1]


def decide(topic: str, *, self_id: int, self_session: int | None, owner: OwnerInfo | None,
           live: Mapping[int, BrokerInfo], authoritative: bool) -> LookupDecision:
    if owner is not None:
        if owner.broker_id == self_id:
            if owner.session_id is not None and owner.session_id == self_session:
                return LookupDecision(LookupAction.CONNECT, self_id, owner.service_url, owner.web_url)
            return LookupDecision(LookupAction.TAKE_OVER, self_id)
        return LookupDecision(LookupAction.CONNECT, owner.broker_id, owner.service_url, owner.web_url)
    if authoritative:
        return LookupDecision(LookupAction.ACQUIRE, self_id)
    candidate = choose_broker(topic, set(live) | {self_id})
    if candidate is None or candidate == self_id or candidate not in live:
        return LookupDecision(LookupAction.ACQUIRE, self_id)
    info = live[candidate]
    return LookupDecision(LookupAction.REDIRECT, candidate, info.service_url, info.web_url)
