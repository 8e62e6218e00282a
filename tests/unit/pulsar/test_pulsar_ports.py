"""The pulsar target planned again after a server's port was taken: every record follows, without processes.

`targets/ports.py` moves a service's ports when it could not bind them; this checks what the
pulsar target writes then: the moved server's config, the links' upstreams (the Toxiproxy
config and the running Toxiproxy's API), the advertised listeners (which name links, so they
stay), the bookie's and brokers' view of the store, state.json and ClusterInfo.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness.errors import EnvironmentProblem
from harness.txn_paths import TxnPath
from targets import ports as ports_module
from targets.ports import PortPlan
from targets.processes import ProcessState
from targets.pulsar import conf
from targets.pulsar.cluster import REAL_TOXIPROXY, PulsarCluster, PulsarSpec
from targets.pulsar.jars import Classpath
from targets.pulsar.versions import PULSAR_5


def scripted(start: int) -> Any:
    counter = iter(range(start, start + 1000))
    return lambda count: [next(counter) for _ in range(count)]


def parse(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture
def cluster(tmp_path: Path) -> PulsarCluster:
    """A planned 2-broker cluster on ZooKeeper behind the real Toxiproxy; nothing started."""
    cluster = PulsarCluster(PulsarSpec(txn_path=TxnPath.V4, directory=tmp_path, proxy=REAL_TOXIPROXY))
    cluster.java, cluster.binaries = "/usr/bin/java", {"toxiproxy-server": "/opt/toxiproxy-server"}
    for sub in ("data", "conf", "logs", "tmp"):
        (tmp_path / sub).mkdir()
    cluster._classpath, cluster._major = Classpath(PULSAR_5, tmp_path / "lib"), 21
    plan = cluster._choose_ports()
    cluster.port_plan = PortPlan.choose(list(plan.ports), chooser=scripted(20000))
    cluster._plan()
    return cluster


def upstreams(cluster: PulsarCluster) -> dict[str, str]:
    return {link.name: link.upstream for link in cluster.links}


def test_a_moved_broker_is_configured_dialled_and_recorded_on_its_new_ports(cluster: PulsarCluster) -> None:
    directory = cluster.directory
    old = cluster.port_plan.of("broker-0") if cluster.port_plan else {}
    before_conf = parse(directory / "conf" / "broker-0.conf")
    links_before = upstreams(cluster)
    service_url = cluster.info().service_url
    move = cluster._move_ports("broker-0", 1)
    new = move.new
    assert move.old == old and set(new) == {"binary_port", "http_port"} and not set(new.values()) & set(old.values())

    broker = parse(directory / "conf" / "broker-0.conf")
    assert broker["brokerServicePort"] == str(new["binary_port"]) and broker["webServicePort"] == str(new["http_port"])
    assert broker["advertisedListeners"] == before_conf["advertisedListeners"]   # links: unchanged
    assert broker["metadataStoreUrl"] == before_conf["metadataStoreUrl"]

    after = upstreams(cluster)
    assert after["client-broker-0"] == after["brokers-broker-0"] == f"127.0.0.1:{new['binary_port']}"
    assert {k: v for k, v in after.items() if k not in ("client-broker-0", "brokers-broker-0")} == \
        {k: v for k, v in links_before.items() if k not in ("client-broker-0", "brokers-broker-0")}
    toxiproxy = {p["name"]: p["upstream"] for p in json.loads((directory / "conf" / "toxiproxy.json").read_text())}
    assert toxiproxy == after   # a restarted Toxiproxy reads them from its -config

    state = json.loads((directory / "state.json").read_text())
    assert state["port_moves"] == [move.to_json()]
    services = {s["name"]: s for s in state["services"]}
    assert services["broker-0"]["ports"]["binary_port"] == new["binary_port"]
    assert services["broker-0"]["admin_url"] == f"http://127.0.0.1:{new['http_port']}"
    assert cluster.processes["broker-0"].ports == (new["binary_port"], new["http_port"])
    info = cluster.info()
    assert info.admin_url == f"http://127.0.0.1:{new['http_port']}"
    assert info.service_url == service_url   # clients dial the links, which did not move


def test_a_moved_store_is_what_the_bookie_and_the_links_name(cluster: PulsarCluster) -> None:
    move = cluster._move_ports("metadata", 1)
    zk = move.new["client_port"]
    assert parse(cluster.directory / "conf" / "zookeeper.conf")["clientPort"] == str(zk)
    bookie = parse(cluster.directory / "conf" / "bookie.conf")
    assert bookie["metadataServiceUri"] == f"zk+hierarchical://127.0.0.1:{zk}/ledgers"   # the bookie dials it directly
    after = upstreams(cluster)
    assert after["broker-0-metadata"] == after["broker-1-metadata"] == f"127.0.0.1:{zk}"
    assert cluster._setup_args[cluster._setup_args.index("--metadata-store") + 1] == conf.store_url(
        conf.ZOOKEEPER, f"127.0.0.1:{zk}")


def test_a_moved_bookie_keeps_its_id_the_link_follows(cluster: PulsarCluster) -> None:
    id_before = parse(cluster.directory / "conf" / "bookie.conf")["bookieId"]
    move = cluster._move_ports("ledger", 1)
    bookie = parse(cluster.directory / "conf" / "bookie.conf")
    assert bookie["bookiePort"] == str(move.new["bookie_port"]) and bookie["bookieId"] == id_before
    assert bookie["prometheusStatsHttpPort"] == str(move.new["metrics_port"])
    assert upstreams(cluster)["brokers-ledger"] == f"127.0.0.1:{move.new['bookie_port']}"
    assert cluster.records["ledger"].metrics_url == f"http://127.0.0.1:{move.new['metrics_port']}/metrics"


def test_a_moved_proxy_takes_every_link_to_new_ports_and_the_servers_follow(cluster: PulsarCluster) -> None:
    move = cluster._move_ports("proxy", 1)
    links = {link.name: link.listen for link in cluster.links}
    assert links["client-broker-0"] == f"127.0.0.1:{move.new['link:client-broker-0']}"
    broker = parse(cluster.directory / "conf" / "broker-1.conf")
    assert f"external:pulsar://127.0.0.1:{move.new['link:client-broker-1']}" in broker["advertisedListeners"]
    assert f"internal:pulsar://127.0.0.1:{move.new['link:brokers-broker-1']}" in broker["advertisedListeners"]
    assert parse(cluster.directory / "conf" / "bookie.conf")["bookieId"] == \
        f"127.0.0.1:{move.new['link:brokers-ledger']}"
    assert cluster.toxiproxy_url == f"http://127.0.0.1:{move.new['api_port']}"
    assert cluster.processes["proxy"].ports == (move.new["api_port"],)


class _RunningProxy:
    state = ProcessState.RUNNING
    pid, start_time = 4242, 1


class _Client:
    calls: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update_proxy(self, name: str, *, upstream: str) -> None:
        self.calls.append((name, upstream))


def test_the_running_proxy_is_pointed_at_the_new_upstreams(cluster: PulsarCluster,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports_module, "ToxiproxyClient", _Client)
    _Client.calls = []
    cluster.processes["proxy"] = _RunningProxy()   # type: ignore[assignment]
    move = cluster._move_ports("broker-1", 1)
    new = f"127.0.0.1:{move.new['binary_port']}"
    assert sorted(_Client.calls) == [("brokers-broker-1", new), ("client-broker-1", new)]
    cluster.processes["metadata"] = _RunningProxy()   # type: ignore[assignment]
    with pytest.raises(EnvironmentProblem, match="cannot move under running services"):
        cluster._move_ports("proxy", 1)


@pytest.mark.parametrize("kind", ["bookie", "oxia"])
def test_a_bookie_or_oxia_readiness_probe_asks_its_health_url_once(kind: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its probe is its port plus its health URL; `healthy` adds the ports it holds. The probe once
    called `healthy` again, which called the probe: every real-Pulsar start died of RecursionError."""
    from targets.pulsar import servers

    monkeypatch.setattr(servers, "port_open", lambda port: True)
    server = servers.JavaServer(name="ledger", argv=["true"], log_path=tmp_path / "ledger.log", kind=kind,
                                port=1, health_url=None)
    assert server.answers() is False          # no health URL: not ready, and no recursion
    assert server.healthy() is False
