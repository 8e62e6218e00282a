"""ctp-duplicate, ctp-loss, nonmonotonic and stalled-commit."""

from __future__ import annotations

from analysis.checks import AnomalyClass, CheckStatus
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History


def _input(h: History, value: str = "i") -> History:
    h.process("w0/p").open().send(value, topic="in").commit()
    return h


def test_ctp_duplicate_two_visible_outputs_of_one_input(run_check: RunCheck) -> None:
    h = _input(History())
    c = h.process("w1/c1")
    c.receive("i", sub="ctp")
    c.open().ack("i", sub="ctp").send("o1", topic="out", inputs=["i"]).commit()
    c.receive("i", sub="ctp", redelivery=1)
    c.open().ack("i", sub="ctp").send("o2", topic="out", inputs=["i"]).commit()
    h.drain(reads={"in": ["i"], "out": ["o1", "o2"]})
    result = run_check(h, AnomalyClass.CTP_DUPLICATE)
    assert result.name is AnomalyClass.CTP_DUPLICATE and result.count == 1
    example = result.examples[0]
    assert example["input"] == "i" and example["visible_outputs"] == 2
    assert sorted(o["value"] for o in example["outputs"]) == ["o1", "o2"]
    assert {o["txn"] for o in example["outputs"]} == {"1:2", "1:3"}


def test_ctp_retry_after_an_abort_is_one_output(run_check: RunCheck) -> None:
    h = _input(History())
    c = h.process("w1/c1")
    c.receive("i", sub="ctp")
    c.open().ack("i", sub="ctp").send("o1", topic="out", inputs=["i"]).abort()
    c.receive("i", sub="ctp", redelivery=1)
    c.open().ack("i", sub="ctp").send("o2", topic="out", inputs=["i"]).commit()
    h.drain(reads={"in": ["i"], "out": ["o2"]})
    assert run_check(h, AnomalyClass.CTP_DUPLICATE).count == 0
    assert run_check(h, AnomalyClass.CTP_LOSS).count == 0


def test_ctp_loss_committed_input_without_visible_output(run_check: RunCheck) -> None:
    h = _input(History())
    c = h.process("w1/c1")
    c.receive("i", sub="ctp")
    c.open().ack("i", sub="ctp").send("o1", topic="out", inputs=["i"]).commit()
    h.drain(reads={"in": ["i"], "out": []})
    result = run_check(h, AnomalyClass.CTP_LOSS)
    assert result.count == 1
    example = result.examples[0]
    assert example["input"] == "i" and example["txn"] == "1:2" and example["subscription"] == "ctp"
    assert example["ack"]["process"] == "w1/c1"
    assert [o["value"] for o in example["invisible_outputs"]] == ["o1"]


def _inputs(h: History, *values: str) -> History:
    h.process("w0/p").open().sends(*values, topic="in").commit()
    return h


def test_ctp_loss_an_input_a_committed_cumulative_ack_passed_over(run_check: RunCheck) -> None:
    """A Failover consumer's transaction acks i2 cumulatively having carried only i2: i1, which it
    received and never transformed, is consumed by that ack all the same."""
    h = _inputs(History(), "i1", "i2")
    c = h.process("w1/c1")
    c.receive("i1", sub="ctp")
    c.receive("i2", sub="ctp")
    c.open().send("o2", topic="out", inputs=["i2"]).ack("i2", sub="ctp", cumulative=True).commit()
    h.drain(reads={"in": ["i1", "i2"], "out": ["o2"]})
    result = run_check(h, AnomalyClass.CTP_LOSS)
    assert result.count == 1
    example = result.examples[0]
    assert example["input"] == "i1" and example["subscription"] == "ctp"
    assert example["ack"]["value"] == "i2"          # the cumulative ack that covered it


def test_ctp_cumulative_acks_over_carried_or_settled_inputs_lose_nothing(run_check: RunCheck) -> None:
    h = _inputs(History(), "i1", "i2", "i3", "i4")
    c = h.process("w1/c1")
    for value in ("i1", "i2", "i3", "i4"):
        c.receive(value, sub="ctp")
    c.open().send("o1", topic="out", inputs=["i1", "i2"]).ack("i2", sub="ctp", cumulative=True).commit()
    c.open().send("o2", topic="out", inputs=["i3", "i4"]).ack("i4", sub="ctp", cumulative=True).commit()
    h.drain(reads={"in": ["i1", "i2", "i3", "i4"], "out": ["o1", "o2"]})
    result = run_check(h, AnomalyClass.CTP_LOSS)
    assert result.count == 0 and result.unjudged == 0


