"""The Go servers' build (targets/gobuild.py): pins, argv, errors, the reuse of a built binary.

Nothing is built here; `make test-pulsar` builds and runs them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from targets import gobuild


def test_pins_are_exact_versions_with_versioned_binaries(tmp_path: Path) -> None:
    for tool in gobuild.TOOLS.values():
        assert tool.version.startswith("v") and tool.version.count(".") == 2
        assert gobuild.binary_path(tool, tmp_path) == tmp_path / f"{tool.name}-{tool.version}"
    assert gobuild.OXIA.coordinate == "github.com/oxia-db/oxia@v0.14.0"
    assert gobuild.TOXIPROXY.coordinate == "github.com/Shopify/toxiproxy/v2@v2.5.0"


def test_bin_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(gobuild.BIN_ENV, str(tmp_path / "bin"))
    assert gobuild.bin_dir() == (tmp_path / "bin").resolve()
    monkeypatch.delenv(gobuild.BIN_ENV)
    assert gobuild.bin_dir() == Path(".txnbench/bin").resolve()


@pytest.mark.parametrize(("text", "version"), [
    ("go version go1.26.8 linux/amd64", (1, 26)), ("go version go1.17 darwin/arm64", (1, 17)),
    ("go version devel +abc", None), ("", None)])
def test_go_version_is_parsed(text: str, version: tuple[int, int] | None) -> None:
    assert gobuild.go_version(text) == version


def test_build_argv_builds_the_command_package_read_only(tmp_path: Path) -> None:
    argv = gobuild.build_argv("/usr/bin/go", gobuild.OXIA, tmp_path / "oxia")
    assert argv[:2] == ["/usr/bin/go", "build"] and "-mod=readonly" in argv
    assert argv[-1] == "./cmd" and argv[argv.index("-o") + 1] == str(tmp_path / "oxia")


def test_build_env_turns_workspaces_off_and_drops_a_mod_flag() -> None:
    env = gobuild.build_env({"GOFLAGS": "-mod=vendor -buildvcs=false", "PATH": "/bin"})
    assert env["GOWORK"] == "off" and env["GO111MODULE"] == "on"
    assert env["GOFLAGS"] == "-buildvcs=false" and env["PATH"] == "/bin"


def test_download_json_gives_the_folder_or_go_error() -> None:
    assert gobuild.download_dir(json.dumps({"Path": "m", "Version": "v1", "Dir": "/x/m@v1"})) == Path("/x/m@v1")
    with pytest.raises(EnvironmentProblem, match="403 Forbidden"):
        gobuild.download_dir(json.dumps({"Path": "m", "Version": "v1", "Error": "reading ...: 403 Forbidden"}))
    with pytest.raises(EnvironmentProblem, match="no JSON"):
        gobuild.download_dir("go: something else")


def test_a_missing_go_is_named_with_its_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match=r"`go` is not on PATH; install Go 1\.24\+"):
        gobuild.ensure_binary(gobuild.OXIA, say=lambda _: None, root=tmp_path)


def test_too_old_a_go_is_refused() -> None:
    text = gobuild.go_too_old_message(gobuild.OXIA, (1, 21), "/usr/bin/go")
    assert "needs Go 1.24+" in text and "Go 1.21" in text


def test_a_built_binary_is_reused_without_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    built = gobuild.binary_path(gobuild.TOXIPROXY, tmp_path)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert gobuild.ensure_binary(gobuild.TOXIPROXY, say=lambda _: None, root=tmp_path) == built
