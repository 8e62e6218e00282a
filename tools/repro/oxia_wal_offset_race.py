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

The reproduction itself is `targets.pulsar.oxia_race` (so `txnbench finding
oxia-v0.14.0-wal-offset-race` runs it too); this is its command line. `reproduce` returns what
happened; tests/cluster/test_real_oxia_wal_race.py holds the
target's environment to "none within 20 s" (rarer, not never: the finding) and the default one to the fixed behaviour (a strict
expected failure, so the day a fixed Oxia is pinned the test says so).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from targets.pulsar.oxia_race import WAL_ERROR, Observation, reproduce

__all__ = ["WAL_ERROR", "Observation", "main", "reproduce"]


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
