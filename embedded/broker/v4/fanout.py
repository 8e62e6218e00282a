"""Telling a transaction's participants the decision: END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION.

Theory of operation (Pulsar's TransactionBufferClient as TransactionMetadataStoreService
uses it). Every participant not yet done gets its request at once, in parallel, over
the broker's peer links (`peers.request_owner`: the topic's owner, in-process when
that is this broker), each bounded by `transactionBufferClientOperationTimeoutInMills`.
A participant that answers success is remembered as done, so a retry only asks the
others again. A participant whose topic does not exist has nothing to end (Pulsar
answers such requests with success).

Failures are classified as Pulsar's `isRetryableException` does: no answer (timeout,
connection), lookup failures, persistence and metadata errors are retryable, the
coordinator tries again later; anything else is not retried until the coordinator
recovers again. A terminated topic refuses the commit marker with PersistenceError,
which is retryable: the coordinator retries forever and the transaction never
completes. That is the v4 end-transaction stall PIP-473 exists to fix, reproduced on
purpose.

The error answered to the client's END_TXN is always one the client must treat as
"outcome unknown" (the decision is already logged and may still complete), never one
that proves the transaction did not commit.
"""

from __future__ import annotations

import asyncio
import logging

from embedded import planted_bugs
from embedded.broker.topic_name import InvalidTopicName, TopicName
from embedded.broker.txn_api import PeerApi, PeerUnavailable, TxnError
from embedded.broker.v4.coordinator_state import TxnMeta
from embedded.broker.v4.metrics import V4Metrics
from harness.wire import Command, ServerError, TxnAction, TxnId, commands

log = logging.getLogger(__name__)

RETRYABLE = frozenset({ServerError.PersistenceError, ServerError.ServiceNotReady, ServerError.MetadataError,
                       ServerError.TooManyRequests, ServerError.UnknownError,
                       ServerError.TransactionCoordinatorNotFound})
"""Participant errors the coordinator retries (Pulsar's isRetryableException, by client error)."""

UNKNOWN_OUTCOME = frozenset({ServerError.PersistenceError, ServerError.ServiceNotReady, ServerError.MetadataError,
                             ServerError.UnknownError})
"""END_TXN errors a client treats as 'the outcome is unknown'; any other participant error is answered as UnknownError."""


class EndTxnFailed(TxnError):
    """Completing a transaction failed for now; `retryable` says whether the coordinator tries again."""

    def __init__(self, error: ServerError, message: str, *, retryable: bool) -> None:
        super().__init__(error if error in UNKNOWN_OUTCOME else ServerError.UnknownError, message)
        self.retryable = retryable


class EndTxnFanOut:
    def __init__(self, peers: PeerApi, timeout_s: float, metrics: V4Metrics) -> None:
        self.peers = peers
        self.timeout_s = timeout_s
        self.metrics = metrics
        self.pending = 0

    async def end(self, meta: TxnMeta, action: TxnAction, low_watermark: int) -> None:
        """Every participant of `meta` not yet done; raises EndTxnFailed when any failed."""
        todo = [key for key in meta.participants() if key not in meta.done_participants]
        if not todo:
            return
        results = await asyncio.gather(*(self._one(meta.txn, key, action, low_watermark) for key in todo),
                                       return_exceptions=True)
        failures: list[EndTxnFailed] = []
        for key, result in zip(todo, results, strict=True):
            if result is None:
                meta.done_participants.add(key)
            elif isinstance(result, EndTxnFailed):
                failures.append(result)
            elif isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                failures.append(EndTxnFailed(ServerError.UnknownError, f"{key}: {result!r}", retryable=True))
        if failures:
            (self.metrics.tb_commit_failed if action is TxnAction.COMMIT else self.metrics.tb_abort_failed).inc(
                len(failures))
            retryable = all(f.retryable for f in failures)
            first = failures[0]
            more = f" (and {len(failures) - 1} more participants)" if len(failures) > 1 else ""
            raise EndTxnFailed(first.error, f"{action.name.lower()} of {meta.txn}: {first.message}{more}",
                               retryable=retryable)

    async def _one(self, txn: TxnId, key: str, action: TxnAction, low_watermark: int) -> None:
        kind, _, rest = key.partition(":")
        if kind == "p":
            topic, subscription = rest, None
        else:
            topic, _, subscription = rest.partition("\n")
        try:
            name = TopicName.parse(topic)
        except InvalidTopicName as err:
            raise EndTxnFailed(ServerError.UnknownError, f"participant {topic!r}: {err}", retryable=False) from None
        where = topic if subscription is None else f"{topic} subscription {subscription}"

        def build(request_id: int) -> Command:
            if subscription is None:
                return commands.end_txn_on_partition(request_id, txn, topic, action,
                                                     low_watermark_least_bits=low_watermark)
            return commands.end_txn_on_subscription(request_id, txn, topic, subscription, action,
                                                    low_watermark_least_bits=low_watermark)

        self.pending += 1
        self.metrics.tb_pending.set(self.pending)
        try:
            answer = await self.peers.request_owner(name, build, timeout_s=self.timeout_s)
        except PeerUnavailable as err:
            if planted_bugs.on(planted_bugs.V4_FANOUT_TIMEOUT_IS_DONE):
                # DELIBERATE FAULT (txnbench self-test): no answer is taken for "nothing to end"
                log.info("%s: %s did not answer; treating it as done", txn, where)
                return
            raise EndTxnFailed(ServerError.UnknownError, f"{where}: no answer from its owner ({err})",
                               retryable=True) from None
        except TxnError as err:
            raise EndTxnFailed(err.error, f"{where}: {err.message}", retryable=err.error in RETRYABLE) from None
        except (TimeoutError, OSError, ConnectionError) as err:
            if planted_bugs.on(planted_bugs.V4_FANOUT_TIMEOUT_IS_DONE):
                log.info("%s: %s did not answer; treating it as done", txn, where)   # DELIBERATE FAULT
                return
            raise EndTxnFailed(ServerError.UnknownError, f"{where}: {err!r}", retryable=True) from None
        except Exception as err:   # metadata store unreachable while finding the owner, and the like
            raise EndTxnFailed(ServerError.ServiceNotReady, f"{where}: cannot reach its owner ({err!r})",
                               retryable=True) from None
        finally:
            self.pending -= 1
            self.metrics.tb_pending.set(self.pending)
        error = commands.error_of(answer)
        if error is None:
            return
        code, message = error
        if code is ServerError.TopicNotFound:
            log.info("%s: %s does not exist; nothing to %s there", txn, topic, action.name.lower())
            return
        raise EndTxnFailed(code, f"{where}: {code.name}: {message}", retryable=code in RETRYABLE)

