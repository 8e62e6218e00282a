"""The `topic://` domain's answers to v4 commands, as Pulsar 5.0's Java client needs them (no sockets).

Found by the Java transaction check (`tests/cluster/test_java_txn_check.py`): the v5 Java
client's `DagWatchClient.start` sends an ordinary LOOKUP of the `topic://` name and opens
its SCALABLE_TOPIC_LOOKUP on the broker named in the answer; the embedded broker used to
refuse that LOOKUP (NotAllowedError), so every v5 Java producer and consumer failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from embedded.broker.txn_api import BrokerContext
from embedded.broker.v5.scalable.topic_domain import TopicDomainCommands
from harness.wire import CommandType, LookupType, ServerError, commands
from harness.wire.framing import decode_frame, encode_frame

TOPIC = "topic://public/default/orders"


@dataclass
class _Broker:
    advertised_service_url: str = "pulsar://127.0.0.1:6651"


def _answer(command: Any) -> tuple[CommandType, Any]:
    """What the broker answers, after a round trip of both through the wire encoding."""
    kind, body, _ = decode_frame(memoryview(encode_frame(command.type, command.body))[4:])
    answered = TopicDomainCommands(cast(BrokerContext, _Broker())).answer(type(command)(kind, body))
    kind, body, _ = decode_frame(memoryview(encode_frame(answered.type, answered.body))[4:])
    return kind, body


def test_a_lookup_of_a_scalable_topic_names_the_broker_asked_authoritatively() -> None:
    kind, body = _answer(commands.lookup(TOPIC, 41, advertised_listener_name="external"))
    assert kind is CommandType.LOOKUP_RESPONSE
    assert body.request_id == 41 and body.response == LookupType.Connect and body.authoritative
    assert body.brokerServiceUrl == "pulsar://127.0.0.1:6651"


def test_producing_to_a_scalable_topic_directly_is_refused_with_the_way_to_do_it() -> None:
    kind, body = _answer(commands.producer(TOPIC, 1, 42))
    assert kind is CommandType.ERROR and body.request_id == 42 and body.error == ServerError.NotAllowedError
    assert "SCALABLE_TOPIC_LOOKUP" in body.message and "segment://" in body.message


def test_partitioned_metadata_of_a_scalable_topic_is_refused() -> None:
    kind, body = _answer(commands.partitioned_metadata(TOPIC, 43))
    assert kind is CommandType.PARTITIONED_METADATA_RESPONSE and body.error == ServerError.NotAllowedError
