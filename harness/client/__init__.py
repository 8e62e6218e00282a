"""The harness's transactional Pulsar client (v4 PIP-31 and v5 PIP-473) and admin REST client.

Blocking API over plain sockets and `threading` (one reader thread per broker
connection), so it runs in threads and, after gevent's monkey-patching, in greenlets.
Built on the sans-IO protocol in `harness.wire`.

    from harness.client import PulsarClient

    with PulsarClient("pulsar://127.0.0.1:6650", txn_path="v5") as client:
        producer = client.create_producer("topic://public/default/orders")
        consumer = client.subscribe("topic://public/default/orders", "audit", sub_type="Shared")
        txn = client.new_transaction(timeout_s=30)
        receipt = producer.send(b'{"v": "a1", "i": [], "p": ""}', key="k1", txn=txn)
        txn.commit()
        message = consumer.receive(timeout_s=5)
        consumer.acknowledge(message)

Every operation raises a subclass of `harness.errors.DefiniteError` (certainly no
effect) or `IndeterminateError` (maybe an effect); `harness.client.errors` documents
which failure is which and why. The admin REST client is `harness.client.admin.AdminClient`
(imported on demand: it pulls in `requests`).

Modules: `config` (settings), `topics`/`hashing` (names, routing), `connection`
(sockets, pool), `lookup`, `handler` (reconnection), `producer`, `consumer`,
`reader`, `scalable` (v5 segments), `coordinator`/`transaction` (transactions),
`errors`, `admin`. Its benchmark is `python -m tools.bench.client`.
"""

from harness.client.client import PulsarClient
from harness.client.config import BatchingConfig
from harness.client.consumer import Consumer
from harness.client.errors import (
    ConnectionLostError,
    CoordinatorNotEnabledError,
    FeatureNotSupportedError,
    InvalidStateError,
    NotReadyError,
    OperationTimeoutError,
    ServerFailedError,
    TopicTerminatedError,
    TransactionConflictError,
    TransactionOpFailedError,
    TransactionOutcomeUnknownError,
)
from harness.client.producer import Producer
from harness.client.reader import (
    LastMessageIdFailedError,
    LastMessageIdLostError,
    LastMessageIdUnansweredError,
    ReadIncompleteError,
)
from harness.client.transaction import Transaction, TxnState
from harness.wire import MessageId, SubType

__all__ = [
    "BatchingConfig",
    "ConnectionLostError",
    "Consumer",
    "CoordinatorNotEnabledError",
    "FeatureNotSupportedError",
    "InvalidStateError",
    "LastMessageIdFailedError",
    "LastMessageIdLostError",
    "LastMessageIdUnansweredError",
    "MessageId",
    "NotReadyError",
    "OperationTimeoutError",
    "Producer",
    "PulsarClient",
    "ReadIncompleteError",
    "ServerFailedError",
    "SubType",
    "TopicTerminatedError",
    "Transaction",
    "TransactionConflictError",
    "TransactionOpFailedError",
    "TransactionOutcomeUnknownError",
    "TxnState",
]
