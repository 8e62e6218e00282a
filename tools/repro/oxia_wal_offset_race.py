"""Smallest reproduction of docs/findings/oxia-v0.14.0-wal-offset-race.md: concurrent writers break
a real Oxia v0.14.0's write-ahead log, and how much rarer GOMAXPROCS=1 makes it.

`oxia standalone` v0.14.0 takes each write's WAL offset under its leader lock and appends
the entry after releasing it (`leaderController.write`); two writes whose appends swap
order fail the later offset ("N+1 can not immediately follow N-1"), the offset counter is
not rolled back, and every later write fails the same way until the server restarts.
Several `oxia.Client`s writing at once (each its own stream, as Pulsar's brokers, bookie and
set-up are) show it within seconds on two cores:

    python -m tools.repro.oxia_wal_offset_race --writers 8 --seconds 30            # as the pulsar target runs it
    python -m tools.repro.oxia_wal_offset_race --writers 8 --seconds 30 --all-cores  # Oxia's default

`reproduce` returns what happened; tests/cluster/test_real_oxia_wal_race.py holds the
target's environment to "none within 20 s" (rarer, not never: the finding) and the default one to the fixed behaviour (a strict
expected failure, so the day a fixed Oxia is pinned the test says so).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
import oxia

from tools.launch import RealOxiaProcess

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
    `writers` clients put until `seconds` pass or the first put fails."""
    server = RealOxiaProcess(directory, env=env)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--all-cores", action="store_true", help="Oxia's default GOMAXPROCS, not the target's 1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oxia-race-") as tmp:
        seen = reproduce(Path(tmp), writers=args.writers, seconds=args.seconds, env={} if args.all_cores else None)
    print(f"writers={seen.writers} ran={seen.seconds:.1f}s puts={seen.puts} wal_errors={seen.wal_errors} "
          f"first_error={seen.client_error}")
    return 1 if seen.broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
