"""The watch for newly created files (targets/file_births.py) that aims a crash at a log roll, and
the test of which new files are log files the fsync mark does not cover (targets/power_loss.py).
Real directories and a thread that creates files; no processes, no sockets."""

from __future__ import annotations

import struct
import sys
import threading
import time
from pathlib import Path

import pytest

import targets.file_births as file_births
from harness.sync_mark import Mark
from targets.file_births import IN_CREATE, FileBirthWatch, parse_events
from targets.power_loss import is_new_log_file

SEG = "segment-000000000002.log"
NEXT = "segment-000000000003.log"


def _event(wd: int, name: str, pad_to: int = 16) -> bytes:
    raw = name.encode() + b"\0"
    raw += b"\0" * (-len(raw) % pad_to)
    return struct.pack("iIII", wd, IN_CREATE, 0, len(raw)) + raw


def test_events_are_parsed_with_their_padded_names() -> None:
    data = _event(1, NEXT) + _event(2, "LOCK")
    assert parse_events(data) == [(1, IN_CREATE, NEXT), (2, IN_CREATE, "LOCK")]
    assert parse_events(b"") == []


def test_a_new_log_file_is_one_named_after_the_mark() -> None:
    assert not is_new_log_file(None, NEXT)                # no mark: nothing is durable, nothing to aim at
    mark = Mark(SEG, 4096)
    assert is_new_log_file(mark, NEXT)
    assert not is_new_log_file(mark, SEG)                 # the marked file itself was not just created
    assert not is_new_log_file(mark, "segment-000000000001.log")
    assert not is_new_log_file(mark, "LOCK")
    assert not is_new_log_file(mark, "snapshot-000000000003.tmp")


def test_thread_switches_are_quick_only_while_watching() -> None:
    before = sys.getswitchinterval()
    with file_births.quick_thread_switches():
        assert sys.getswitchinterval() == pytest.approx(file_births.QUICK_SWITCH_S)
    assert sys.getswitchinterval() == before


@pytest.fixture(params=["inotify", "polling"])
def watch_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "polling":
        monkeypatch.setattr(file_births, "_libc", lambda: None)
    return str(request.param)


def _create_later(directory: Path, names: list[str], delay_s: float) -> threading.Thread:
    def create() -> None:
        time.sleep(delay_s)
        for name in names:
            (directory / name).write_bytes(b"x")

    thread = threading.Thread(target=create, daemon=True)
    thread.start()
    return thread


def test_the_watch_wakes_at_the_first_accepted_file(tmp_path: Path, watch_kind: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "old.log").write_bytes(b"")                      # there before the watch: never reported
    with FileBirthWatch([a, b], lambda _d, name: name.endswith(".log")) as watch:
        assert watch.uses_inotify == (watch_kind == "inotify")
        creator = _create_later(b, ["LOCK", "new.log"], 0.05)
        started = time.monotonic()
        assert watch.wait(5.0) == (b, "new.log")
        assert time.monotonic() - started < 4.0
        creator.join(5)


def test_the_watch_gives_up_after_its_timeout(tmp_path: Path, watch_kind: str) -> None:
    with FileBirthWatch([tmp_path], lambda _d, name: name.endswith(".log")) as watch:
        creator = _create_later(tmp_path, ["LOCK"], 0.01)
        started = time.monotonic()
        assert watch.wait(0.3) is None
        assert 0.25 <= time.monotonic() - started < 3.0
        creator.join(5)
