"""Commands that name a `topic://` scalable topic directly, and SCALABLE_TOPIC_SUBSCRIBE.

A scalable topic is not a stored topic: clients resolve it with SCALABLE_TOPIC_LOOKUP
and produce to and consume from its `segment://` topics (Pulsar's v5 client does so
for producers and queue consumers). A LOOKUP, PARTITIONED_METADATA, PRODUCER or
SUBSCRIBE naming `topic://` therefore gets an error that says so. The controller-
assigned Stream/Checkpoint consumers (SCALABLE_TOPIC_SUBSCRIBE) are not implemented by
the embedded broker: it answers NotAllowedError with the alternative.
"""

from __future__ import annotations

from embedded.broker.txn_api import ClientChannel
from harness.wire import Command, CommandType, ServerError, commands

_WHY = ("{topic} is a scalable topic: resolve its segments with SCALABLE_TOPIC_LOOKUP (a Pulsar 5.0 / v5 client) "
        "and produce to or consume from its segment:// topics")


async def on_topic_command(channel: ClientChannel, command: Command) -> None:
    body = command.body
    reason = _WHY.format(topic=getattr(body, "topic", "the topic"))
    kind = command.type
    if kind is CommandType.LOOKUP:
        channel.send(commands.lookup_failed(body.request_id, ServerError.NotAllowedError, reason))
    elif kind is CommandType.PARTITIONED_METADATA:
        channel.send(commands.partitioned_metadata_failed(body.request_id, ServerError.NotAllowedError, reason))
    else:
        channel.send(commands.error(body.request_id, ServerError.NotAllowedError, reason))


async def on_scalable_subscribe(channel: ClientChannel, command: Command) -> None:
    body = command.body
    channel.send(commands.scalable_topic_subscribe_response(
        body.request_id, error=ServerError.NotAllowedError,
        message=(f"stream and checkpoint consumers (controller-assigned segments) of {body.topic} are not supported "
                 "by the embedded broker; subscribe to every segment:// topic of the DAG (a queue consumer)")))
