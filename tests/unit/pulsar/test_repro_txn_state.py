"""How the finding programs read a transaction's state (targets/pulsar/repro/TxnState.java),
compiled and run with a JDK.

Why: on 3.0.0 the broker named as a coordinator's owner answered the question about T's state with
a redirect to itself until the client gave up (HTTP 307). StaleCoordinatorAfterOwnershipReacquired
read any answer that named no unfinished state as "T ended", and called a try whose later message
went to no reader "not shown".
"""

from __future__ import annotations

import pytest

from tests.unit.pulsar.java_probe import run_probe

ANSWERS = {
    "open": '{"txnId":"(3,5)","status":"OPEN","openTimestamp":1,"timeoutAt":45000}',
    "aborting": '{"txnId":"(3,5)","status":"ABORTING"}',
    "aborted": '{"txnId":"(3,5)","status":"ABORTED"}',
    "gone": 'Admin$Failed: GET /admin/v3/transactions/transactionMetadata/3/5: HTTP 404 {"reason":"not found"}',
    "redirected": "Admin$Failed: GET /admin/v3/transactions/transactionMetadata/3/5: HTTP 307 ",
    "timeout": "HttpTimeoutException: request timed out",
}

PROBE = """
public final class TxnStateProbe {
    public static void main(String[] argv) {
        for (int i = 0; i < argv.length; i += 2) {
            String answer = argv[i + 1];
            System.out.println(argv[i] + " " + TxnState.unfinished(answer) + " " + TxnState.ended(answer) + " "
                    + TxnState.heldReaders(answer, true) + " " + TxnState.heldReaders(answer, false));
        }
    }
}
"""


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bool, bool, bool, bool]]:
    """Per answer: unfinished, ended, held readers with the later message read, and with it unread."""
    argv = [part for name, answer in ANSWERS.items() for part in (name, answer)]
    lines = run_probe(tmp_path_factory.mktemp("txnstate"), "TxnStateProbe", PROBE, ["TxnState.java"], argv)
    judged: dict[str, tuple[bool, bool, bool, bool]] = {}
    for line in lines:
        name, unfinished, ended, held_read, held_unread = line.split()
        judged[name] = (unfinished == "true", ended == "true", held_read == "true", held_unread == "true")
    return judged


def test_a_state_that_is_no_end_holds_the_readers_whatever_was_read(
        judged: dict[str, tuple[bool, bool, bool, bool]]) -> None:
    assert judged["open"] == (True, False, True, True)
    assert judged["aborting"] == (True, False, True, True)


def test_an_end_the_coordinator_named_or_a_404_is_an_end(judged: dict[str, tuple[bool, bool, bool, bool]]) -> None:
    assert judged["aborted"] == (False, True, False, False)
    assert judged["gone"] == (False, True, False, False)


def test_a_failed_question_is_no_end_and_the_unread_later_message_decides(
        judged: dict[str, tuple[bool, bool, bool, bool]]) -> None:
    assert judged["redirected"] == (False, False, False, True)
    assert judged["timeout"] == (False, False, False, True)
