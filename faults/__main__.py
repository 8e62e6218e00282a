"""`python -m faults SCENARIO [--path P] [--duration S]`: check a scenario's faults and print
the timeline each path would run (windows, targets as written, and why any fault moved or
was left out), without starting anything."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from faults.schedule import describe
from faults.validate import check_scenario
from harness.config import load_scenario, resolve_scenario
from harness.errors import TxnbenchError
from harness.txn_paths import TxnPath


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m faults", description=__doc__)
    parser.add_argument("scenario", help="scenario name (scenarios/<name>.yaml) or file")
    parser.add_argument("--path", choices=[p.value for p in TxnPath], dest="txn_path",
                        help="one path (default: the scenario's)")
    parser.add_argument("--duration", type=float, metavar="S", help="faults phase seconds (as --duration)")
    parser.add_argument("--seed", type=int, help="another seed (a generated schedule is drawn from it)")
    args = parser.parse_args(argv)
    try:
        config = load_scenario(args.scenario)
        if args.seed is not None:
            config = dataclasses.replace(config, seed=args.seed)
        if args.duration:
            config = config.with_duration(args.duration)
        if args.txn_path:
            txn_path = TxnPath(args.txn_path)
            config = dataclasses.replace(config, path=txn_path, paths=(txn_path,))
        timelines = check_scenario(config, source=str(resolve_scenario(args.scenario)))
    except TxnbenchError as err:
        print(f"txnbench: {err}", file=sys.stderr)
        return err.exit_code
    for txn_path, timeline in timelines.items():
        print(f"== {config.name} on {txn_path.value}: faults phase {timeline.duration_s:g}s, "
              f"quiet {timeline.quiet_s:g}s after each heal ==")
        for line in describe(timeline) or ["(no faults)"]:
            print(line)
        for note in timeline.notes:
            print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
