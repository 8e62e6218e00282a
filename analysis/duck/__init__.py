"""The checker on DuckDB: the sixteen checks as SQL over the frames `prepare` names, in one process.

Why: on one machine Spark's fixed costs (the JVM, the JIT, planning and scheduling some ninety
jobs) are most of a check. The passes no checker can skip took 26 s in Spark and 2.3 s in DuckDB
over the same Parquet copy of a 20-million-event history (docs/checks.md, "Another engine for the
floor, measured"); issue #45 asks 60 s from the copy and 150 s from JSONL.

This is a second implementation of the same checks, not a new judge: every check test of
tests/spark runs on both (tests/spark/conftest.py's `run_check` is parametrised by engine), and
`tools.bench.same_results` compares whole `results.json` files. The Spark checker stays for a
Spark cluster (`--master spark://...`) and for histories Arrow cannot read or pair as a stream.

Modules: `sql` (SQL text helpers), `frames` (`DuckContext`, `prepare`: the shared frames as
tables), `evaluate` (`SqlCheck`, counting and ordered examples), `checks` (one module per module
of analysis.checks), `load` (a history to events and operations in DuckDB), `run` (the checker
over a run folder).
"""
