"""A graceful broker stop, in Pulsar's order (`BrokerService.unloadNamespaceBundlesGracefully`).

The broker leaves the live set before it unloads and releases anything: a topic or coordinator
partition released while the broker is still listed would be redirected back to it by the other
brokers' rendezvous choice, and stay unserved until its registration went (at the end of the
stop, or a session timeout later when the stop is cut short by a kill). No sockets: the
broker's parts are recording fakes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from embedded.broker.broker import BrokerService


class Part:
    """Any part of the broker whose stop/close call is recorded in one shared journal."""

    def __init__(self, name: str, journal: list[str]) -> None:
        self.name = name
        self.journal = journal

    async def stop(self) -> None:
        self.journal.append(f"{self.name}.stop")

    async def close(self) -> None:
        self.journal.append(f"{self.name}.close")

    async def close_all(self) -> None:
        self.journal.append(f"{self.name}.close_all")


def test_the_broker_leaves_the_live_set_before_it_unloads_anything() -> None:
    journal: list[str] = []
    broker: Any = BrokerService.__new__(BrokerService)
    broker._binary = Part("binary", journal)
    broker.topics = {"t": object()}

    async def unload_topic(name: object, *, release: bool) -> None:
        journal.append(f"unload {name} release={release}")

    broker.unload_topic = unload_topic
    broker._started_lifecycles = [Part("coordinators", journal)]
    for attr, name in (("_ownership", "ownership"), ("_peers", "peers"), ("_live", "live"),
                       ("_ml_factory", "ml"), ("_ledgers", "ledgers"), ("_metadata", "metadata")):
        setattr(broker, attr, Part(name, journal))
    broker._http = None

    asyncio.run(broker.stop())

    assert journal.index("live.stop") < journal.index("unload t release=True") < journal.index("coordinators.stop")
    assert journal[0] == "binary.stop" and journal[-1] == "metadata.close" and journal.count("live.stop") == 1
