"""aborted-read, dirty-read and unexpected on tiny histories."""

from __future__ import annotations

from analysis.checks import AnomalyClass, CheckStatus
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History


def test_aborted_read_by_a_consumer_is_found_with_its_ops(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").send("b").abort()
    h.process("c1").receive("a", sub="s")
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.name is AnomalyClass.ABORTED_READ and result.status is CheckStatus.RAN
    assert result.count == 1
    example = result.examples[0]
    assert example["value"] == "a" and example["txn"] == "1:1" and example["why"] == "transaction aborted"
    assert example["send"]["writer"] == "w0" and example["send"]["process"] == "w0/u1"
    assert example["send"]["index"] == 2 and example["send"]["f"] == "send"
    assert example["observed"]["f"] == "receive" and example["observed"]["process"] == "c1"
    assert example["observed"]["subscription"] == "s"


def test_aborted_read_in_the_final_reads(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit(type="fail")   # a definite commit failure: aborted
    h.drain(reads={"t1": ["a"]})
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.count == 1
    assert result.examples[0]["observed"]["f"] == "read"


def test_a_definitely_failed_send_that_shows_up_is_an_aborted_read(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").send("x", type="fail")
    h.drain(reads={"t1": ["x"]})
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.count == 1 and result.examples[0]["why"] == "send failed definitively"


def test_a_send_outside_any_transaction_takes_its_own_outcome_where_a_consumer_receives_it(
        run_check: RunCheck) -> None:
    """A receive takes a lone send's own outcome, not a transaction's (observations join both): an
    `info` send that is not in the final reads of a topic read to the end was not written, so
    receiving it is an aborted read; an `ok` one received and read is not."""
    h = History()
    h.process("w0/u1").send("x", type="info").send("y")
    h.process("c1").receive("x").receive("y")
    h.drain(reads={"t1": ["y"]})
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.count == 1
    assert result.examples[0]["value"] == "x" and result.examples[0]["observed"]["f"] == "receive"


def test_unknown_transaction_decided_aborted_makes_its_receive_an_aborted_read(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit(type="info")
    h.process("c1").receive("a")
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.count == 1
    assert result.examples[0]["why"] == "transaction aborted (nothing of it is visible)"


def test_committed_values_received_and_read_are_not_aborted_reads(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit()
    h.process("w0/u2").open().send("b").abort()
    h.process("c1").receive("a")
    h.drain(reads={"t1": ["a"]})
    assert run_check(h, AnomalyClass.ABORTED_READ).count == 0


def test_dirty_read_names_the_early_receive(run_check: RunCheck) -> None:
    h = History()
    t = h.process("w0/u1").open().send("a")
    h.process("c1").receive("a")
    t.commit()
    h.drain(reads={"t1": ["a"]})
    result = run_check(h, AnomalyClass.DIRTY_READ)
    assert result.count == 1
    example = result.examples[0]
    assert example["value"] == "a" and example["txn"] == "1:1"
    assert example["receive"]["process"] == "c1" and example["send"]["index"] == 2
    assert example["ms_before_commit"] > 0


def test_dirty_read_gives_remote_clocks_the_benefit_of_their_measured_slack(run_check: RunCheck) -> None:
    # r0 and c1 on different hosts whose clocks agree only within +-1 s (clock_slack_ns)
    h = History()
    t = h.process("r0/u1").open().send("a")
    h.process("c1").receive("a")                      # a moment before the commit: within the slack
    t.commit()
    u = h.process("r0/u2").open().send("b")
    h.process("c1").receive("b")
    h.sleep(2)                                         # 2 s before the commit: dirty whatever the clocks
    u.commit()
    h.drain(reads={"t1": ["a", "b"]})
    assert run_check(h, AnomalyClass.DIRTY_READ).count == 2
    result = run_check(h, AnomalyClass.DIRTY_READ, clock_slack_ns=1_000_000_000)
    assert result.count == 1 and result.examples[0]["value"] == "b"


def test_receive_after_commit_invoked_is_not_dirty(run_check: RunCheck) -> None:
    h = History()
    t = h.process("w0/u1").open().send("a")
    t.commit()
    h.process("c1").receive("a")
    h.process("w0/u2").open().send("b").abort()
    h.process("c1").receive("b")     # an aborted read, not a dirty one
    h.drain(reads={"t1": ["a"]})
    assert run_check(h, AnomalyClass.DIRTY_READ).count == 0


def test_unexpected_values_from_receives_and_reads(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit()
    h.process("c1").receive("ghost")
    h.process("c1").receive("ghost")
    h.drain(reads={"t1": ["a", "phantom"]})
    result = run_check(h, AnomalyClass.UNEXPECTED)
    assert result.count == 2
    assert {e["value"] for e in result.examples} == {"ghost", "phantom"}
    ghost = next(e for e in result.examples if e["value"] == "ghost")
    assert ghost["observations"] == 2 and ghost["observed"]["f"] == "receive"


def test_values_of_incomplete_sends_are_expected(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a", type=None)   # invoked, never completed
    h.drain(reads={"t1": ["a"]})
    assert run_check(h, AnomalyClass.UNEXPECTED).count == 0


def test_read_checks_run_without_a_drain(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").abort()
    h.process("c1").receive("a")
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.status is CheckStatus.RAN and result.count == 1


def test_an_aborted_value_only_the_live_system_showed_is_an_aborted_read(run_check: RunCheck) -> None:
    # live (before the cold restart) a broker showed an aborted value; the restart hid it again
    h = History()
    h.process("w0/u1").open().send("a").commit()
    h.process("w0/u2").open().send("b").abort()
    h.phase("drain").live_read("t1", "a", "b").read("t1", "a")
    h.drain_complete(live_topics=["t1"])
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.count == 1
    assert result.examples[0]["value"] == "b" and result.examples[0]["observed"]["f"] == "read"
