"""ComposeCluster against a fake Docker Engine API, a fake Toxiproxy and a fake `docker compose`.

Nothing here needs Docker: the Docker SDK talks HTTP to FakeDockerEngine on
127.0.0.1, and FakeCompose plays the CLI, starting fake servers on the host ports
the run chose, as Docker would publish them.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config import parse_scenario
from harness.errors import ConfigError, EnvironmentProblem
from harness.target import ClusterTarget, LinkKind, ProcessControl, ServiceRole
from harness.toxiproxy.client import ToxiproxyClient
from harness.txn_paths import TxnPath
from targets.compose import (
    ComposeCluster,
    ComposeFileError,
    ComposeSpec,
    default_compose_file,
    project_name,
)
from targets.compose.cluster import NET_PREFIX_VAR, TOXIPROXY_CONFIG_VAR
from targets.compose.layout import load_layout
from targets.compose.links import plan_links, toxiproxy_config
from tests.unit.compose.fakes import FakeCompose, FakeDockerEngine

PROJECT = "txnbench-unit-0001"


@pytest.fixture
def engine() -> Iterator[FakeDockerEngine]:
    fake = FakeDockerEngine()
    yield fake
    fake.close()


@pytest.fixture
def docker_bin(tmp_path: Path) -> str:
    """A PATH with a `docker` executable (never run: the runner is fake)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    stub = folder / "docker"
    stub.write_text("#!/bin/sh\nexit 99\n")
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return str(folder)


class Harness:
    def __init__(self, tmp_path: Path, engine: FakeDockerEngine, docker_bin: str) -> None:
        self.tmp_path, self.engine, self.docker_bin = tmp_path, engine, docker_bin
        self.runners: list[FakeCompose] = []

    def make(self, path: TxnPath = TxnPath.V4, *, compose_file: Path | None = None,
             settings: dict[str, Any] | None = None, ready_timeout_s: float = 3.0,
             environ: dict[str, str] | None = None, **runner_options: Any) -> tuple[ComposeCluster, FakeCompose]:
        file = compose_file or default_compose_file(path)
        runner = FakeCompose(engine=self.engine, layout=load_layout(file), **runner_options)
        self.runners.append(runner)
        spec = ComposeSpec(compose_file=file, txn_path=path, project=PROJECT, work_dir=self.tmp_path / "compose",
                           settings=settings or {}, brokers=2, ready_timeout_s=ready_timeout_s,
                           docker_base_url=self.engine.base_url, poll_s=0.01)
        env = {"PATH": self.docker_bin, **(environ or {})}
        return ComposeCluster(spec, runner=runner, environ=env, progress=lambda _: None), runner

    def close(self) -> None:
        for runner in self.runners:
            runner.close_servers()


@pytest.fixture
def harness(tmp_path: Path, engine: FakeDockerEngine, docker_bin: str) -> Iterator[Harness]:
    h = Harness(tmp_path, engine, docker_bin)
    yield h
    h.close()


def _up_command(runner: FakeCompose) -> tuple[str, ...]:
    return next(c for c in runner.commands if "up" in c)


def _up_env(runner: FakeCompose) -> dict[str, str]:
    return runner.envs[runner.commands.index(_up_command(runner))]


# ---- lifecycle ---------------------------------------------------------------------------------

def test_the_cluster_is_a_cluster_target_and_its_own_process_control(harness: Harness) -> None:
    cluster, _ = harness.make()
    assert isinstance(cluster, ClusterTarget)
    assert isinstance(cluster.process_control(), ProcessControl)


def test_up_binds_every_published_port_to_a_free_port_and_returns_a_ready_cluster(harness: Harness) -> None:
    cluster, runner = harness.make()
    info = cluster.up()

    command = _up_command(runner)
    assert command[:4] == ("docker", "compose", "--project-name", PROJECT)
    assert ("--file", str(default_compose_file(TxnPath.V4))) == command[4:6]
    assert command[6:] == ("up", "--detach", "--quiet-pull")
    env = _up_env(runner)
    variables = sorted(load_layout(default_compose_file(TxnPath.V4)).port_variables())
    ports = [int(env[v]) for v in variables]
    assert len(set(ports)) == len(variables) == 7
    ports_of_clients = [int(env[f"TXNBENCH_BROKER_{i}_CLIENT_PORT"]) for i in (0, 1)]
    # every broker: a client whose first host is killed carries on through the next
    assert info.service_url == "pulsar://" + ",".join(f"127.0.0.1:{p}" for p in ports_of_clients)
    assert info.admin_url == f"http://127.0.0.1:{env['TXNBENCH_BROKER_0_HTTP_PORT']}"
    assert info.toxiproxy_url == f"http://127.0.0.1:{env['TXNBENCH_PROXY_API_PORT']}"
    assert info.target == "compose" and info.txn_path is TxnPath.V4
    assert sorted(s.name for s in info.services) == ["broker-0", "broker-1", "ledger", "metadata", "proxy"]
    assert {s.state for s in info.services} == {"running"}
    assert info.service("broker-1").service_url == \
        f"pulsar://127.0.0.1:{env['TXNBENCH_BROKER_1_CLIENT_PORT']}"
    assert info.service("ledger").metrics_url == f"http://127.0.0.1:{env['TXNBENCH_LEDGER_METRICS_PORT']}/metrics"
    assert info.settings["transactionCoordinatorEnabled"] is True
    assert info.settings["transactionLogBatchedWriteEnabled"] is False
    assert str(info.settings["advertisedListeners"]).endswith(f"external:pulsar://127.0.0.1:{ports_of_clients[0]}")
    cluster.down()


