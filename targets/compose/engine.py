"""The `docker` command line: finding it, checking the engine, running `docker compose`.

Each check turns a missing piece into an `EnvironmentProblem` that names it and the
fix, because "the compose target failed" is useless on a CI runner at 3 a.m. The
command runner is a Protocol so tests can replace the real subprocess.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.errors import EnvironmentProblem

INSTALL_HINT = ("install Docker Engine 24+ with the Compose v2 plugin "
                "(https://docs.docker.com/engine/install/), or run on the embedded target (--target embedded)")


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()

    def tail(self, lines: int = 25) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


class CommandRunner(Protocol):
    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            timeout_s: float = 60.0) -> CommandResult:
        """Run argv to completion; raise FileNotFoundError when the program is missing."""


class SubprocessRunner:
    """Runs commands for real; a timeout kills the command and reports it as exit code 124."""

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            timeout_s: float = 60.0) -> CommandResult:
        try:
            done = subprocess.run(list(argv), env=dict(env) if env is not None else None, capture_output=True,
                                  text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as err:
            out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
            errout = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
            return CommandResult(tuple(argv), 124, out, errout + f"\n(timed out after {timeout_s:.0f}s)")
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class DockerVersions:
    engine: str
    compose: str


def _major_minor(text: str) -> tuple[int, int]:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def check_docker(runner: CommandRunner, docker: str = "docker",
                 env: Mapping[str, str] | None = None) -> DockerVersions:
    """The engine and Compose versions, or an EnvironmentProblem that says what is missing."""
    if os.sep not in docker and shutil.which(docker, path=(env or os.environ).get("PATH")) is None:
        raise EnvironmentProblem(f"the compose target needs the Docker CLI, and `{docker}` is not on PATH; "
                                 + INSTALL_HINT)
    try:
        compose = runner.run([docker, "compose", "version", "--short"], env=env, timeout_s=30)
    except FileNotFoundError:
        raise EnvironmentProblem(f"the compose target needs the Docker CLI, and `{docker}` cannot be run; "
                                 + INSTALL_HINT) from None
    if compose.returncode != 0:
        raise EnvironmentProblem(f"Docker Compose v2 is missing (`{docker} compose version` failed: "
                                 f"{compose.tail(3) or 'no output'}); install the docker-compose-plugin "
                                 "package (Compose v2, not the old docker-compose 1.x), or run with "
                                 "--target embedded")
    compose_version = compose.stdout.strip().lstrip("v")
    if _major_minor(compose_version) < (2, 20):
        raise EnvironmentProblem(f"Docker Compose {compose_version} is too old; the compose files need "
                                 "Compose 2.20 or newer (`docker compose version`); upgrade the plugin")
    engine = runner.run([docker, "version", "--format", "{{.Server.Version}}"], env=env, timeout_s=30)
    if engine.returncode != 0 or not engine.stdout.strip():
        raise EnvironmentProblem(
            "the Docker engine is not reachable (`docker version` failed: "
            f"{engine.tail(3) or 'no output'}); start it (e.g. `sudo systemctl start docker` or Docker "
            "Desktop), check DOCKER_HOST, and check that your user may use the Docker socket "
            "(e.g. membership of the `docker` group)")
    engine_version = engine.stdout.strip()
    if _major_minor(engine_version) < (20, 10):
        raise EnvironmentProblem(f"Docker Engine {engine_version} is too old; the compose target is "
                                 "written for Docker Engine 24+; upgrade Docker")
    return DockerVersions(engine=engine_version, compose=compose_version)


def compose_argv(docker: str, project: str, files: Sequence[str], *args: str) -> list[str]:
    argv = [docker, "compose", "--project-name", project]
    for file in files:
        argv += ["--file", file]
    return argv + list(args)
