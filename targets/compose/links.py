"""The Toxiproxy proxies of a compose cluster: one per link, named as harness.target says.

Theory of operation. A broker container is attached only to its own network, on
which Toxiproxy has a fixed address; the broker's `extra_hosts` send the names of
its dependencies to that address. So when broker i dials `bookie:3181`, it reaches
Toxiproxy's listener `<proxy address on broker-i's network>:3181`, the proxy named
`broker-i-ledger`, which forwards to the real `bookie:3181` on the core network.
Each broker sees its own listener for every dependency, so each of its links can be
cut alone. Clients on the host reach broker i through `client-broker-i`, a listener
on Toxiproxy's published container port that each broker advertises as its
`external` listener.

Links, per broker i (and every other broker j):

| proxy name | from | to | listens on (inside Toxiproxy) |
|---|---|---|---|
| client-broker-i | clients on the host | broker i's binary port | 0.0.0.0:<client port> (published on 127.0.0.1) |
| broker-i-metadata | broker i | ZooKeeper or Oxia | <address on broker-i's network>:<metadata port> |
| broker-i-ledger | broker i | the bookie | <address>:<bookie port> |
| broker-i-broker-j | broker i | broker j's binary port | <address>:<broker j's port> |
| broker-i-broker-j-http | broker i | broker j's web service | <address>:<broker j's http port> |

The plan is a pure function of the compose file and the environment that
interpolates it, so the same code writes the committed default
`compose/toxiproxy/<file>.json` and each run's own copy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from harness.target import LinkInfo, LinkKind
from targets.compose.layout import (
    LABEL_CLIENT_PORT,
    LABEL_HTTP_PORT,
    LABEL_PORT,
    LEDGER,
    METADATA,
    PROXY,
    ComposeFileError,
    ComposeLayout,
)

ANY_ADDRESS = "0.0.0.0"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class ProxyLink:
    """One Toxiproxy proxy. `listen` is inside Toxiproxy's container; `host_listen` is the
    host address a client dials (client links only)."""

    name: str
    kind: LinkKind
    source: str
    dest: str
    listen: str
    upstream: str
    host_listen: str | None = None

    def to_toxiproxy(self) -> dict[str, object]:
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream, "enabled": True}

    def info(self) -> LinkInfo:
        return LinkInfo(name=self.name, kind=self.kind, source=self.source, dest=self.dest,
                        listen=self.host_listen or self.listen, upstream=self.upstream)


def _port(layout: ComposeLayout, name: str, label: str) -> int:
    svc = layout.require(name)
    value = svc.label_int(label)
    if value is None:
        raise ComposeFileError(f"{layout.source}: service {svc.compose_name} ({name}) has no numeric "
                               f"`{label}` label; add it (see compose/README.md)")
    return value


def plan_links(layout: ComposeLayout, env: Mapping[str, str]) -> tuple[ProxyLink, ...]:
    """Every proxy the compose file implies, in a stable order."""
    brokers = layout.brokers
    metadata = layout.require(METADATA)
    ledger = layout.require(LEDGER)
    proxy = layout.require(PROXY)
    metadata_port = _port(layout, METADATA, LABEL_PORT)
    ledger_port = _port(layout, LEDGER, LABEL_PORT)
    links: list[ProxyLink] = []
    for broker in brokers:
        client_port = _port(layout, broker.name, LABEL_CLIENT_PORT)
        binding = proxy.port_for(client_port)
        host_port = binding.host_port_in(env) if binding else None
        links.append(ProxyLink(
            name=f"client-{broker.name}", kind=LinkKind.CLIENT_BROKER, source="client", dest=broker.name,
            listen=f"{ANY_ADDRESS}:{client_port}",
            upstream=f"{broker.compose_name}:{_port(layout, broker.name, LABEL_PORT)}",
            host_listen=f"{HOST}:{host_port}" if host_port else None))
    for broker in brokers:
        if len(broker.networks) != 1:
            raise ComposeFileError(f"{layout.source}: {broker.compose_name} must be attached to exactly "
                                   f"one network (its own), not {list(broker.networks)}")
        address = layout.proxy_address_on(broker.networks[0], env)
        if not address:
            raise ComposeFileError(f"{layout.source}: the proxy service has no `ipv4_address` on network "
                                   f"{broker.networks[0]} of {broker.compose_name}; give it one")
        links.append(ProxyLink(f"{broker.name}-metadata", LinkKind.BROKER_METADATA, broker.name, METADATA,
                               f"{address}:{metadata_port}", f"{metadata.compose_name}:{metadata_port}"))
        links.append(ProxyLink(f"{broker.name}-ledger", LinkKind.BROKER_LEDGER, broker.name, LEDGER,
                               f"{address}:{ledger_port}", f"{ledger.compose_name}:{ledger_port}"))
        for peer in brokers:
            if peer is broker:
                continue
            port = _port(layout, peer.name, LABEL_PORT)
            http = _port(layout, peer.name, LABEL_HTTP_PORT)
            links.append(ProxyLink(f"{broker.name}-{peer.name}", LinkKind.BROKER_BROKER, broker.name,
                                   peer.name, f"{address}:{port}", f"{peer.compose_name}:{port}"))
            links.append(ProxyLink(f"{broker.name}-{peer.name}-http", LinkKind.BROKER_BROKER, broker.name,
                                   peer.name, f"{address}:{http}", f"{peer.compose_name}:{http}"))
    return tuple(links)


def toxiproxy_config(links: tuple[ProxyLink, ...]) -> list[dict[str, object]]:
    """The JSON Toxiproxy's `-config` flag (and POST /populate) takes."""
    return [link.to_toxiproxy() for link in links]


def toxiproxy_config_text(links: tuple[ProxyLink, ...]) -> str:
    return json.dumps(toxiproxy_config(links), indent=2) + "\n"

