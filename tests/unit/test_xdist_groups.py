"""`make test`'s two workers: which tests may run beside which (tests/conftest.py)."""

from __future__ import annotations

from tests.conftest import PROCESS_GROUP, xdist_group_of


def test_process_starting_tests_share_one_group_and_others_group_by_file() -> None:
    assert xdist_group_of("tests/cluster/test_v5_failover.py", set()) == PROCESS_GROUP
    assert xdist_group_of("tests/pulsar/test_pulsar_smoke.py", {"pulsar"}) == PROCESS_GROUP
    # a test elsewhere that starts a cluster is held by its marker
    assert xdist_group_of("tests/spark/test_standalone_cluster.py", {"cluster", "spark"}) == PROCESS_GROUP
    assert xdist_group_of("tests/unit/test_cli.py", set()) == "tests/unit/test_cli.py"
    assert xdist_group_of("tests/spark/test_report.py", {"spark"}) == "tests/spark/test_report.py"
