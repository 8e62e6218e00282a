"""Wake the moment a file is created in one of some directories (inotify; polling without it).

Why. A store opens a new log file at a roll, and at its first write after every restart: it
creates the file, writes its header, fsyncs the file and the directory, and only then records
the file durable (its fsync mark). That window lasts a fraction of a millisecond (about 0.2 ms
on this machine's disk), and a power loss inside it leaves a file whose header is torn or
missing: the case the ledger store's recovery removes ("its header was torn in a crash").
The crash fault's usual aim, polling for unsynced bytes every half millisecond, wakes too late
for it: three `make chaos` runs of 2026-11-27/28 crashed the ledger store at its first write
after a restart and each time met the file after its header was durable. Linux's inotify
wakes the watcher as the file is created, so the crash (`aim: crash-loop`, faults/README.md)
kills the store inside the window.

Elsewhere (no inotify) the watch polls the directories' listings; the crash is then as
likely to miss the window as the write aim.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType

IN_CREATE = 0x00000100
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")   # struct inotify_event: wd, mask, cookie, len (then the name)
_READ_BYTES = 64 * 1024
POLL_S = 0.0005


def parse_events(data: bytes) -> list[tuple[int, int, str]]:
    """(watch descriptor, mask, name) of each event in one read of an inotify descriptor."""
    out = []
    offset = 0
    while offset + _EVENT.size <= len(data):
        wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
        start = offset + _EVENT.size
        name = data[start:start + length].split(b"\0", 1)[0].decode(errors="replace")
        out.append((wd, mask, name))
        offset = start + length
    return out


#: the interpreter's thread switch interval while a watch waits: the watching thread must get the GIL
#: within the window it watches for (Python's default of 5 ms is twenty such windows)
QUICK_SWITCH_S = 0.0001


@contextlib.contextmanager
def quick_thread_switches() -> Iterator[None]:
    """Let a thread woken by the watch run at once, whatever other threads of this process do."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(QUICK_SWITCH_S)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)   # this process's symbols, libc's among them
        libc.inotify_init1  # noqa: B018 -- raises AttributeError where there is no inotify
    except (OSError, AttributeError):
        return None
    return libc


class FileBirthWatch:
    """Names of files created in `directories` that `accept` takes, from when it is made on.

    A context manager: it holds an inotify descriptor (or a listing to compare against)."""

    def __init__(self, directories: Iterable[Path], accept: Callable[[Path, str], bool]) -> None:
        self.directories = [Path(d) for d in directories]
        self.accept = accept
        self._fd: int | None = None
        self._dir_of: dict[int, Path] = {}
        self._seen: dict[Path, set[str]] = {}
        libc = _libc()
        if libc is not None:
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                for directory in self.directories:
                    wd = libc.inotify_add_watch(fd, os.fsencode(directory), IN_CREATE)
                    if wd >= 0:
                        self._dir_of[wd] = directory
        if self._fd is None or len(self._dir_of) < len(self.directories):
            self.close()
            self._seen = {d: set(_listing(d)) for d in self.directories}

    @property
    def uses_inotify(self) -> bool:
        return self._fd is not None

    def wait(self, timeout_s: float) -> tuple[Path, str] | None:
        """The first accepted file created before `timeout_s` passes (its directory and name), or None."""
        deadline = time.monotonic() + timeout_s
        for _ in range(int(timeout_s / POLL_S) + 2):   # bounded: each round waits or polls
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            found = self._inotify_round(left) if self._fd is not None else self._polling_round()
            if found is not None:
                return found
        return None

    def _inotify_round(self, left_s: float) -> tuple[Path, str] | None:
        assert self._fd is not None
        ready, _, _ = select.select([self._fd], [], [], left_s)
        if not ready:
            return None
        with contextlib.suppress(BlockingIOError):
            for wd, _mask, name in parse_events(os.read(self._fd, _READ_BYTES)):
                directory = self._dir_of.get(wd)
                if directory is not None and self.accept(directory, name):
                    return directory, name
        return None

    def _polling_round(self) -> tuple[Path, str] | None:
        for directory, seen in self._seen.items():
            for name in sorted(set(_listing(directory)) - seen):
                seen.add(name)
                if self.accept(directory, name):
                    return directory, name
        time.sleep(POLL_S)
        return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._dir_of.clear()

    def __enter__(self) -> FileBirthWatch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _listing(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []
