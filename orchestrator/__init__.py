"""The top of txnbench: the `txnbench` command and what it orchestrates.

`cli` parses the command line; `scenario` validates a scenario and plans its faults once; `run`
walks one run's phases (`outcome`: how it ends; `load`: the set-up and the drain around the load
process); `matrix` runs bench, chaos and sweep over paths (`capacity`: the load generator's own
ceiling); `selftest` runs the planted bugs; `cluster_cli` is `txnbench cluster`.
This package imports the others (harness, workloads, faults, analysis); nothing imports it.
"""