def test_the_toxiproxy_config_is_written_for_the_chosen_addresses_and_mounted(harness: Harness) -> None:
    cluster, runner = harness.make(TxnPath.V5)
    info = cluster.up()
    env = _up_env(runner)
    config_path = Path(env[TOXIPROXY_CONFIG_VAR])
    assert config_path.is_file() and config_path.parent == harness.tmp_path / "compose"
    layout = load_layout(default_compose_file(TxnPath.V5))
    assert json.loads(config_path.read_text()) == toxiproxy_config(plan_links(layout, env))
    prefix = env[NET_PREFIX_VAR]
    assert any(p["listen"] == f"{prefix}.11.10:6648" and p["upstream"] == "oxia:6648"
               for p in json.loads(config_path.read_text()))
    by_name = {link.name: link for link in info.links}
    assert by_name["client-broker-0"].listen == f"127.0.0.1:{env['TXNBENCH_BROKER_0_CLIENT_PORT']}"
    assert by_name["broker-1-ledger"].kind is LinkKind.BROKER_LEDGER
    assert by_name["broker-0-broker-1"].upstream == "broker-1:6651"
    cluster.down()


def test_down_always_removes_containers_networks_and_volumes(harness: Harness, engine: FakeDockerEngine) -> None:
    cluster, runner = harness.make()
    cluster.up()
    assert engine.containers
    cluster.down()
    down = runner.commands[-1]
    assert down[:4] == ("docker", "compose", "--project-name", PROJECT)
    assert down[6:] == ("down", "--volumes", "--remove-orphans", "--timeout", "10")
    assert engine.containers == {}
    cluster.down()   # idempotent: nothing started, nothing run
    assert runner.commands[-1] == down and sum("down" in c for c in runner.commands) == 1


def test_down_resumes_paused_containers_first(harness: Harness, engine: FakeDockerEngine) -> None:
    cluster, _ = harness.make()
    cluster.up()
    cluster.pause("broker-0")
    cluster.down()
    assert ("unpause", f"{PROJECT}-broker-0-1") in engine.actions


def test_settings_from_the_scenario_go_to_every_broker_through_an_override_file(harness: Harness) -> None:
    cluster, runner = harness.make(TxnPath.V4_BATCHED, settings={"transactionLogBatchedWriteMaxRecords": 64,
                                                                  "exposeConsumerLevelMetricsInPrometheus": True})
    info = cluster.up()
    command = _up_command(runner)
    files = [command[i + 1] for i, part in enumerate(command) if part == "--file"]
    assert len(files) == 2
    override = yaml.safe_load(Path(files[1]).read_text())
    for broker in ("broker-0", "broker-1"):
        environment = override["services"][broker]["environment"]
        assert environment["PULSAR_PREFIX_transactionLogBatchedWriteMaxRecords"] == "64"
        assert environment["PULSAR_PREFIX_exposeConsumerLevelMetricsInPrometheus"] == "true"
    assert info.settings["transactionLogBatchedWriteMaxRecords"] == 64
    cluster.down()


# ---- process control through the Docker API ----------------------------------------------------

