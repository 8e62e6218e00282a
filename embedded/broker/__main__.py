"""`python -m embedded.broker --config conf/broker-<i>.json`: one broker process.

The composition root: it imports the transaction paths and hands the broker which modules
each path installs, so the tie is an import the contracts see (the broker core and its
registry never import a path).
"""

import functools

import embedded.broker.v4
import embedded.broker.v5
from embedded.broker.broker import BrokerService
from embedded.broker.txn_registry import TxnPaths
from harness.service import run_service

#: v4 and v4-batched are one path with other settings; v5 keeps v4 for `persistent://` topics
#: and v4 clients, as Pulsar 5.0's dispatching providers do
TXN_PATHS: TxnPaths = {
    "v4": (embedded.broker.v4,),
    "v4-batched": (embedded.broker.v4,),
    "v5": (embedded.broker.v4, embedded.broker.v5),
}

if __name__ == "__main__":
    run_service(functools.partial(BrokerService, txn_paths=TXN_PATHS))
