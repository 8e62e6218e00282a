from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("run", "bench", "chaos", "sweep", "check", "report", "cluster"):
        assert command in out


def test_cluster_actions_exist() -> None:
    parser = build_parser()
    for action in ("up", "status", "down", "heal"):
        args = parser.parse_args(["cluster", action])
        assert args.cluster_command == action


def test_worker_arguments_parse_without_loading_the_load_process() -> None:
    args = build_parser().parse_args(["worker", "--master", "127.0.0.1:5557"])
    assert (args.master, args.processes, args.dir, args.wait, args.scenario) == (
        "127.0.0.1:5557", 1, Path("txnbench-worker"), 300.0, None)
    probe = "import sys, orchestrator.cli; print(sorted({'gevent', 'locust'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=True).stdout.strip()
    assert loaded == "[]"


def test_unknown_scenario_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no-such-scenario"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no-such-scenario" in err and "not found" in err


def test_misspelled_key_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload:\n  mesages_per_txn: 3\n")
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"txnbench: {bad}: workload.mesages_per_txn: unknown key; did you mean 'messages_per_txn'?"


def test_bad_duration_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "atomic-produce", "--duration", "-3"])
    assert info.value.code == 2


def test_external_target_needs_a_service_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "atomic-produce", "--target", "external"]) == 2
    assert "--service-url" in capsys.readouterr().err


def test_console_script_runs_without_traceback() -> None:
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "no-such-scenario"],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_fault_target_is_refused_before_anything_starts(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "chaos-typo.yaml"
    bad.write_text("phases: {faults_s: 10}\nfaults:\n  schedule:\n    - {kind: kill, target: 'brokr:1', at_s: 1}\n")
    assert main(["run", str(bad), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert "faults.schedule[0].target" in err and "\n" not in err
    assert not (tmp_path / "results").exists()   # refused before a run folder was made


def test_set_overrides_the_scenarios_cluster_settings_with_json_values() -> None:
    from orchestrator.cli import scenario_from_args

    args = build_parser().parse_args(["bench", "--set", "txnbenchDispatchHorizonPollMillis=50",
                                      "--set", "transactionLogBatchedWriteEnabled=true", "--set", "name=x=y"])
    settings = scenario_from_args(args).cluster.settings
    assert settings["txnbenchDispatchHorizonPollMillis"] == 50
    assert settings["transactionLogBatchedWriteEnabled"] is True
    assert settings["name"] == "x=y"


def test_a_set_without_a_value_exits_2_naming_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "bench", "--set", "oops"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "KEY=VALUE" in err[0] and "--set" in err[0]


def test_peer_cluster_warmup_takes_whole_seconds_and_zero_skips_it() -> None:
    parser = build_parser()
    assert parser.parse_args(["peer", "atomic-produce"]).cluster_warmup is None   # the peer's default
    assert parser.parse_args(["peer", "atomic-produce", "--cluster-warmup", "0"]).cluster_warmup == 0
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["peer", "atomic-produce", "--cluster-warmup", "-5"])
    assert info.value.code == 2


def test_a_run_of_one_path_is_checked_against_the_release_for_that_path_only() -> None:
    """The release matrix prints `txnbench run chaos --path v4 ... --pulsar-version 3.2.0` to
    reproduce a cell; chaos.yaml lists v5 too, which 3.2.0 lacks, and the command was refused."""
    from orchestrator.cli import scenario_from_args

    args = build_parser().parse_args(["run", "chaos", "--path", "v4", "--target", "pulsar",
                                      "--pulsar-version", "3.2.0", "--seed", "7", "--duration", "120"])
    config = scenario_from_args(args)
    assert config.path.value == "v4" and [p.value for p in config.paths] == ["v4"]
    assert config.cluster.pulsar_version == "3.2.0"
