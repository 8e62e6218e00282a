"""The judgement of tools/repro/v5_segment_visibility.py, without a cluster.

The tool's verdicts decide what docs/findings/v5-segment-visibility-stall.md claims, so
they are held here: a committed entry no reader delivers is hidden, aborted entries are
never counted, the standing subscription is judged on everything it ever delivered
(it acknowledges as it goes), and the wake-up experiment calls a stall only when a
fresh subscription got what the connected consumer did not.
"""

from __future__ import annotations

from tools.repro.v5_segment_visibility import Probe, Sent, WakeUp, summarize

SEG = "segment://public/default/vis-1/0000-ffff-0"


def sent(entry: int, outcome: str) -> Sent:
    return Sent(0, "1:1", f"v{entry}", SEG, (7, entry), outcome, 1.0)


def test_a_committed_entry_no_reader_delivered_is_hidden_and_aborted_ones_do_not_count() -> None:
    history = [sent(0, "committed"), sent(1, "aborted"), sent(2, "committed"), sent(3, "committed")]
    lines = summarize(history, [Probe(0.0, "fresh-reader", {SEG: [(7, 0)]})])
    assert lines == ["+    0s fresh-reader           0000-ffff-0: 1/3 committed delivered, highest entry read "
                     "(7, 0), first hidden (7, 2), hidden 2"]


def test_a_reader_that_delivered_every_committed_entry_hides_nothing() -> None:
    history = [sent(0, "committed"), sent(1, "aborted"), sent(2, "committed")]
    lines = summarize(history, [Probe(30.0, "fresh-subscription", {SEG: [(7, 0), (7, 2)]})])
    assert lines[0].endswith("first hidden None, hidden 0")
    assert "2/2 committed delivered" in lines[0]


def test_the_standing_subscription_is_judged_on_all_it_ever_delivered() -> None:
    history = [sent(0, "committed"), sent(1, "committed")]
    probes = [Probe(0.0, "standing-subscription", {SEG: [(7, 0)]}),
              Probe(30.0, "standing-subscription", {SEG: [(7, 1)]})]
    lines = summarize(history, probes)
    assert lines[0].endswith("hidden 1") and lines[1].endswith("hidden 0")


def test_a_standing_subscription_with_nothing_new_still_counts_what_it_delivered_before() -> None:
    history = [sent(0, "committed"), sent(1, "committed")]
    probes = [Probe(0.0, "standing-subscription", {SEG: [(7, 0), (7, 1)]}),
              Probe(30.0, "standing-subscription", {})]
    lines = summarize(history, probes)
    assert len(lines) == 2 and lines[1].startswith("+   30s standing-subscription")
    assert lines[1].endswith("highest entry read None, first hidden None, hidden 0")


def test_a_probe_that_got_nothing_says_so() -> None:
    assert summarize([sent(0, "committed")], [Probe(0.0, "fresh-reader", {})]) == [
        "+    0s fresh-reader           nothing delivered"]


def wake(standing: tuple[tuple[int, int], ...], fresh: tuple[tuple[int, int], ...]) -> WakeUp:
    first = ((7, 0), (7, 1))
    return WakeUp("t", first, standing, fresh, ((7, 2), (7, 3)), ())


def test_wake_up_stall_needs_the_fresh_subscription_to_have_the_messages() -> None:
    assert wake((), ((7, 0), (7, 1))).stalled                      # fresh got them, standing did not
    assert not wake(((7, 0), (7, 1)), ((7, 0), (7, 1))).stalled     # both got them: no stall
    assert not wake((), ()).stalled                                 # nobody got them: not this finding
    assert wake(((7, 0),), ((7, 0), (7, 1))).stalled               # standing got only part
