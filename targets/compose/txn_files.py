"""Where the compose files live and which one each transaction path runs by default."""

from __future__ import annotations

from pathlib import Path

from harness.txn_paths import TxnPath

REPO_DIR = Path(__file__).resolve().parents[2]
COMPOSE_DIR = REPO_DIR / "compose"

DEFAULT_FILES: dict[TxnPath, str] = {
    TxnPath.V4: "v4.yaml",
    TxnPath.V4_BATCHED: "v4-batched.yaml",
    TxnPath.V5: "v5-oxia.yaml",
}


def default_compose_file(txn_path: TxnPath) -> Path:
    return COMPOSE_DIR / DEFAULT_FILES[txn_path]
