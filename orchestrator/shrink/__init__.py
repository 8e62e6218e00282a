"""`txnbench shrink RUN`: a failing chaos run's faults reduced to a small schedule that still fails.

Theory of operation. Jepsen leaves the question "which of these faults matter?" to whoever reads
the history; the shrink answers it by running the scenario again with fewer faults. It reads what
the run did (record.py: the faults the nemesis injected, when, on what; the anomaly classes
nobody expected, judged again by analysis.verdicts; when the first of them happened), pins each
fault to what it hit (pin.py), and searches (search.py): first everything after the first
unexpected anomaly plus `--margin` is cut, then delta debugging drops faults, then each kept
fault's window is halved. Each candidate is a scenario file (schedule.py: the run's own config, seed
and workload, its faults as explicit schedule entries at the times the run injected them, a faults
phase cut to just past the last one) and one or more real runs of it (runner.py: the same `Run` as
`txnbench run`, on the run's own target and release). A candidate fails when a run shows every
kept class unexpected again (driver.py). The best schedule, shrink.json and shrink.md are written
after every candidate into `results/<run_id>-shrink/` (report.py), whatever stops the search.

Limits (docs/shrink.md): a re-run is another run (the load's timing differs, targets drawn among a
topic's segments, aimed targets and triggers follow the load), so a race may need `--tries`; the
shrunk schedule is 1-minimal for the runs made, not proof that fewer faults never fail.
"""
