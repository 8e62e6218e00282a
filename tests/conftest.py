"""Shared fixtures and the skip rules for markers that need things CI may lack."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def _docker_engine_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(item.get_closest_marker("docker") for item in items) and not _docker_engine_available():
        skip = pytest.mark.skip(reason="no Docker engine on this machine (docker info failed)")
        for item in items:
            if item.get_closest_marker("docker"):
                item.add_marker(skip)
