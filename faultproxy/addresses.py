"""Parsing of `host:port` addresses, restricted to this machine.

Why the restriction: the proxy runs on shared machines where every server must bind
127.0.0.1 and no traffic may leave the host. So `listen` must be 127.0.0.1 (or
`localhost`, stored as 127.0.0.1) and `upstream` a loopback address. Toxiproxy
itself accepts any address; a refused one here is a 400 that says why.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from faultproxy.errors import bad_request

LISTEN_HOST = "127.0.0.1"


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def _split(text: object, field: str) -> tuple[str, int]:
    if not isinstance(text, str) or ":" not in text:
        raise bad_request(f"{field} must be a string 'host:port', got {text!r}")
    host, _, port_text = text.rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        raise bad_request(f"{field} {text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise bad_request(f"{field} {text!r}: port must be 0..65535")
    return host.strip("[]"), port


def parse_listen(text: object) -> Address:
    """A listen address; port 0 means 'pick a free port'."""
    host, port = _split(text, "listen")
    if host == "localhost":
        host = LISTEN_HOST
    if host != LISTEN_HOST:
        raise bad_request(
            f"listen {text!r}: this proxy binds 127.0.0.1 only; use '127.0.0.1:<port>' "
            "(port 0 picks a free one)")
    return Address(host, port)


def parse_upstream(text: object) -> Address:
    """An upstream address; must be on this machine (127.0.0.0/8, ::1 or localhost)."""
    host, port = _split(text, "upstream")
    if port == 0:
        raise bad_request(f"upstream {text!r}: port 0 is not a destination")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise bad_request(
                f"upstream {text!r}: this proxy forwards only to loopback addresses "
                "(127.0.0.0/8, ::1 or localhost)")
    return Address(host, port)
