"""The fork server's rules that need no process: which starts it serves, how a forked service
watches its owner, how an exit status and a command line are made, and that every service it may
fork imports without running."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from harness import fork_server
from harness.fork_client import Reports, forkable_env, interpreter_settings
from harness.fork_server import command_line_area, exit_code_of, title_bytes
from harness.service import watched_parent
from targets.embedded import MODULES
from targets.processes import forkable, module_argv

# ---- which starts the server serves ---------------------------------------------------------------

def test_a_service_command_is_forkable_and_one_under_coverage_is_not(tmp_path: Path) -> None:
    broker = next(iter(MODULES.values()))
    assert forkable(module_argv(broker, tmp_path / "c.json"))
    assert not forkable(module_argv(broker, tmp_path / "c.json", coverage_dir=tmp_path))
    assert not forkable([sys.executable, "-c", "pass"])
    assert not forkable(["/usr/bin/java", "-m", "x", "--config", "c.json"])


def test_a_child_needing_other_interpreter_settings_is_not_forked() -> None:
    server = {"PATH": "/bin", "PYTHONHASHSEED": "0", "PYTHONPYCACHEPREFIX": "/c"}
    assert forkable_env(server, {**server, "PATH": "/usr/bin", "PYTHONUNBUFFERED": "1", "OTHER": "x"})
    assert not forkable_env(server, {**server, "PYTHONHASHSEED": "1"})
    assert not forkable_env(server, {**server, "PYTHONPATH": "/elsewhere"})
    assert not forkable_env(server, {k: v for k, v in server.items() if k != "PYTHONPYCACHEPREFIX"})
    assert interpreter_settings({"PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "error"}) == {"PYTHONWARNINGS": "error"}


def _runs_on_import(module_file: Path) -> list[str]:
    """Top-level statements of a `__main__.py` that do more than import, define or assign."""
    inert = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
             ast.AnnAssign)
    found = []
    for node in ast.parse(module_file.read_text()).body:
        if isinstance(node, inert) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'",):
            continue
        found.append(ast.unparse(node).splitlines()[0])
    return found


@pytest.mark.parametrize("package", list(MODULES.values()), ids=lambda m: m.__name__)
def test_every_forkable_service_imports_without_running(package: object) -> None:
    """The server imports a service's `__main__` as a plain module before forking it: a statement
    outside the `__name__` guard would run in the server itself."""
    main = Path(package.__file__).with_name("__main__.py")   # type: ignore[attr-defined]
    assert main.exists()
    assert _runs_on_import(main) == []


def test_the_guard_check_sees_a_statement_that_would_run(tmp_path: Path) -> None:
    main = tmp_path / "__main__.py"
    main.write_text('"""doc"""\nimport sys\nX = 1\nprint("started")\nif __name__ == "__main__":\n    pass\n')
    assert _runs_on_import(main) == ["print('started')"]


# ---- a forked service watches its owner through the server -----------------------------------------

def test_a_forked_service_watches_the_server_in_place_of_its_owner() -> None:
    assert watched_parent(100, "100:200") == 200
    assert watched_parent(100, None) == 100
    assert watched_parent(100, "300:200") == 100        # configured for another owner: as configured
    assert watched_parent(100, "garbage") == 100


# ---- exit status and command line ------------------------------------------------------------------

def test_exit_codes_follow_the_interpreter(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code_of(SystemExit()) == 0
    assert exit_code_of(SystemExit(3)) == 3
    assert exit_code_of(SystemExit("faultproxy: bad config")) == 1
    assert "bad config" in capsys.readouterr().err


def test_the_command_line_area_is_read_from_proc_stat() -> None:
    fields = [str(i) for i in range(3, 53)]            # field N holds N
    assert command_line_area("1 (a name) " + " ".join(fields)) == (48, 49)
    assert command_line_area("1 (short) 3 4") is None
    assert command_line_area(Path("/proc/self/stat").read_text()) is not None


def test_a_title_is_laid_as_setproctitle_lays_it() -> None:
    laid = title_bytes("python -m embedded.broker --config c.json", 64)
    assert laid is not None and len(laid) == 64
    assert laid.split(b"\0", 1)[0] == b"python -m embedded.broker --config c.json"
    assert laid[-1:] != b"\0"                           # the kernel then reads up to the title's end
    assert title_bytes("x" * 63, 64) is None
    assert title_bytes("a\0b", 64) is None
    assert fork_server.TITLE_ROOM_BYTES >= 1024


# ---- what the server reports -----------------------------------------------------------------------

def test_an_exit_is_kept_for_its_pid_and_an_answer_for_its_request() -> None:
    reports = Reports()
    reports.record({"id": 1, "pid": 500})
    assert reports.answer(1, 0.0) == {"id": 1, "pid": 500}
    assert reports.answer(1, 0.0) is None                  # taken once
    assert reports.exit_code(500, 0.0) is None
    reports.record({"exited": 500, "code": -9})
    assert reports.exit_code(500, 0.0) == -9


def test_a_recycled_pid_does_not_inherit_its_earlier_holders_exit() -> None:
    reports = Reports()
    reports.record({"id": 1, "pid": 500})
    reports.record({"exited": 500, "code": 0})
    reports.record({"id": 2, "pid": 500})                  # a later child given the same pid
    assert reports.exit_code(500, 0.0) is None


def test_nobody_waits_once_the_server_has_said_its_last() -> None:
    reports = Reports()
    reports.close()
    assert reports.exit_code(500, None) is None and reports.answer(1, 60.0) is None
