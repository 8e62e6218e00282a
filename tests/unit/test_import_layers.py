"""The import layers hold: the contracts in pyproject.toml's [tool.importlinter].

`make lint` runs `lint-imports` too; this test makes `make test` (and so CI) check the
same contracts, so a new import that crosses a layer fails where everyone looks. The
output names the contract and the chain of imports that breaks it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    status = lint_imports(no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert status == 0, out
    assert f"{len(contracts)} kept, 0 broken" in out, out
