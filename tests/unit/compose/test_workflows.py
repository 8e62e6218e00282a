"""The GitHub workflows, read as YAML: triggers, pinned actions, the commands they run."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config import load_scenario
from harness.txn_paths import TxnPath
from orchestrator.release_matrix import version_key
from targets.compose import COMPOSE_DIR
from targets.compose.__main__ import main as compose_main
from targets.compose.layout import load_layout

WORKFLOWS = COMPOSE_DIR.parent / ".github" / "workflows"
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def _load(name: str) -> dict[Any, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict)
    return data


def _triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    on = workflow.get("on", workflow.get(True))   # YAML 1.1 reads a bare `on` as true
    assert isinstance(on, dict)
    return on


def _steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_there_are_exactly_the_two_workflows() -> None:
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == ["nightly.yml", "pr.yml"]


@pytest.mark.parametrize("name", ["pr.yml", "nightly.yml"])
def test_every_action_is_pinned_to_a_commit(name: str) -> None:
    uses = [step["uses"] for step in _steps(_load(name)) if "uses" in step]
    assert uses
    for action in uses:
        assert PINNED.match(action), f"{name}: {action} is not pinned to a commit SHA"
    text = (WORKFLOWS / name).read_text()
    for line in text.splitlines():
        if "uses:" in line:
            assert re.search(r"#\s+v\d+\.\d+\.\d+$", line), f"{name}: no release comment on {line.strip()}"


@pytest.mark.parametrize("name", ["pr.yml", "nightly.yml"])
def test_jobs_are_bounded_and_read_only(name: str) -> None:
    workflow = _load(name)
    assert workflow["permissions"] == {"contents": "read"}
    for job_name, job in workflow["jobs"].items():
        assert 0 < job["timeout-minutes"] <= 90, job_name
        assert job["runs-on"].startswith("ubuntu-")


@pytest.mark.parametrize("name", ["pr.yml", "nightly.yml"])
def test_run_blocks_are_valid_bash(name: str, tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    for index, step in enumerate(_steps(_load(name))):
        if "run" not in step:
            continue
        script = re.sub(r"\$\{\{[^}]*\}\}", "PLACEHOLDER", step["run"])
        path = tmp_path / f"step{index}.sh"
        path.write_text(script)
        done = subprocess.run([bash, "-n", str(path)], capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, f"{name} step {step.get('name')}: {done.stderr}"


def test_pull_requests_run_make_test() -> None:
    workflow = _load("pr.yml")
    assert "pull_request" in _triggers(workflow)
    runs = [step.get("run", "") for step in _steps(workflow)]
    assert "make test" in runs
    uses = " ".join(step.get("uses", "") for step in _steps(workflow))
    assert "actions/setup-python" in uses and "actions/setup-java" in uses   # make setup checks Java 17
    python = next(s for s in _steps(workflow) if "setup-python" in s.get("uses", ""))
    assert python["with"]["python-version"] == "3.11"


def test_nightly_runs_on_a_schedule_and_by_hand() -> None:
    triggers = _triggers(_load("nightly.yml"))
    assert "schedule" in triggers and triggers["schedule"][0]["cron"]
    assert "workflow_dispatch" in triggers


def test_nightly_covers_every_compose_file_with_its_path() -> None:
    job = _load("nightly.yml")["jobs"]["chaos"]
    assert job["strategy"]["fail-fast"] is False
    include = job["strategy"]["matrix"]["include"]
    assert sorted(entry["compose"] for entry in include) == sorted(p.name for p in COMPOSE_DIR.glob("*.yaml"))
    for entry in include:
        layout = load_layout(COMPOSE_DIR / entry["compose"])
        assert layout.txn_path is TxnPath(entry["path"])
        assert entry["name"] == entry["compose"].removesuffix(".yaml")


def test_nightly_runs_chaos_on_compose_uploads_results_and_fails_on_bad_verdicts() -> None:
    steps = _load("nightly.yml")["jobs"]["chaos"]["steps"]
    names = [s.get("name", s.get("uses", "")) for s in steps]
    chaos = next(s for s in steps if s.get("id") == "chaos")
    assert "txnbench chaos --target compose --scenario" in chaos["run"]
    assert "--results results" in chaos["run"]
    assert 'echo "exit_code=$code" >> "$GITHUB_OUTPUT"' in chaos["run"]
    upload = next(s for s in steps if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "results/"
    verdict = steps[-1]
    assert verdict["if"] == "always()"
    assert verdict["env"]["CHAOS_EXIT"] == "${{ steps.chaos.outputs.exit_code }}"
    assert "exit 1" in verdict["run"] and "0) echo" in verdict["run"]
    assert names.index("make setup") < names.index("chaos run on the compose target") < \
        names.index("upload the results and report") < names.index("fail on an invalid or missing verdict")
    cleanup = next(s for s in steps if s.get("name") == "remove containers a failed run left")
    assert "down --volumes" in cleanup["run"] and cleanup["if"] == "always()"


def test_the_verdict_step_fails_on_every_exit_code_but_zero(tmp_path: Path) -> None:
    script = _load("nightly.yml")["jobs"]["chaos"]["steps"][-1]["run"]
    path = tmp_path / "verdict.sh"
    path.write_text(script)
    for code, expected in (("0", 0), ("1", 1), ("2", 1), ("130", 1), ("", 1)):
        done = subprocess.run(["bash", str(path)], env={"CHAOS_EXIT": code, "COMPOSE_FILE_NAME": "v4.yaml",
                                                        "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == expected, (code, done.stdout)


def test_the_nightly_docker_tests_job_runs_make_test_docker() -> None:
    steps = _load("nightly.yml")["jobs"]["docker-tests"]["steps"]
    assert any(step.get("run", "").startswith("make test-docker") for step in steps)


def test_the_scenario_the_nightly_writes_runs_one_compose_file(tmp_path: Path) -> None:
    for file in ("v4-batched.yaml", "v5-zookeeper.yaml"):
        out = tmp_path / f"{file}.scenario.yaml"
        assert compose_main(["scenario", file, "--base", "chaos", "--out", str(out)]) == 0
        config = load_scenario(str(out))
        layout = load_layout(COMPOSE_DIR / file)
        assert config.paths == (layout.txn_path,)
        assert config.target.value == "compose"
        assert Path(config.cluster.compose_file or "") == (COMPOSE_DIR / file).resolve()
        assert config.faults.enabled and config.name == f"chaos-{file.removesuffix('.yaml')}"
    assert compose_main(["scenario", "v4.yaml"]) == 2   # --out is required


def test_nightly_runs_chaos_on_real_pulsar_on_every_release_and_path(tmp_path: Path) -> None:
    from targets.pulsar.versions import RELEASES

    job = _load("nightly.yml")["jobs"]["pulsar-chaos"]
    assert job["strategy"]["fail-fast"] is False
    include = job["strategy"]["matrix"]["include"]
    covered = {(entry["release"], p) for entry in include for p in entry["paths"].split()}
    main_releases = (RELEASES["5.0.1"], RELEASES["4.0.8"])   # the default and the LTS; the rest: release-matrix
    assert covered == {(r.version, p.value) for r in main_releases for p in TxnPath if r.supports(p)}
    # only the v5 job may fail (a known Pulsar 5.0.1 finding), so v4 regressions still turn the night red
    assert all(entry["paths"] == "v5" for entry in include if entry["known_failing"])
    assert job["continue-on-error"] == "${{ matrix.known_failing }}"
    steps = job["steps"]
    chaos = next(s for s in steps if s.get("id") == "chaos")
    assert ".venv/bin/txnbench chaos --target pulsar --pulsar-version \"$PULSAR_RELEASE\" --paths $TXN_PATHS" \
        in chaos["run"] and "--results results" in chaos["run"]
    java = next(s for s in steps if "setup-java" in s.get("uses", ""))
    assert java["with"]["java-version"] == "21"                       # Pulsar 5.0's servers
    assert any("actions/setup-go" in s.get("uses", "") for s in steps)  # the real Toxiproxy, built once
    cache = next(s for s in steps if "actions/cache" in s.get("uses", ""))
    assert set(cache["with"]["path"].split()) == {".txnbench/pulsar", ".txnbench/bin", "~/.m2/repository"}
    assert "targets/pulsar/maven/**/pom.xml" in cache["with"]["key"]
    names = [s.get("name", s.get("uses", "")) for s in steps]
    assert names.index("make setup") < names.index("chaos run on the pulsar target") < \
        names.index("upload the results and report") < names.index("fail on an invalid or missing verdict")
    verdict = steps[-1]
    assert verdict["if"] == "always()" and verdict["env"]["CHAOS_EXIT"] == "${{ steps.chaos.outputs.exit_code }}"
    path = tmp_path / "verdict.sh"
    path.write_text(verdict["run"])
    for code, expected in (("0", 0), ("1", 1), ("2", 1), ("", 1)):
        done = subprocess.run(["bash", str(path)], env={"CHAOS_EXIT": code, "PULSAR_RELEASE": "5.0.1",
                                                        "TXN_PATHS": "v4 v4-batched", "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == expected, (code, done.stdout)


def test_nightly_runs_the_release_matrix_per_release_and_combines_the_diff(tmp_path: Path) -> None:
    from targets.pulsar.versions import runnable

    job = _load("nightly.yml")["jobs"]["release-matrix"]
    assert job["strategy"]["matrix"]["release"] == [r.version for r in
                                                    sorted(runnable(), key=lambda r: version_key(r.version))]
    steps = job["steps"]
    run = next(s for s in steps if s.get("id") == "matrix")
    assert '.venv/bin/txnbench release-matrix --releases "$PULSAR_RELEASE" --duration "$DURATION"' in run["run"]
    assert next(s for s in steps if "setup-java" in s.get("uses", ""))["with"]["java-version"] == "21"
    verdict = steps[-1]
    assert verdict["if"] == "always()"
    path = tmp_path / "verdict.sh"
    path.write_text(verdict["run"])
    sessions = next(s for s in steps if s.get("id") == "sessions")
    assert "release-matrix --scenario chaos-sessions --releases \"$PULSAR_RELEASE\" --paths v4" in sessions["run"]
    for chaos, chaos_sessions, expected in (("0", "0", 0), ("1", "1", 0), ("0", "1", 0), ("2", "0", 1), ("0", "2", 1),
                                            ("130", "0", 1), ("", "0", 1), ("0", "", 1)):
        done = subprocess.run(["bash", str(path)], env={"MATRIX_EXIT": chaos, "SESSIONS_EXIT": chaos_sessions,
                                                        "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, check=False)
        assert done.returncode == expected, (chaos, chaos_sessions, done.stdout)
    combine = _load("nightly.yml")["jobs"]["release-diff"]
    assert combine["needs"] == "release-matrix" and combine["if"] == "always()"
    combined = " ".join(s.get("run", "") for s in combine["steps"])
    assert "txnbench release-matrix --from artifacts/*/*-release-matrix-chaos --out" in combined
    assert "--from artifacts/*/*-release-matrix-chaos-sessions" in combined
