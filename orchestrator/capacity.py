"""How much load the harness itself can generate, measured once per host and load shape (bench, sweep)."""

from __future__ import annotations

from harness.config import RunConfig
from harness.txn_paths import TxnPath
from orchestrator.outcome import say


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
            result = measure(shaped)
        except Exception as err:   # the benchmark still runs; the report says capacity is absent
            say(f"could not measure the load generator's capacity: {err}")
            continue
        save_capacity(shaped, result)
        say(f"load generator capacity: {result['committed_txn_per_s']:.0f} txn/s, "
             f"{result['msgs_per_s']:.0f} msgs/s at {result.get('cpu_percent')}% of a core")
