"""The arguments of `txnbench worker`, in one place for its two readers.

`txnbench worker` (orchestrator.cli) parses them for `--help` and errors, then re-executes
`python -m workloads.worker_host` with them: the host patches the standard library for
gevent, so it must be its own process image and parses them again. This module is
argparse only, so the command line imports it without loading Locust or gevent.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", required=True, help="the run's Locust master, HOST:PORT "
                        "(its scenario's load.master_bind and load.master_port)")
    parser.add_argument("--processes", type=int, default=1, help="Locust worker processes to run here (default 1)")
    parser.add_argument("--dir", type=Path, default=Path("txnbench-worker"),
                        help="this host's working folder: each worker's spec, history and log")
    parser.add_argument("--wait", type=float, default=300.0,
                        help="seconds to wait for the master to answer (default 300)")
    parser.add_argument("--scenario", default=None,
                        help="refuse to join unless the master runs this scenario with the same workload")
