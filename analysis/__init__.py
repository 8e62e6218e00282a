"""PySpark analysis of run histories.

`analysis.spark` gives the one SparkSession, `analysis.history_io` reads and
validates a history, `analysis.model` pairs its operations and decides
transaction outcomes, `analysis.checks` holds one pure check per anomaly class
of docs/checks.md, and `analysis.check` is `txnbench check`. Spark is imported
only by these modules, never by `harness` (`analysis.verdicts`, which the
orchestrator calls after the checker, reads only files).
"""
