"""`txnbench releases [--check] [VERSION ...]`: the Apache Pulsar releases of the pulsar target.

Without `--check` it only reads: the table of `targets/pulsar/versions.py` beside what earlier
checks saw here (`targets/pulsar/release_check.py`). With `--check` it resolves and starts each
release named (default: all) on each path it has, one cluster at a time, prints progress on
stderr, records each outcome as it comes, then prints the listing. Exit status: 0 when every
release checked behaved as the table records, 1 when one did not (the lines say how: update
the table), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from harness.errors import ConfigError
from harness.txn_paths import TxnPath


def main_releases(args: argparse.Namespace) -> int:
    from targets.pulsar import release_check
    from targets.pulsar.versions import listed

    try:
        chosen = [listed(v) for v in args.versions]
    except ValueError as err:
        raise ConfigError("releases", " ".join(args.versions), str(err)) from None
    if args.paths and not args.check:
        raise ConfigError("--paths", " ".join(args.paths), "only --check starts clusters",
                          "add --check, or drop --paths")
    cache = release_check.cache_path()
    differ: list[str] = []
    if args.check:
        def say(text: str) -> None:
            print(text, file=sys.stderr, flush=True)

        paths = [TxnPath(p) for p in args.paths] if args.paths else None
        releases = chosen or list(release_check.RELEASES.values())
        for number, release in enumerate(releases, start=1):
            say(f"[{number}/{len(releases)}] Pulsar {release.version}: resolving its jars")
            seen = release_check.check_release(release, paths, say=say)
            release_check.save_seen(cache, seen)
            differ += [f"{release.version}: {d}" for d in release_check.differences(seen, release)]
    table = release_check.rows(release_check.load_seen(cache), [r.version for r in chosen] or None)
    if args.json:
        print(json.dumps(release_check.to_json(table), indent=2))
    else:
        print(release_check.render(table, cache))
    if differ:
        print("\ndiffers from targets/pulsar/versions.py (update its table):", file=sys.stderr)
        for line in differ:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0
