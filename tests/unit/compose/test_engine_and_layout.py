"""The docker CLI checks, the subprocess runner, Compose interpolation and port parsing."""

from __future__ import annotations

import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from targets.compose.engine import (
    CommandResult,
    SubprocessRunner,
    check_docker,
    compose_argv,
)
from targets.compose.layout import (
    ComposeFileError,
    interpolate,
    parse_port,
    variable_default,
)


class ScriptedDocker:
    def __init__(self, answers: Mapping[str, tuple[int, str, str]], missing: bool = False) -> None:
        self.answers = answers
        self.missing = missing
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            timeout_s: float = 60.0) -> CommandResult:
        self.calls.append(tuple(argv))
        if self.missing:
            raise FileNotFoundError(argv[0])
        code, out, err = self.answers[argv[1]]
        return CommandResult(tuple(argv), code, out, err)


@pytest.fixture
def path_with_docker(tmp_path: Path) -> dict[str, str]:
    stub = tmp_path / "docker"
    stub.write_text("#!/bin/sh\n")
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return {"PATH": str(tmp_path)}


def test_versions_are_returned_when_everything_is_there(path_with_docker: dict[str, str]) -> None:
    runner = ScriptedDocker({"compose": (0, "v2.29.7\n", ""), "version": (0, "27.3.1\n", "")})
    versions = check_docker(runner, env=path_with_docker)
    assert (versions.engine, versions.compose) == ("27.3.1", "2.29.7")
    assert runner.calls == [("docker", "compose", "version", "--short"),
                            ("docker", "version", "--format", "{{.Server.Version}}")]


def test_a_cli_that_cannot_be_run_is_reported(path_with_docker: dict[str, str]) -> None:
    with pytest.raises(EnvironmentProblem, match=r"cannot be run.*Docker Engine 24.*--target embedded"):
        check_docker(ScriptedDocker({}, missing=True), env=path_with_docker)


def test_an_old_engine_is_refused(path_with_docker: dict[str, str]) -> None:
    runner = ScriptedDocker({"compose": (0, "2.29.7", ""), "version": (0, "19.03.13", "")})
    with pytest.raises(EnvironmentProblem, match=r"Docker Engine 19.03.13 is too old"):
        check_docker(runner, env=path_with_docker)


def test_an_engine_answering_nothing_counts_as_unreachable(path_with_docker: dict[str, str]) -> None:
    runner = ScriptedDocker({"compose": (0, "2.29.7", ""), "version": (0, "", "")})
    with pytest.raises(EnvironmentProblem, match=r"not reachable"):
        check_docker(runner, env=path_with_docker)


def test_compose_argv_names_the_project_and_every_file() -> None:
    assert compose_argv("docker", "p1", ["a.yaml", "b.yaml"], "down", "-v") == [
        "docker", "compose", "--project-name", "p1", "--file", "a.yaml", "--file", "b.yaml", "down", "-v"]


def test_the_subprocess_runner_reports_exit_codes_output_and_timeouts() -> None:
    runner = SubprocessRunner()
    done = runner.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); "
                                             "sys.exit(3)"], timeout_s=30)
    assert (done.returncode, done.stdout.strip(), done.stderr.strip()) == (3, "out", "err")
    assert done.output == "out\n\nerr"
    slow = runner.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert slow.returncode == 124
    assert "timed out after" in slow.stderr
    with pytest.raises(FileNotFoundError):
        runner.run(["/nonexistent/docker", "version"], timeout_s=5)


@pytest.mark.parametrize(("text", "env", "expected"), [
    ("${A:-1}", {}, "1"),
    ("${A:-1}", {"A": ""}, "1"),
    ("${A-1}", {"A": ""}, ""),
    ("${A-1}", {}, "1"),
    ("${A}", {"A": "x"}, "x"),
    ("$A/b", {"A": "x"}, "x/b"),
    ("${MISSING}", {}, ""),
    ("$$HOME", {"HOME": "/root"}, "$HOME"),
    ("127.0.0.1:${P:-16650}:16650", {"P": "40001"}, "127.0.0.1:40001:16650"),
    ("${NET:-10.213}.10.10", {}, "10.213.10.10"),
])
def test_interpolation_follows_compose(text: str, env: dict[str, str], expected: str) -> None:
    assert interpolate(text, env) == expected


def test_required_variables_fail_with_their_message() -> None:
    with pytest.raises(ComposeFileError, match="variable IMAGE is required: set IMAGE"):
        interpolate("${IMAGE:?set IMAGE}", {})
    assert interpolate("${IMAGE:?set IMAGE}", {"IMAGE": "x"}) == "x"


@pytest.mark.parametrize(("entry", "ip", "host", "container", "variable"), [
    ("127.0.0.1:${P:-18080}:8080", "127.0.0.1", "${P:-18080}", 8080, "P"),
    ("127.0.0.1:18080:8080/tcp", "127.0.0.1", "18080", 8080, None),
    ("18080:8080", None, "18080", 8080, None),
    ("8080", None, None, 8080, None),
    ({"target": 8080, "published": "${P:-1}", "host_ip": "127.0.0.1"}, "127.0.0.1", "${P:-1}", 8080, "P"),
])
def test_ports_parse_in_every_form(entry: object, ip: str | None, host: str | None, container: int,
                                   variable: str | None) -> None:
    binding = parse_port(entry)
    assert (binding.host_ip, binding.host_port, binding.container_port, binding.variable) == \
        (ip, host, container, variable)


def test_variable_defaults_are_read() -> None:
    assert variable_default("${TXNBENCH_PROXY_API_PORT:-18474}") == ("TXNBENCH_PROXY_API_PORT", "18474")
    assert variable_default("18474") is None
