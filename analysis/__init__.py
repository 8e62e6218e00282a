"""PySpark analysis of run histories.

`analysis.spark` gives the one SparkSession, `analysis.load` reads and pairs a
history and decides transaction outcomes, `analysis.checks` holds one pure
check per anomaly class of docs/checks.md, and `analysis.check` is
`txnbench check`. Spark is imported only by these modules, never by `harness`.
"""
