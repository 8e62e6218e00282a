"""How much load the harness itself can generate, measured once per host and load shape (bench, sweep).

`python -m orchestrator.capacity SCENARIO [--path P] [--users N] [--seconds S]` measures one
shape by hand (workloads/capacity.py says how). Why here and not in `workloads`: the
measurement starts the reference cluster's null broker (`embedded.nullbroker`), and only a
package above both the load and the cluster may import the two.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from harness.config import RunConfig, load_scenario
from harness.entrypoints import python_m
from harness.txn_paths import TxnPath
from orchestrator.outcome import say


def null_broker_command() -> list[str]:
    """`python -m embedded.nullbroker --port 0`: it answers every request at once and prints `READY <port>`."""
    import embedded.nullbroker

    return python_m(embedded.nullbroker, "--port", "0")


def ensure_capacity(config: RunConfig) -> None:
    """Measure, once per host and load shape, how much load the harness itself can generate.

    The load process of each run copies the figure into its status file, and the
    report puts it next to the measured throughput: a reader can see whether the
    harness, not the cluster, was the bottleneck. Cached in .txnbench/capacity.json.
    """
    from workloads.capacity import find_capacity, measure, save_capacity

    seen: set[str] = set()
    for txn_path in config.paths:
        shaped = config.for_path(txn_path)
        client = "v5" if txn_path is TxnPath.V5 else "v4"
        if client in seen or find_capacity(shaped) is not None:
            seen.add(client)
            continue
        seen.add(client)
        say(f"measuring the load generator's capacity against a null broker ({client} client, "
             f"{shaped.load.users} users; once per host and load shape, about 15 s)")
        try:
            result = measure(shaped, null_broker_command())
        except Exception as err:   # the benchmark still runs; the report says capacity is absent
            say(f"could not measure the load generator's capacity: {err}")
            continue
        save_capacity(shaped, result)
        say(f"load generator capacity: {result['committed_txn_per_s']:.0f} txn/s, "
             f"{result['msgs_per_s']:.0f} msgs/s at {result.get('cpu_percent')}% of a core")


def main(argv: list[str] | None = None) -> int:
    """Measure one shape against the null broker, print it, and save it unless `--no-save`."""
    from workloads.capacity import measure, save_capacity, shape_of

    parser = argparse.ArgumentParser(prog="python -m orchestrator.capacity",
                                     description="The load generator's capacity against a null broker.")
    parser.add_argument("scenario", nargs="?", default="atomic-produce")
    parser.add_argument("--path", choices=[p.value for p in TxnPath], default=None, dest="txn_path")
    parser.add_argument("--users", type=int, default=None)
    parser.add_argument("--workers", type=int, default=None, help="Locust worker processes (load.workers)")
    parser.add_argument("--remote-workers", type=int, default=None,
                        help="measure through N remote workers (one `txnbench worker --processes N` on 127.0.0.1)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-save", action="store_true", help="print only; do not update the capacity file")
    args = parser.parse_args(argv)
    config = load_scenario(args.scenario)
    if args.txn_path:
        config = config.for_path(TxnPath(args.txn_path))
    if args.users:
        config = dataclasses.replace(config, load=dataclasses.replace(config.load, users=args.users))
    if args.workers is not None:
        config = dataclasses.replace(config, load=dataclasses.replace(config.load, workers=args.workers))
    if args.remote_workers is not None:
        config = dataclasses.replace(config, load=dataclasses.replace(config.load, remote_workers=args.remote_workers))
    result = measure(config, null_broker_command(), seconds=args.seconds)
    print(json.dumps({"shape": shape_of(config), "result": result}, indent=2))
    if not args.no_save and not config.load.remote_workers:   # the cache is for local load processes
        print(f"saved to {save_capacity(config, result)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
