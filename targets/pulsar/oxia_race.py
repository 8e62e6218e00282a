"""Oxia v0.14.0's WAL offset race, reproduced without Pulsar: concurrent writers break a fresh
`oxia standalone`'s write-ahead log (docs/findings/oxia-v0.14.0-wal-offset-race.md).

`oxia standalone` v0.14.0 takes each write's WAL offset under its leader lock and appends
the entry after releasing it (`leaderController.write`); two writes whose appends swap
order fail the later offset ("N+1 can not immediately follow N-1"), the offset counter is
not rolled back, and every later write fails the same way until the server restarts.
Several `oxia.Client`s writing at once (each its own stream, as Pulsar's brokers, bookie and
set-up are) show it within seconds on two cores.

Why it is in the target and not only in tools/: `txnbench finding oxia-v0.14.0-wal-offset-race`
(`targets/pulsar/tool_finding.py`) runs it, and the orchestrator may not import a tool;
`tools/repro/oxia_wal_offset_race.py` is its command line. `reproduce` returns what happened,
`judge_try` turns it into the finding's `try` line (the JSON a Java reproduction prints).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import oxia

from targets.pulsar.servers import OxiaStandalone

#: What the server logs, and the client is told, when the race has hit.
WAL_ERROR = "can not immediately follow"
KEYS_PER_WRITER = 50


@dataclass(frozen=True)
class Observation:
    writers: int
    seconds: float                # how long the writers ran
    puts: int                     # puts acknowledged
    client_error: str | None      # the first failed put's status and message
    wal_errors: int               # server log lines with WAL_ERROR

    @property
    def broken(self) -> bool:
        return self.client_error is not None or self.wal_errors > 0


def _close_bounded(client: oxia.Client) -> None:
    closer = threading.Thread(target=client.close, daemon=True)   # oxia 0.2.1's close can hang
    closer.start()
    closer.join(5)


def reproduce(directory: Path, *, writers: int = 8, seconds: float = 30.0,
              env: Mapping[str, str] | None = None) -> Observation:
    """A fresh Oxia in `directory` (`env`: None is the pulsar target's, {} Oxia's defaults);
    `writers` clients put until `seconds` pass or the first put fails. The server is stopped
    (by its pid) before this returns."""
    server = OxiaStandalone(directory, env=env)
    server.start()
    puts = [0] * writers
    errors: list[str] = []
    started = time.monotonic()
    deadline = started + seconds

    def write(i: int) -> None:
        client = oxia.Client(server.oxia_address)
        try:
            n = 0
            while time.monotonic() < deadline and not errors:   # bounded by the deadline
                try:
                    client.put(f"/race/{i}/{n % KEYS_PER_WRITER}", "x")
                except grpc.RpcError as err:
                    errors.append(f"{err.code().name}: {err.details()}")
                    return
                puts[i] += 1
                n += 1
        finally:
            _close_bounded(client)

    threads = [threading.Thread(target=write, args=(i,), daemon=True) for i in range(writers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 60)
        ran = time.monotonic() - started
    finally:
        server.stop()
    log = server.log_path.read_text(errors="replace")
    return Observation(writers, ran, sum(puts), errors[0] if errors else None,
                       sum(1 for line in log.splitlines() if WAL_ERROR in line))


def judge_try(n: int, seen: Observation) -> dict[str, Any]:
    """One try as the finding's `try` line: the bug shows when a put failed with the WAL's
    offset error or Oxia logged it; a put that failed otherwise is not this bug (`shows` None:
    the try is unjudged and the finding could not run)."""
    wal_client_error = seen.client_error is not None and WAL_ERROR in seen.client_error
    shows: bool | None = wal_client_error or seen.wal_errors > 0
    if seen.client_error is not None and not shows:
        shows = None
    what = (f"{seen.puts} puts acknowledged in {seen.seconds:.1f} s by {seen.writers} writers, "
            f"{seen.wal_errors} WAL offset errors in Oxia's log")
    summary = f"{what}; {'a put failed (below)' if seen.client_error is not None else 'no put failed'}"
    return {"kind": "try", "n": n, "shows": shows, "summary": summary,
            "examples": [seen.client_error] if seen.client_error else [],
            "puts": seen.puts, "seconds": round(seen.seconds, 2), "wal_errors": seen.wal_errors}