def test_kill_start_pause_resume_go_through_the_docker_api(harness: Harness, engine: FakeDockerEngine) -> None:
    cluster, _ = harness.make()
    cluster.up()
    broker1 = f"{PROJECT}-broker-1-1"

    cluster.kill("broker-1")
    assert ("kill:SIGKILL", broker1) in engine.actions
    assert not cluster.is_running("broker-1")
    assert cluster.info().service("broker-1").state == "killed"
    cluster.kill("broker-1")   # already down: no second signal
    assert engine.actions.count(("kill:SIGKILL", broker1)) == 1

    engine.by_service("broker-1").health_script = ["starting", "starting", "healthy"]
    cluster.start("broker-1")
    assert ("start", broker1) in engine.actions
    assert engine.by_service("broker-1").health == "healthy"   # start waited through `starting`
    assert cluster.is_running("broker-1")

    cluster.pause("broker-0")
    assert ("pause", f"{PROJECT}-broker-0-1") in engine.actions
    assert not cluster.is_running("broker-0")
    assert cluster.info().service("broker-0").state == "paused"
    cluster.resume("broker-0")
    assert ("unpause", f"{PROJECT}-broker-0-1") in engine.actions
    assert cluster.is_running("broker-0")
    cluster.resume("broker-0")   # not paused: nothing to do
    assert [a for a in engine.actions if a[0] == "unpause"] == [("unpause", f"{PROJECT}-broker-0-1")]
    cluster.down()


def test_compose_service_names_are_accepted_for_the_shared_roles(harness: Harness,
                                                                  engine: FakeDockerEngine) -> None:
    cluster, _ = harness.make()
    cluster.up()
    cluster.kill("zookeeper")
    assert ("kill:SIGKILL", f"{PROJECT}-zookeeper-1") in engine.actions
    assert cluster.info().service("metadata").state == "killed"
    cluster.start("metadata")
    cluster.pause("bookie")
    assert cluster.info().service("ledger").state == "paused"
    cluster.resume("ledger")
    cluster.down()


def test_killing_a_paused_container_resumes_it_first(harness: Harness, engine: FakeDockerEngine) -> None:
    cluster, _ = harness.make()
    cluster.up()
    cluster.pause("broker-0")
    cluster.kill("broker-0")
    name = f"{PROJECT}-broker-0-1"
    assert engine.actions[-2:] == [("unpause", name), ("kill:SIGKILL", name)]
    cluster.down()


def test_unknown_services_are_named_with_the_known_ones(harness: Harness) -> None:
    cluster, _ = harness.make()
    cluster.up()
    with pytest.raises(KeyError, match=r"broker-7.*broker-0.*ledger"):
        cluster.kill("broker-7")
    with pytest.raises(KeyError, match=r"init"):
        cluster.kill("init")   # a one-shot is not a process to fault
    cluster.down()


def test_start_times_out_when_the_health_check_never_passes(harness: Harness, engine: FakeDockerEngine) -> None:
    cluster, _ = harness.make(ready_timeout_s=0.3)
    cluster.up()
    cluster.kill("broker-0")
    engine.by_service("broker-0").health_script = ["starting"] * 10_000
    with pytest.raises(RuntimeError, match=r"broker-0 did not become running and healthy"):
        cluster.start("broker-0")
    cluster.down()


# ---- network faults through the Toxiproxy API --------------------------------------------------

def test_links_missing_from_toxiproxy_are_created_through_its_api(harness: Harness) -> None:
    cluster, runner = harness.make(toxiproxy_from_config=False)
    info = cluster.up()
    assert runner.toxiproxy is not None
    populate = [body for method, route, body in runner.toxiproxy.requests if route == "/populate"]
    assert len(populate) == 1
    assert sorted(p["name"] for p in populate[0]) == sorted(link.name for link in info.links)
    cluster.down()


def test_links_already_in_toxiproxy_are_left_alone(harness: Harness) -> None:
    cluster, runner = harness.make()
    cluster.up()
    assert runner.toxiproxy is not None
    assert [r for r in runner.toxiproxy.requests if r[1] == "/populate"] == []
    cluster.down()


def test_network_faults_reach_toxiproxy_and_heal_network_resets_them(harness: Harness) -> None:
    cluster, runner = harness.make(TxnPath.V5)
    info = cluster.up()
    assert info.toxiproxy_url is not None and runner.toxiproxy is not None
    with ToxiproxyClient(info.toxiproxy_url) as client:
        client.disable("broker-0-metadata")
        client.add_toxic("client-broker-1", "latency", {"latency": 200, "jitter": 10})
        client.add_toxic("broker-1-ledger", "timeout", {"timeout": 0}, stream="upstream")
    proxies = runner.toxiproxy.proxies
    assert proxies["broker-0-metadata"]["enabled"] is False
    assert [t["type"] for t in proxies["client-broker-1"]["toxics"]] == ["latency"]
    cluster.heal_network()
    assert all(p["enabled"] and not p["toxics"] for p in proxies.values())
    assert ("POST", "/reset", None) in runner.toxiproxy.requests
    cluster.down()


