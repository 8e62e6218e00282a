"""Reading a process's /proc/<pid>/stat (Linux, proc(5)): one parser for the launcher, the fork
server and its client, because the command name in parentheses may hold spaces and brackets."""

from __future__ import annotations

from pathlib import Path


def stat_fields_of(stat: str) -> list[str]:
    """The fields after the command name: element 0 is field 3 (the state), field N is element N - 3."""
    return stat[stat.rfind(")") + 2:].split()


def stat_fields(pid: int | str) -> list[str] | None:
    """`stat_fields_of` of process `pid` ("self" for this one); None when it is gone or not readable."""
    try:
        return stat_fields_of(Path(f"/proc/{pid}/stat").read_text())
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