def test_ctp_an_aborted_cumulative_ack_consumes_nothing(run_check: RunCheck) -> None:
    h = _inputs(History(), "i1", "i2")
    c = h.process("w1/c1")
    c.receive("i1", sub="ctp")
    c.receive("i2", sub="ctp")
    c.open().send("o2", topic="out", inputs=["i2"]).ack("i2", sub="ctp", cumulative=True).abort()
    c.receive("i1", sub="ctp", redelivery=1)
    c.receive("i2", sub="ctp", redelivery=1)
    c.open().send("o3", topic="out", inputs=["i1", "i2"]).ack("i2", sub="ctp", cumulative=True).commit()
    h.drain(reads={"in": ["i1", "i2"], "out": ["o3"]})
    assert run_check(h, AnomalyClass.CTP_LOSS).count == 0


def test_ctp_loss_not_judged_when_the_output_topic_was_not_read(run_check: RunCheck) -> None:
    h = _input(History())
    c = h.process("w1/c1")
    c.receive("i", sub="ctp")
    c.open().ack("i", sub="ctp").send("o1", topic="out", inputs=["i"]).commit()
    h.drain(reads={"in": ["i"]}, topics=["in"])
    result = run_check(h, AnomalyClass.CTP_LOSS)
    assert result.count == 0 and result.unjudged == 1


def test_ack_only_transactions_are_not_ctp(run_check: RunCheck) -> None:
    h = _input(History())
    c = h.process("w1/c1")
    c.receive("i", sub="s")
    c.open().ack("i", sub="s").commit()
    h.process("w0/x").open().send("o", topic="out", inputs=["z"]).commit()   # some CTP elsewhere
    h.drain(reads={"in": ["i"], "out": ["o"]})
    assert run_check(h, AnomalyClass.CTP_LOSS).count == 0


def test_nonmonotonic_values_read_out_of_send_order(run_check: RunCheck) -> None:
    h = History()
    p = h.process("w0/u1")
    p.open().send("a", key="k").commit()
    p.open().send("b", key="k").commit()
    p.open().send("c", key="k").commit()
    h.drain(reads={"t1": ["a", "c", "b"]})
    result = run_check(h, AnomalyClass.NONMONOTONIC)
    assert result.name is AnomalyClass.NONMONOTONIC and result.count == 1
    example = result.examples[0]
    # c was read before b although the process sent b first
    assert example["value"] == "c" and example["key"] == "k" and example["process"] == "w0/u1"
    assert example["sent_earlier_read_later"]["value"] == "b"
    assert example["send"]["txn"] == "1:3" and example["sent_earlier_read_later"]["send"]["txn"] == "1:2"


def test_order_is_per_process_key_and_segment(run_check: RunCheck) -> None:
    h = History()
    p, q = h.process("w0/u1"), h.process("w0/u2")
    p.open().send("a", key="k").send("b", key="j").commit()     # different keys
    q.open().send("c", key="k").commit()                        # different process
    p.send("x", segment="s0").send("y", segment="s1")           # no key, different segments
    h.drain(reads={"t1": ["c", "y", "b", "x", "a"]})
    assert run_check(h, AnomalyClass.NONMONOTONIC).count == 0


def test_stalled_commit_and_abort(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit(took_s=11)
    h.process("w0/u2").open().send("b").abort(took_s=12, type="info")
    h.process("w0/u3").open().send("c").commit(took_s=3)
    h.drain(reads={"t1": ["a", "c"]})
    result = run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=10)
    assert result.name is AnomalyClass.STALLED_COMMIT and result.count == 2
    slowest = result.examples[0]
    assert slowest["txn"] == "1:2" and slowest["op"]["f"] == "txn-abort" and 12 <= slowest["seconds"] < 12.1
    assert result.examples[1]["txn"] == "1:1" and result.examples[1]["completed"] is True


def test_stalled_commit_that_never_completed(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit(type=None)
    h.sleep(12)
    h.process("w0/u2").open().send("b").commit(type=None)    # the history ends right after it
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=10)
    assert result.count == 1
    assert result.examples[0]["txn"] == "1:1" and result.examples[0]["completed"] is False


