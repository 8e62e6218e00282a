"""The external target takes the multi-host service URLs clusters hand out (`pulsar://h:p,h:p`)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from harness.target import service_hosts
from harness.txn_paths import TxnPath
from targets.external import ExternalCluster
from targets.processes import free_port


def test_service_hosts_reads_every_host_in_order() -> None:
    assert service_hosts("pulsar://127.0.0.1:6650") == [("127.0.0.1", 6650)]
    assert service_hosts("pulsar://a:1,b:2/") == [("a", 1), ("b", 2)]
    assert service_hosts("pulsar+ssl://[::1]:6651") == [("::1", 6651)]


@pytest.mark.parametrize("url", ["http://a:1", "pulsar://a", "pulsar://a:1,b", "pulsar://a:70000", "a:1"])
def test_a_bad_service_url_names_itself(url: str) -> None:
    with pytest.raises(ValueError, match="service URL"):
        service_hosts(url)


def test_up_needs_one_reachable_broker_of_several(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        live = server.getsockname()[1]
        url = f"pulsar://127.0.0.1:{free_port()},127.0.0.1:{live}"   # the first broker is down
        info = ExternalCluster(url, None, TxnPath.V4, embedded_dir=tmp_path).up()
    assert info.service_url == url and info.target == "external"


def test_up_names_every_host_when_none_answers(tmp_path: Path) -> None:
    ports = (free_port(), free_port())
    url = f"pulsar://127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}"
    with pytest.raises(EnvironmentProblem, match=r"cannot reach .*is the cluster running") as raised:
        ExternalCluster(url, None, TxnPath.V4, embedded_dir=tmp_path).up()
    assert all(f"127.0.0.1:{p}:" in str(raised.value) for p in ports)
    with pytest.raises(EnvironmentProblem, match="not host:port"):
        ExternalCluster("pulsar://nowhere", None, TxnPath.V4, embedded_dir=tmp_path).up()
