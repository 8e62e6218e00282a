"""Scalable-topic records in the metadata store (Pulsar's `ScalableTopicResources`).

| key | value |
|---|---|
| `/topics/<tenant>/<ns>/<urlenc(topic)>` | the layout (`ScalableTopicMetadata` JSON), changed only by CAS |
| `/topics/<tenant>/<ns>/<urlenc(topic)>/subscriptions/<urlenc(sub)>` | a subscription of the scalable topic (`{}`) |
| `/topics/<tenant>/<ns>/<urlenc(topic)>/controller` | ephemeral: held while a split/merge/delete runs |

Pulsar elects one controller per topic at the `controller` key and redirects admin
calls to it; here whichever broker takes an admin call holds that key only for the
duration of the operation (`OperationLock`), and the layout record itself is only ever
changed by compare-and-set, so two operations can never both apply.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from embedded.broker.topic_name import TopicDomain, TopicName, decode_component, encode_component
from embedded.broker.v5.scalable.layout import SegmentLayout
from embedded.metadata.model import MUST_NOT_EXIST, BadVersion, KeyNotFound
from embedded.metadata.state import prefix_end

if TYPE_CHECKING:
    from embedded.metadata.backend import MetadataBackend

ROOT = "/topics"
_MAX_CAS_ROUNDS = 20


class ScalableTopicNotFound(LookupError):
    """No scalable topic of that name."""


class ScalableTopicExists(Exception):
    """Creating a scalable topic that exists already."""


class TopicBusy(Exception):
    """Another split, merge or delete of the topic is in progress."""


def topic_key(topic: TopicName) -> str:
    if topic.domain is not TopicDomain.TOPIC:
        raise ValueError(f"{topic} is not a scalable topic (topic://tenant/namespace/name)")
    return f"{ROOT}/{topic.tenant}/{topic.namespace_part}/{topic.encoded_local_name}"


def namespace_prefix(namespace: str) -> str:
    return f"{ROOT}/{namespace}/"


def subscription_key(topic: TopicName, subscription: str) -> str:
    return f"{topic_key(topic)}/subscriptions/{encode_component(subscription)}"


def topic_of_key(key: str) -> TopicName | None:
    """The scalable topic a layout key names (None for its sub-records or other keys)."""
    parts = key.split("/")
    if len(parts) != 5 or parts[1] != ROOT.strip("/"):
        return None
    return TopicName(TopicDomain.TOPIC, parts[2], parts[3], decode_component(parts[4]))


class ScalableTopicResources:
    def __init__(self, client: MetadataBackend) -> None:
        self.client = client

    async def create(self, topic: TopicName, layout: SegmentLayout) -> None:
        try:
            await self.client.put(topic_key(topic), json.dumps(layout.to_json(), separators=(",", ":")),
                                  expected_version=MUST_NOT_EXIST)
        except BadVersion:
            raise ScalableTopicExists(f"scalable topic {topic} already exists") from None

    async def get(self, topic: TopicName) -> tuple[SegmentLayout, int] | None:
        try:
            result = await self.client.get(topic_key(topic))
        except KeyNotFound:
            return None
        return SegmentLayout.from_json(json.loads(result.value or "{}")), result.version.version_id

    async def require(self, topic: TopicName) -> SegmentLayout:
        found = await self.get(topic)
        if found is None:
            raise ScalableTopicNotFound(f"scalable topic {topic} does not exist; create it with "
                                        f"PUT /admin/v2/scalable/{topic.tenant}/{topic.namespace_part}/"
                                        f"{topic.encoded_local_name}")
        return found[0]

    async def update(self, topic: TopicName, change: Callable[[SegmentLayout], SegmentLayout]) -> SegmentLayout:
        """Apply `change` to the current layout by CAS, re-reading after a conflict."""
        for _ in range(_MAX_CAS_ROUNDS):
            found = await self.get(topic)
            if found is None:
                raise ScalableTopicNotFound(f"scalable topic {topic} was deleted")
            current, version = found
            updated = change(current)
            try:
                await self.client.put(topic_key(topic), json.dumps(updated.to_json(), separators=(",", ":")),
                                      expected_version=version)
            except BadVersion:
                continue
            return updated
        raise TopicBusy(f"the layout of {topic} kept changing during {_MAX_CAS_ROUNDS} attempts")

    async def delete(self, topic: TopicName) -> bool:
        key = topic_key(topic)
        await self.client.delete_range(key + "/", prefix_end(key + "/"))
        return await self.client.delete(key)

    async def topics(self, namespace: str) -> list[TopicName]:
        base = namespace_prefix(namespace)
        keys = await self.client.list(base, prefix_end(base))
        return [t for t in (topic_of_key(k) for k in keys) if t is not None]

    async def subscriptions(self, topic: TopicName) -> list[str]:
        base = topic_key(topic) + "/subscriptions/"
        keys = await self.client.list(base, prefix_end(base))
        return [decode_component(k[len(base):]) for k in keys if "/" not in k[len(base):]]

    async def add_subscription(self, topic: TopicName, subscription: str) -> None:
        await self.client.put(subscription_key(topic, subscription), "{}")

    async def remove_subscription(self, topic: TopicName, subscription: str) -> None:
        await self.client.delete(subscription_key(topic, subscription))

    @contextlib.asynccontextmanager
    async def operation_lock(self, topic: TopicName, holder: str) -> AsyncIterator[None]:
        """Hold the topic's controller key while one layout operation runs."""
        key = topic_key(topic) + "/controller"
        try:
            result = await self.client.put(key, json.dumps({"holder": holder}), expected_version=MUST_NOT_EXIST,
                                           ephemeral=True)
        except BadVersion:
            held = await self.client.get_or_none(key)
            raise TopicBusy(f"another layout operation on {topic} is in progress "
                            f"({held.value if held else 'just finished'}); retry") from None
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                await self.client.delete(key, expected_version=result.version.version_id)
