"""Commands that name a `topic://` scalable topic directly, and SCALABLE_TOPIC_SUBSCRIBE.

A scalable topic is not a stored topic: clients resolve it with SCALABLE_TOPIC_LOOKUP
and produce to and consume from its `segment://` topics. Pulsar 5.0's Java client
(`DagWatchClient.start`) first sends an ordinary LOOKUP of the `topic://` name and opens
the DAG watch on the broker it names, so a LOOKUP is answered: with the broker asked,
authoritative (every embedded broker serves SCALABLE_TOPIC_LOOKUP for every scalable
topic; real Pulsar names the owner of the name's namespace bundle; embedded/README.md,
fidelity). PARTITIONED_METADATA, PRODUCER or SUBSCRIBE naming `topic://` get an error
that says what to do instead. The controller-assigned Stream/Checkpoint consumers
(SCALABLE_TOPIC_SUBSCRIBE) are not implemented by the embedded broker: it answers
NotAllowedError with the alternative.
"""

from __future__ import annotations

import logging

from embedded.broker.txn_api import BrokerContext, ClientChannel
from harness.wire import Command, CommandType, ServerError, commands

log = logging.getLogger(__name__)

_WHY = ("{topic} is a scalable topic: resolve its segments with SCALABLE_TOPIC_LOOKUP (a Pulsar 5.0 / v5 client) "
        "and produce to or consume from its segment:// topics")


class TopicDomainCommands:
    """The `topic://` domain's answers to v4 commands, on one broker."""

    def __init__(self, broker: BrokerContext) -> None:
        self._broker = broker

    async def on_command(self, channel: ClientChannel, command: Command) -> None:
        channel.send(self.answer(command))

    def answer(self, command: Command) -> Command:
        """The response to a command naming `topic://` (sans-IO: the handler only sends it)."""
        body = command.body
        kind = command.type
        if kind is CommandType.LOOKUP:
            # Java's DagWatchClient looks the name up, then sends SCALABLE_TOPIC_LOOKUP there
            return commands.lookup_response(body.request_id, self._broker.advertised_service_url, authoritative=True)
        reason = _WHY.format(topic=getattr(body, "topic", "the topic"))
        log.info("refused %s naming %s", kind.name, getattr(body, "topic", "?"))
        if kind is CommandType.PARTITIONED_METADATA:
            return commands.partitioned_metadata_failed(body.request_id, ServerError.NotAllowedError, reason)
        return commands.error(body.request_id, ServerError.NotAllowedError, reason)


async def on_scalable_subscribe(channel: ClientChannel, command: Command) -> None:
    body = command.body
    channel.send(commands.scalable_topic_subscribe_response(
        body.request_id, error=ServerError.NotAllowedError,
        message=(f"stream and checkpoint consumers (controller-assigned segments) of {body.topic} are not supported "
                 "by the embedded broker; subscribe to every segment:// topic of the DAG (a queue consumer)")))
