"""txnbench: benchmark and chaos-test Apache Pulsar transactions.

The `harness` package is the core every other package plugs into: scenario
configuration, the run orchestrator, results, the history contract, the sans-IO
wire protocol, the transactional client and the protocols of the targets a run can
drive (`harness.target`; the targets themselves are the top-level `targets` package).
"""

__version__ = "0.1.0"
