"""lost-ack and stuck-ack: individual and cumulative acks, committed and aborted."""

from __future__ import annotations

from analysis.checks import AnomalyClass, CheckStatus
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History


def _produced(h: History, *values: str) -> History:
    h.process("w0/p").open().sends(*values).commit()
    return h


def test_lost_ack_redelivered_after_the_commit(run_check: RunCheck) -> None:
    h = _produced(History(), "m")
    c = h.process("w1/c1")
    c.receive("m")
    c.open().ack("m").commit()
    c.receive("m", redelivery=1)
    h.drain(reads={"t1": ["m"]})
    result = run_check(h, AnomalyClass.LOST_ACK)
    assert result.name is AnomalyClass.LOST_ACK and result.count == 1
    example = result.examples[0]
    assert example["value"] == "m" and example["subscription"] == "s" and example["txn"] == "1:2"
    assert example["ack"]["writer"] == "w1" and example["ack"]["process"] == "w1/c1"
    assert example["ack"]["f"] == "ack" and example["ack"]["index"] == 3
    assert example["redelivery"]["f"] == "receive" and example["redelivery"]["index"] == 7
    assert example["redeliveries"] == 1


def test_a_copy_dispatched_before_the_commit_and_taken_after_it_is_no_lost_ack(run_check: RunCheck) -> None:
    """The broker redelivered "m" (an earlier abort) before the second transaction's ack
    committed; the copy waited in the receiver queue and the app took it after the commit.
    The receive's `delivered_ns` (frame arrival) tells the two moments apart."""
    h = _produced(History(), "m", "n")
    c = h.process("w1/c1")
    c.receive("m")
    c.open().ack("m").abort()
    queued_at = h.now_ns                      # the abort's redelivery reaches the client now
    c.open().ack("m").commit()                # re-acked from the message the user still holds
    c.receive("m", redelivery=1, delivered_ns=queued_at)
    c.receive("n")
    c.open().ack("n").commit()
    c.receive("n", redelivery=1, delivered_ns=h.now_ns + 1)   # after the commit: lost
    h.drain(reads={"t1": ["m", "n"]})
    result = run_check(h, AnomalyClass.LOST_ACK)
    assert result.count == 1 and result.examples[0]["value"] == "n"


def test_redelivery_before_the_commit_completed_or_after_an_abort_is_fine(run_check: RunCheck) -> None:
    h = _produced(History(), "m", "n")
    c = h.process("w1/c1")
    c.receive("m")
    t = c.open().ack("m")
    c.receive("m", redelivery=1)      # the commit has not completed yet
    t.commit()
    c.receive("n")
    c.open().ack("n").abort()
    c.receive("n", redelivery=1)      # aborted: redelivery is required
    c.receive("m", sub="other")       # another subscription
    c.open().ack("n", type="info").commit(type="info")   # unknown ack: not judged
    h.drain(reads={"t1": ["m", "n"]})
    result = run_check(h, AnomalyClass.LOST_ACK)
    assert result.count == 0


def test_lost_ack_through_a_committed_cumulative_ack(run_check: RunCheck) -> None:
    h = _produced(History(), "m1", "m2", "m3")
    c = h.process("w1/c1")
    for value in ("m1", "m2", "m3"):
        c.receive(value)
    c.open().ack("m3", cumulative=True).commit()
    c.receive("m1", redelivery=1)     # covered by the cumulative ack of m3
    h.drain(reads={"t1": ["m1", "m2", "m3"]})
    result = run_check(h, AnomalyClass.LOST_ACK)
    assert result.count == 1
    example = result.examples[0]
    assert example["value"] == "m1" and example["ack"]["value"] == "m3"


def test_cumulative_ack_does_not_cover_later_messages(run_check: RunCheck) -> None:
    h = _produced(History(), "m1", "m2", "m3")
    c = h.process("w1/c1")
    c.receive("m1")
    c.receive("m2")
    c.open().ack("m2", cumulative=True).commit()
    c.receive("m3")
    c.receive("m3", redelivery=1)
    h.drain(reads={"t1": ["m1", "m2", "m3"]})
    assert run_check(h, AnomalyClass.LOST_ACK).count == 0


def test_lost_ack_of_a_transaction_decided_committed_counts_only_from_the_drain(run_check: RunCheck) -> None:
    h = _produced(History(), "i")
    c = h.process("w1/c1")
    c.receive("i")
    c.open().ack("i").send("o", topic="out", inputs=["i"]).commit(type="info")
    c.receive("i", redelivery=1)      # may precede the real commit: not counted
    h.phase("drain")
    h.read("t1", "i").read("out", "o")
    h.drain_receive("i")              # during the drain: the commit is long done
    h.drain_complete()
    result = run_check(h, AnomalyClass.LOST_ACK)
    assert result.count == 1
    assert result.examples[0]["redelivery"]["writer"] == "drain"


def test_unknown_committed_ack_without_a_drain_phase_is_unjudged(run_check: RunCheck) -> None:
    h = _produced(History(), "i")
    c = h.process("w1/c1")
    c.receive("i")
    c.open().ack("i").send("o", topic="out", inputs=["i"]).commit(type="info")
    c.receive("i", redelivery=1)
    h.read("t1", "i").read("out", "o")      # reads without drain phase or drain-complete
    result = run_check(h, AnomalyClass.LOST_ACK)
    assert result.count == 0 and result.unjudged == 1


def test_stuck_ack_never_redelivered_after_the_abort(run_check: RunCheck) -> None:
    h = _produced(History(), "m")
    c = h.process("w1/c1")
    c.receive("m")
    c.open().ack("m").abort()
    h.drain(reads={"t1": ["m"]})
    result = run_check(h, AnomalyClass.STUCK_ACK)
    assert result.name is AnomalyClass.STUCK_ACK and result.count == 1
    example = result.examples[0]
    assert example["value"] == "m" and example["subscription"] == "s" and example["topic"] == "t1"
    assert example["txn"] == "1:2" and example["ack"]["process"] == "w1/c1"


def test_redelivered_or_settled_elsewhere_is_not_stuck(run_check: RunCheck) -> None:
    h = _produced(History(), "m", "n", "p", "q")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    c1.receive("m")
    c1.open().ack("m").abort()
    c2.receive("m", redelivery=1)             # redelivered after the abort
    c1.receive("n")
    c2.receive("n", redelivery=1)
    c1.open().ack("n").abort()
    c2.open().ack("n").commit()               # another consumer acked it for good
    c1.receive("p")
    c1.receive("q")
    c1.open().ack("p").abort()
    c1.open().ack("q", cumulative=True).commit()   # a committed cumulative ack covers p
    h.drain(reads={"t1": ["m", "n", "p", "q"]})
    result = run_check(h, AnomalyClass.STUCK_ACK)
    assert result.count == 0


def test_stuck_ack_is_not_judged_on_a_subscription_the_drain_did_not_empty(run_check: RunCheck) -> None:
    h = _produced(History(), "m")
    c = h.process("w1/c1")
    c.receive("m")
    c.open().ack("m").abort()
    h.drain(reads={"t1": ["m"]}, subscriptions=[])
    result = run_check(h, AnomalyClass.STUCK_ACK)
    assert result.count == 0 and result.unjudged == 1


def test_stuck_ack_needs_drain_complete(run_check: RunCheck) -> None:
    h = _produced(History(), "m")
    c = h.process("w1/c1")
    c.receive("m")
    c.open().ack("m").abort()
    result = run_check(h, AnomalyClass.STUCK_ACK)
    assert result.status is CheckStatus.SKIPPED
