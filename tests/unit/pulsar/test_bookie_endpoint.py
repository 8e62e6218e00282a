"""targets.pulsar.bookie_endpoint: which releases' brokers would dial around the link to the bookie."""

from __future__ import annotations

import pytest

from harness.errors import EnvironmentProblem
from targets.ports import free_ports
from targets.pulsar.bookie_endpoint import (
    dialled_around,
    empty_published_endpoint,
    registration_path,
    resolves_published_endpoint,
)


@pytest.mark.parametrize(("version", "resolves"), [
    ("4.14.7", True), ("4.14.0", True), ("4.15.0", False), ("4.16.1", False), ("4.18.2", False), ("5.0.0", False),
    ("", False), ("unknown", False), ("4", False),
])
def test_only_clients_without_the_switch_resolve_the_published_endpoint(version: str, resolves: bool) -> None:
    assert resolves_published_endpoint(version) is resolves


def test_the_registration_node_is_the_writable_bookies_node_under_the_ledgers_root() -> None:
    assert registration_path("127.0.0.1:23178") == "/ledgers/available/127.0.0.1:23178"


def test_a_broker_log_that_resolved_the_link_to_the_bookie_is_named_by_its_line() -> None:
    # The line 2.10.5's brokers wrote on 2026-12-05 before the registration was emptied.
    bypass = ("2026-12-05T04:05:31,106 INFO  [BookKeeperClientScheduler-OrderedScheduler-0-0] "
              "o.a.b.c.DefaultBookieAddressResolver - Resolved 127.0.0.1:23178 as 127.0.0.1:28695 {}")
    log = "\n".join(["starting", bypass, "ready"])
    assert dialled_around(log, "127.0.0.1:23178") == bypass
    # Another bookie's id, or none resolved: the link carries the traffic.
    assert dialled_around(log, "127.0.0.1:9999") is None
    assert dialled_around("o.a.b.d.ZKRegistrationClient - Update BookieInfoCache (writable bookie)", "127.0.0.1:23178") is None


def test_a_zookeeper_that_does_not_answer_is_one_clear_error() -> None:
    # A bookie restarted while the store is down: the cluster says what it could not do, not a kazoo trace.
    (nobody,) = free_ports(1)
    with pytest.raises(EnvironmentProblem, match=r"did not answer.*ledger link"):
        empty_published_endpoint(f"127.0.0.1:{nobody}", "127.0.0.1:1", timeout_s=1.0)
