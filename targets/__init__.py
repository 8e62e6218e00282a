"""The targets: how a cluster under test starts, stops, and which faults it supports.

Why a package of its own above the products: a target starts the system under test.
The embedded target runs our reference cluster (`embedded`) and the fault proxy
(`faultproxy`) as processes, so it sits above both and imports the modules it starts
(the `python -m` names come from them, `harness.entrypoints`); the orchestrator, above
it, picks one per run. What a target gives a run is the protocol in `harness.target`
(`ClusterTarget`, `ClusterInfo`, `ProcessControl`), which the products below use without
knowing which target is behind it.

* `embedded`: our reference cluster as local processes (`processes`: the one service
  launcher; `zookeeper`, `zk_watchdog`: a real ZooKeeper as the v4 paths' store);
* `compose`: Apache Pulsar in Docker Compose, with Toxiproxy on every link;
* `external`: a cluster someone else runs, with the faults it allows.
"""