# ---- metrics and logs ---------------------------------------------------------------------------

def test_metrics_are_scraped_from_every_published_metrics_port(harness: Harness) -> None:
    cluster, _ = harness.make()
    cluster.up()
    scraped = cluster.scrape_metrics()
    assert sorted(scraped) == ["broker-0", "broker-1", "ledger", "metadata", "proxy"]
    assert 'fake_up{service="broker-1"} 1' in scraped["broker-1"]
    cluster.pause("broker-1")
    assert "broker-1" not in cluster.scrape_metrics()   # a paused broker is not waited on
    cluster.down()


def test_container_logs_are_collected_one_file_per_service(harness: Harness, tmp_path: Path) -> None:
    cluster, _ = harness.make()
    cluster.up()
    dest = tmp_path / "logs"
    cluster.collect_logs(dest)
    names = sorted(p.name for p in dest.iterdir())
    assert names == ["broker-0.log", "broker-1.log", "compose-up.log", "init.log", "ledger.log",
                     "metadata.log", "proxy.log"]
    assert b"broker-1 log line" in (dest / "broker-1.log").read_bytes()
    assert b"setup correctly" in (dest / "init.log").read_bytes()
    cluster.down()


# ---- planning ----------------------------------------------------------------------------------

def test_the_subnet_prefix_avoids_networks_docker_already_has(harness: Harness, engine: FakeDockerEngine) -> None:
    engine.networks = [{"Name": "other", "IPAM": {"Config": [{"Subnet": "10.213.0.0/16"}]}},
                       {"Name": "bridge", "IPAM": {"Config": [{"Subnet": "172.17.0.0/16"}]}}]
    cluster, runner = harness.make()
    cluster.up()
    assert _up_env(runner)[NET_PREFIX_VAR] == "10.214"
    cluster.down()


def test_a_subnet_prefix_from_the_environment_is_kept(harness: Harness) -> None:
    cluster, runner = harness.make(environ={NET_PREFIX_VAR: "10.99"})
    info = cluster.up()
    assert _up_env(runner)[NET_PREFIX_VAR] == "10.99"
    assert {link.listen.rsplit(":", 1)[0] for link in info.links if link.name.startswith("broker-0-")} == \
        {"10.99.10.10"}
    cluster.down()


def test_from_config_maps_each_path_to_its_default_file(tmp_path: Path) -> None:
    for txn_path, file in ((TxnPath.V4, "v4.yaml"), (TxnPath.V4_BATCHED, "v4-batched.yaml"),
                       (TxnPath.V5, "v5-oxia.yaml")):
        config = parse_scenario(f"path: {txn_path.value}\ntarget: compose\n")
        cluster = ComposeCluster.from_config(config, tmp_path / f"run-{txn_path.value}")
        assert cluster.spec.compose_file.name == file
        assert cluster.spec.txn_path is txn_path
        assert cluster.spec.ready_timeout_s >= 300
        assert cluster.spec.work_dir == tmp_path / f"run-{txn_path.value}" / "compose"


def test_cluster_compose_file_overrides_the_default(tmp_path: Path) -> None:
    config = parse_scenario("path: v5\ntarget: compose\ncluster: {compose_file: v5-zookeeper.yaml}\n")
    assert ComposeCluster.from_config(config, tmp_path).spec.compose_file.name == "v5-zookeeper.yaml"
    config = parse_scenario(f"path: v5\ncluster: {{compose_file: {default_compose_file(TxnPath.V5)}}}\n")
    assert ComposeCluster.from_config(config, tmp_path).spec.compose_file == default_compose_file(TxnPath.V5)
    with pytest.raises(ConfigError, match=r"cluster.compose_file.*nope.yaml.*v4.yaml"):
        ComposeCluster.from_config(parse_scenario("cluster: {compose_file: nope.yaml}\n"), tmp_path)


def test_a_file_for_another_path_or_broker_count_is_refused(tmp_path: Path) -> None:
    config = parse_scenario("path: v4\ncluster: {compose_file: v5-oxia.yaml}\n")
    with pytest.raises(ConfigError, match=r"runs path v5, but this run is on v4"):
        ComposeCluster.from_config(config, tmp_path)
    config = parse_scenario("path: v4\ncluster: {brokers: 3}\n")
    with pytest.raises(ConfigError, match=r"cluster.brokers.*defines 2 brokers"):
        ComposeCluster.from_config(config, tmp_path)


