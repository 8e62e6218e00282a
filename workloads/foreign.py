"""A second client that aborts, by id, transactions the load's users are committing.

Theory of operation. Pulsar's transaction coordinator takes an END_TXN for any transaction
from any connection (without authentication it checks no owner), so a second application
holding a transaction's id (a supervisor, an operator's tool, a zombie instance of the same
application) can abort it while its owner commits it. With `workload.foreign_abort_ratio`, a
user about to commit asks this second client to race it (`race`): the abort goes out from a
greenlet of its own, `delay_s` after the user's commit starts (a negative delay: the user waits
that long after the abort started before it commits), so across a run the abort reaches the
coordinator before, beside and after the commit. The user draws the delay with its seeded
generator when it plans the transaction, like every other choice.

Exactly one of the two decisions may win. The coordinator refuses the loser: a commit that
comes after the abort is refused (InvalidTxnStatus naming ABORTED, or the transaction is
gone: a definite `fail`, so aborted), an abort that comes after the commit too (the client
reads an answer naming COMMITTED or COMMITTING as definite). Both are the expected loss of a
race the load made on purpose (`Counters.race_losses`, not errors).

The second client is its own client (its own connections to the brokers), made on first use
by the factory the load process hands in; without one (tests, the capacity probe) the load's
client serves. Its aborts are recorded by a session of their own, process
`<writer>/foreign` (each on its own lane, `/l1` ..., as they may overlap), with
`extra.foreign.owner` naming the user whose transaction it is: the history holds two
decisions of one transaction from two processes, and the checker judges them together
(analysis.model: an `ok` abort makes the transaction aborted, an `ok` commit committed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.history import HistoryMisuse, HistoryWriteError, OpF
from workloads.api import ClientApi
from workloads.concurrent import Background
from workloads.session import Session

if TYPE_CHECKING:
    from workloads.context import LoadContext

log = logging.getLogger(__name__)

FOREIGN_PROCESS = "foreign"
"""The second client's history process is `<writer>/foreign` (and its lanes)."""
RACE_SPREAD_S = 0.02
"""Users draw the abort's delay relative to their commit from [-RACE_SPREAD_S, RACE_SPREAD_S]: an
end-transaction takes milliseconds, so the abort lands before, during or after the commit."""
SLOTS = 64
"""Aborts in flight at once, at most; a race asked for while all are busy is not run."""


class ForeignAborts:
    """The second client of one load process and its recorded aborts."""

    def __init__(self, ctx: LoadContext, make_client: Callable[[], ClientApi] | None) -> None:
        self.ctx = ctx
        self._make = make_client
        self._client: ClientApi | None = None
        self._own = False
        self._lock = threading.Lock()
        self.session = Session(ctx, -1, "foreign-abort", paced=False, process=f"{ctx.writer}/{FOREIGN_PROCESS}")
        self.background = Background(SLOTS, self._failed)
        ctx.add_background(self.background)

    def client(self) -> ClientApi:
        """The second client, made on first use (the load's own client when there is no factory)."""
        with self._lock:
            if self._client is None:
                self._own = self._make is not None
                self._client = self._make() if self._make is not None else self.ctx.client
            return self._client

    def race(self, txn_id: str, owner: str, delay_s: float, timeout_s: float) -> bool:
        """Abort `txn_id` from the second client `max(0, delay_s)` from now, in the background.

        False when it was not started (the load is stopping, or every slot is busy)."""
        if self.ctx.stopping.is_set() or not self.background.acquire(self.ctx.stopping, 0.0):
            return False
        self.background.spawn(lambda: self._abort(txn_id, owner, max(0.0, delay_s), timeout_s))
        return True

    def _abort(self, txn_id: str, owner: str, delay_s: float, timeout_s: float) -> None:
        if delay_s > 0 and self.ctx.stopping.wait(delay_s):
            return   # the load stops: the owner ends its transaction itself
        try:
            client = self.client()
        except Exception as err:   # a client that cannot be made changes nothing the history holds
            log.warning("the second client could not be made: %s: %s", type(err).__name__, err)
            self.ctx.counters.exceptions += 1
            return
        outcome = self.session.op(OpF.TXN_ABORT, lambda: client.abort_transaction(txn_id, timeout_s),
                                  txn=txn_id, extra={"foreign": {"owner": owner}}, expect_loss=True)
        counted = self.ctx.counters.foreign_aborts
        counted["count"] += 1
        counted["ok" if outcome.ok else "fail" if outcome.definite else "info"] += 1

    def _failed(self, err: BaseException) -> None:
        if isinstance(err, (HistoryWriteError, HistoryMisuse)):
            self.ctx.fail_fatally(err)
            return
        self.ctx.counters.exceptions += 1
        log.error("a second client's abort failed: %s: %s", type(err).__name__, err, exc_info=err)

    def close(self, timeout_s: float) -> None:
        """Close the second client if this made one (bounded; best effort)."""
        with self._lock:
            client, own = self._client, self._own
            self._client = None
        if client is not None and own:
            try:
                client.close(timeout_s)
            except Exception as err:   # the history is already written
                log.warning("closing the second client: %s: %s", type(err).__name__, err)