def test_an_unfinished_commit_of_a_lost_writer_is_measured_to_its_last_line(run_check: RunCheck) -> None:
    # r1 (a remote load worker) died right after invoking a commit; the others went on for 12 s
    h = History()
    h.process("r1/u1").open().send("a").commit(type=None)
    h.sleep(12)
    h.process("r0/u1").open().send("b").commit()
    h.drain(reads={"t1": ["b"]})
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=10).count == 1          # unknown to the check: a stall
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=10, lost_writers=("r1",)).count == 0
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=10, lost_writers=("r0",)).count == 1


def test_stall_threshold_is_a_parameter(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit(took_s=3)
    h.drain(reads={"t1": ["a"]})
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=2).count == 1
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=10).count == 0


def test_order_and_pipeline_checks_need_drain_complete(run_check: RunCheck) -> None:
    h = _input(History())
    for check in (AnomalyClass.CTP_DUPLICATE, AnomalyClass.CTP_LOSS, AnomalyClass.NONMONOTONIC):
        assert run_check(h, check).status is CheckStatus.SKIPPED
    assert run_check(h, AnomalyClass.STALLED_COMMIT).status is CheckStatus.RAN


def _lane_sends(h: History, txn: str, sends: list[tuple[str, str]]) -> None:
    """`sends` of `txn` as (lane, value), all invoked before any completes: operations at once."""
    for lane, value in sends:
        h.emit("w0", lane, "invoke", "send", txn=txn, topic="t1", key="k", value=value)
    for lane, value in sends:
        msg_id = h.new_msg_id("t1")
        h.sent[value] = {"topic": "t1", "msg_id": msg_id, "key": "k", "segment": None}
        h.emit("w0", lane, "ok", "send", txn=txn, topic="t1", key="k", value=value, msg_id=msg_id)


def _user_with_lanes(h: History) -> None:
    """One user (w0/u1) whose sends run at once on lanes; its second transaction reuses lane l1."""
    t1 = h.process("w0/u1").open()
    _lane_sends(h, t1.id, [("w0/u1", "a"), ("w0/u1/l1", "b")])
    t2 = h.process("w0/u1").open()           # opened while t1's commit is still to come (a pipeline)
    h.emit("w0", "w0/u1/l1", "invoke", "txn-commit", txn=t1.id)
    _lane_sends(h, t2.id, [("w0/u1", "c"), ("w0/u1/l2", "d")])
    h.emit("w0", "w0/u1/l1", "ok", "txn-commit", txn=t1.id)
    t2.commit()


def test_lanes_order_only_their_own_sends(run_check: RunCheck) -> None:
    h = History()
    _user_with_lanes(h)
    # a and b ran at once (two lanes): either order is fine; c follows a on lane w0/u1
    h.drain(reads={"t1": ["b", "a", "d", "c"]})
    assert run_check(h, AnomalyClass.NONMONOTONIC).count == 0
    assert run_check(h, AnomalyClass.LOST_WRITE).count == 0
    assert run_check(h, AnomalyClass.PARTIAL_TXN).count == 0


def test_lanes_still_catch_a_lane_read_out_of_order(run_check: RunCheck) -> None:
    h = History()
    _user_with_lanes(h)
    h.drain(reads={"t1": ["c", "b", "a", "d"]})      # c read before a, which lane w0/u1 sent first
    result = run_check(h, AnomalyClass.NONMONOTONIC)
    assert result.count == 1
    example = result.examples[0]
    assert example["process"] == "w0/u1" and example["value"] == "c"
    assert example["sent_earlier_read_later"]["value"] == "a"


def test_nonmonotonic_names_the_earlier_send_with_its_own_segment(run_check: RunCheck) -> None:
    """A key's sends in two segments (a v5 split between them): the earlier send of an example
    is the earlier send's own operation, segment included, not the later send's."""
    h = History()
    p = h.process("w0/u1")
    p.open().send("a", key="k", segment="s0").commit()
    p.open().send("b", key="k", segment="s1").commit()
    h.drain(reads={"t1": ["b", "a"]})
    result = run_check(h, AnomalyClass.NONMONOTONIC)
    assert result.count == 1
    example = result.examples[0]
    assert example["send"]["value"] == "b" and example["send"]["segment"] == "s1"
    earlier = example["sent_earlier_read_later"]
    assert earlier["value"] == "a" and earlier["send"]["segment"] == "s0"
    assert earlier["send"]["index"] < example["send"]["index"] and earlier["send"]["txn"] == "1:1"
    assert earlier["first_read_ns"] > example["first_read_ns"]