def test_project_names_are_valid_and_unique_per_run_folder(tmp_path: Path) -> None:
    a = project_name("20260101-120000-Chaos.Run-v4", tmp_path / "a")
    b = project_name("20260101-120000-Chaos.Run-v4", tmp_path / "b")
    assert a != b
    for name in (a, b, project_name("v4", tmp_path / "matrix" / "runs" / "v4")):
        assert name.startswith("txnbench-") and name == name.lower()
        assert all(c.isalnum() or c in "-_" for c in name)


# ---- errors a user can hit ---------------------------------------------------------------------

def test_missing_docker_cli_says_what_to_install(harness: Harness, tmp_path: Path) -> None:
    cluster, runner = harness.make()
    cluster.environ["PATH"] = str(tmp_path)   # no docker here
    with pytest.raises(EnvironmentProblem, match=r"needs the Docker CLI.*not on PATH.*Docker Engine 24"):
        cluster.up()
    assert runner.commands == []


def test_missing_compose_plugin_is_named(harness: Harness) -> None:
    cluster, runner = harness.make(compose_missing=True)
    with pytest.raises(EnvironmentProblem, match=r"Docker Compose v2 is missing.*docker-compose-plugin"):
        cluster.up()
    assert not any("up" in c for c in runner.commands)


def test_an_unreachable_engine_is_named_with_the_fix(harness: Harness) -> None:
    cluster, _ = harness.make(engine_down=True)
    with pytest.raises(EnvironmentProblem, match=r"Docker engine is not reachable.*Is the docker daemon running"
                                                 ".*DOCKER_HOST"):
        cluster.up()


def test_an_old_compose_is_refused(harness: Harness) -> None:
    cluster, _ = harness.make(compose_version="2.12.0")
    with pytest.raises(EnvironmentProblem, match=r"Compose 2.12.0 is too old"):
        cluster.up()


def test_a_failed_compose_up_is_reported_and_cleaned_up(harness: Harness) -> None:
    cluster, runner = harness.make(up_exit=18)
    with pytest.raises(EnvironmentProblem, match=r"(?s)`docker compose up` failed .*exit 18.*pull access denied"):
        cluster.up()
    assert "down" in runner.commands[-1]
    assert (harness.tmp_path / "compose" / "compose-up.log").read_text().strip().endswith("pull access denied")


def test_a_failed_metadata_initialisation_shows_its_log(harness: Harness, engine: FakeDockerEngine) -> None:
    cluster, runner = harness.make(init_exit=1)
    with pytest.raises(EnvironmentProblem, match=r"(?s)init .*exit code 1.*failed to connect to the metadata store"):
        cluster.up()
    assert "down" in runner.commands[-1]
    assert engine.containers == {}


def test_an_unhealthy_service_stops_the_start_up_with_its_log(harness: Harness) -> None:
    cluster, runner = harness.make(unhealthy="broker-1")
    with pytest.raises(EnvironmentProblem, match=r"(?s)broker-1 \(broker-1\) is unhealthy.*broker-1 log line"):
        cluster.up()
    assert "down" in runner.commands[-1]


def test_a_service_that_never_gets_healthy_times_out_naming_it(harness: Harness) -> None:
    cluster, runner = harness.make(never_healthy="bookie", ready_timeout_s=0.3)
    with pytest.raises(EnvironmentProblem, match=r"not ready within 0s \(bookie: running/starting\)"):
        cluster.up()
    assert "down" in runner.commands[-1]


def test_a_file_that_breaks_the_conventions_is_refused_before_docker_runs(tmp_path: Path,
                                                                         harness: Harness) -> None:
    text = default_compose_file(TxnPath.V4).read_text().replace('"127.0.0.1:${TXNBENCH_BROKER_1_HTTP_PORT',
                                                                 '"${TXNBENCH_BROKER_1_HTTP_PORT')
    broken = tmp_path / "broken.yaml"
    broken.write_text(text)
    with pytest.raises(ComposeFileError, match=r"(?s)does not follow txnbench.s compose conventions.*broker-1.*all interfaces"):
        harness.make(compose_file=broken)


def test_roles_of_the_services_match_the_shared_names(harness: Harness) -> None:
    cluster, _ = harness.make(TxnPath.V5)
    roles = {s.name: s.role for s in cluster.info().services}
    assert roles == {"metadata": ServiceRole.METADATA, "ledger": ServiceRole.LEDGER, "proxy": ServiceRole.PROXY,
                     "broker-0": ServiceRole.BROKER, "broker-1": ServiceRole.BROKER}


def test_clients_are_told_to_ask_for_the_external_listener(harness: Harness) -> None:
    """Brokers advertise their Toxiproxy address as the `external` listener (compose/*.yaml)."""
    cluster, _ = harness.make(TxnPath.V4)
    assert cluster.info().listener_name == "external"
