"""The peer comparison: `pulsar-perf transaction` and txnbench on one cluster, in one report.

`pulsar_perf` reads what pulsar-perf leaves (its log's interval lines, its HdrHistogram log),
`brokers` the broker-side counters both runs moved, `compare` puts both sides in one
document (peer.json) and `render` writes peer.md and peer.html from it.
"""
