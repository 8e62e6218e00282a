"""The orchestrator's side of the load: what runs in its process around the load process.

Before the load, `setup` creates the run's topics and subscriptions and waits until a transaction
commits; after it, `drain` makes the final reads (with `horizons` and `undeliverable`, what a read
that stops short of the end shows). They use the load's vocabulary (`workloads.topology`, `api`,
`payload`) but never its Locust users, which run in the load process under gevent.
"""
