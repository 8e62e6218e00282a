"""One builder at a time for a cached artifact (Maven jars, the compiled Java check).

Two txnbench processes may want the same cache entry at once (`make test` beside `make
test-pulsar`, two pytest workers): both saw no stamp, both deleted the folder and rebuilt it
into the same place, and one ran the other's half-written classes (CI, 2026-11-27:
`NoClassDefFoundError: Report$StepFailed`). The builder holds an advisory lock on a file
beside the entry; the other waits, then finds the stamp and reuses the entry.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import EnvironmentProblem

POLL_S = 0.5


@contextmanager
def building(lock_file: Path, what: str, say: Callable[[str], None], wait_s: float) -> Iterator[None]:
    """Holds `lock_file` exclusively while the caller builds `what`; waits at most `wait_s` for
    another process's build (saying so once), then fails naming the lock."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        deadline = time.monotonic() + wait_s
        said = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said:
                    say(f"waiting for another txnbench process that is building {what} (lock: {lock_file})")
                    said = True
                if time.monotonic() >= deadline:
                    raise EnvironmentProblem(
                        f"another process held {lock_file} for more than {wait_s:.0f} s while building {what}; "
                        f"if none is running (`fuser {lock_file}`), run again") from None
                time.sleep(POLL_S)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
