"""`make test`'s two workers: which tests may run beside which (tests/conftest.py)."""

from __future__ import annotations

from tests.conftest import PROCESS_GROUP, SPARK_GROUP, xdist_group_of


def test_process_and_spark_tests_have_a_group_each_and_others_group_by_file() -> None:
    assert xdist_group_of("tests/cluster/test_v5_failover.py", set()) == PROCESS_GROUP
    assert xdist_group_of("tests/pulsar/test_pulsar_smoke.py", {"pulsar"}) == PROCESS_GROUP
    # a test elsewhere that starts a cluster is held by its marker
    assert xdist_group_of("tests/spark/test_standalone_cluster.py", {"cluster", "spark"}) == PROCESS_GROUP
    assert xdist_group_of("tests/unit/test_cli.py", set()) == "tests/unit/test_cli.py"
    # one Spark session at a time
    assert xdist_group_of("tests/spark/test_report.py", {"spark"}) == SPARK_GROUP
    assert xdist_group_of("tests/unit/report/test_render.py", {"spark"}) == SPARK_GROUP
