"""`txnbench run failover --target pulsar --coverage` on real Pulsar 5.0.1: JaCoCo on every broker
and the bookie, the coordinator's broker killed (the kill is preceded by a dump), and the run's
report: JaCoCo's HTML and XML, the recovery methods judged with the faults active when each was
first reached, and what the dumps lost. One real cluster, about three minutes; marked slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.test_run_scenarios import run_folder, short_scenario, txnbench
from tests.prerequisites import or_skip, real_pulsar_ready

pytestmark = [pytest.mark.pulsar, pytest.mark.slow, pytest.mark.timeout(1500)]


def test_a_covered_failover_reports_the_recovery_methods(tmp_path: Path) -> None:
    with or_skip():
        real_pulsar_ready()
    scenario = short_scenario(tmp_path, "failover", steady_s=4)
    done = txnbench("run", str(scenario), "--target", "pulsar", "--path", "v4", "--duration", "25", "--coverage",
                    "--results", str(tmp_path / "results"))
    run = run_folder(done)
    coverage = run / "coverage"
    assert (coverage / "html" / "index.html").is_file(), done.stderr[-3000:]
    assert (coverage / "jacoco.xml").is_file() and (coverage / "jacoco.exec").is_file()
    result = json.loads((coverage / "coverage.json").read_text())
    assert result["pulsar_release"] == "5.0.1" and result["path"] == "v4"
    assert result["transaction_code"]["lines"]["covered"] > 0
    index = [json.loads(line) for line in (coverage / "dumps.jsonl").read_text().splitlines()]
    kills = [e for e in index if e.get("event") == "end" and e.get("how") == "kill"]
    assert kills and all(e["dumped"] and e["unrecorded_s"] < 5 for e in kills), kills
    rows = {r["name"]: r for r in result["recovery_methods"] if r["applies"]}
    # the coordinator's broker died: its coordinators were loaded again on the other broker
    takeover = rows["TransactionMetadataStoreService.handleTcClientConnect"]
    assert takeover["reached"] and takeover["first"] is not None
    assert rows["MLTransactionLogImpl$TransactionLogReplayer.start"]["reached"]
    assert result["recovery"]["entered"] > 10
    assert result["lost"]["lives"] >= 4            # two brokers, the bookie, the killed broker again
    assert "listed recovery methods entered" in (coverage / "coverage.md").read_text()
