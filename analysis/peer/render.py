"""peer.md and peer.html from peer.json: one table, both tools, and what pulsar-perf cannot tell."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from analysis.peer.brokers import HEADLINE
from analysis.peer.compare import PERF, TXNBENCH


def _verdict(valid: object) -> str:
    """The checker's `valid` (True, False, or "unknown"/None when the history could not be judged) in words."""
    if valid is True:
        return "valid"
    if valid is False:
        return "invalid"
    return "unknown"


def _num(value: Any, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and value.is_integer() and abs(value) >= 100:
        return f"{int(value):,}{unit}"
    if isinstance(value, float):
        return f"{value:,.3g}{unit}" if abs(value) < 100 else f"{value:,.1f}{unit}"
    return f"{value}{unit}"


def _cores(side: Mapping[str, Any]) -> str:
    busy, cores = side.get("host_busy_cores"), side.get("host_cpus")
    if busy is None:
        return "not measured"
    return f"{_num(busy)} of {cores}" if cores else _num(busy)


#: the load generator's CPUs this busy (share of them) queue its own work noticeably (2026-11-28: at 0.82
#: of its core a txn-open waited 7.5 ms where pulsar-perf's whole cycle took 7.1 ms)
LOAD_BUSY = 0.75


def _share(busy: Any, cpus: Any) -> str:
    return "not measured" if busy is None else f"{_num(busy)} of {cpus}" if cpus else _num(busy)


def _lat(block: Mapping[str, Any] | None) -> str:
    if not block:
        return "not measured"
    return f"{_num(block.get('p50'))} / {_num(block.get('p99'))} / {_num(block.get('max'))}"


def rows(doc: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(measure, pulsar-perf, txnbench) rows of the comparison table."""
    p, t = doc["sides"][PERF], doc["sides"][TXNBENCH]
    out = [("committed txn/s (measured window)", _num(p.get("committed_txn_per_s")),
            _num(t.get("committed_txn_per_s"))),
           ("txnbench / pulsar-perf" + (f" (against {doc['ratios'].get('against')})" if doc.get("bracket") else ""),
            "1", _num(doc["ratios"].get("committed_txn_per_s")))]
    for op in ("send", "ack", "txn-commit"):
        out.append((f"{op} latency p50 / p99 / max (ms)", _lat(p["latency_ms"].get(op)), _lat(t["latency_ms"].get(op))))
    out += [("load generator CPU (% of a core)", _num(p.get("cpu_percent_of_core")), _num(t.get("cpu_percent_of_core"))),
            ("load generator CPU s per 1000 txn", _num(p.get("cpu_s_per_1000_txn")), _num(t.get("cpu_s_per_1000_txn"))),
            ("txnbench / pulsar-perf CPU per txn", "1", _num(doc["ratios"].get("cpu_s_per_1000_txn"))),
            ("machine busy over the window, cores (all processes: load, cluster, anything else)",
             _cores(p), _cores(t))]
    if t.get("load_cpus"):
        cpus = ",".join(str(c) for c in t["load_cpus"])
        out += [(f"load generator's CPUs ({cpus}) busy, cores (--load-cpus)",
                 _share(p.get("load_cpus_busy_cores"), len(p.get("load_cpus") or [])),
                 _share(t.get("load_cpus_busy_cores"), len(t["load_cpus"]))),
                ("the cluster's CPUs (all the others) busy, cores",
                 _share(p.get("cluster_cpus_busy_cores"), p.get("cluster_cpus_count")),
                 _share(t.get("cluster_cpus_busy_cores"), t.get("cluster_cpus_count")))]
    agg, txns = p.get("aggregated") or {}, t.get("transactions") or {}
    failed_t = (txns.get("failed") or 0) + (txns.get("unknown") or 0) if txns else None
    out.append(("transactions that failed to end (pulsar-perf: whole run; txnbench: window)",
                _num(agg.get("end_fail")), _num(failed_t)))
    if p.get("left_open_at_exit") is not None:
        out.append(("transactions left open at exit (broker: created - committed - aborted); they time out "
                    "in the next run's window", _num(p.get("left_open_at_exit")), "n/a"))
    for name in HEADLINE:
        if name in p.get("broker_counts", {}) or name in t.get("broker_counts", {}):
            out.append((f"broker: {name} (whole run)", _num(p["broker_counts"].get(name)),
                        _num(t["broker_counts"].get(name))))
    out.append(("atomicity verdict", "not checked", _verdict(t.get("verdict"))
                + (f" ({', '.join(f'{k}: {v}' for k, v in t['anomalies'].items())})" if t.get("anomalies") else "")))
    return out


def bracket_text(doc: Mapping[str, Any]) -> str:
    """One line on pulsar-perf before and after txnbench (empty without the second run)."""
    b = doc.get("bracket")
    if not b:
        return ""
    return (f"pulsar-perf before txnbench {_num(b['pulsar_perf_before_txn_per_s'])} txn/s, after it "
            f"{_num(b['pulsar_perf_after_txn_per_s'])} txn/s (the cluster drifted {b['pulsar_perf_drift']:+.0%}): "
            f"txnbench / pulsar-perf {_num(b['txnbench_vs_before'])} against the run before, "
            f"{_num(b['txnbench_vs_after'])} against the run after, {_num(b['txnbench_vs_mean'])} against their "
            f"mean. The ratio above and the goal are against {doc['ratios'].get('against')}.")


def _goal(doc: Mapping[str, Any]) -> str:
    ratio, met = doc["ratios"].get("committed_txn_per_s"), doc["goal"].get("met")
    if met is None:
        return "Goal (txnbench at least 80% of pulsar-perf's committed txn/s): unknown (a rate is missing)."
    return (f"Goal (txnbench at least {doc['goal']['txnbench_at_least']:.0%} of pulsar-perf's committed txn/s): "
            f"{'met' if met else 'NOT met'} ({ratio:.0%}).")


def bottleneck_text(doc: Mapping[str, Any]) -> str:
    """One paragraph: the time per transaction of each side and what txnbench's is made of."""
    b = doc.get("bottleneck") or {}
    if not b.get("txnbench_ms_per_txn_per_client"):
        return "Bottleneck: unknown (a rate is missing)."
    text = (f"Time per transaction per client: pulsar-perf {_num(b.get('pulsar-perf_ms_per_txn_per_client'))} ms, "
            f"txnbench {_num(b.get('txnbench_ms_per_txn_per_client'))} ms.")
    if b.get("txnbench_serial_ms") is not None:
        ops = " + ".join(f"{n} {op}" for op, n in b["txnbench_serial_ops"].items())
        text += (f" txnbench (txn_pipeline serial) runs {ops} one after another and waits for the commit: their "
                 f"mean latencies add up to {_num(b['txnbench_serial_ms'])} ms; pulsar-perf sends a transaction's "
                 "messages concurrently and does not wait for its commit.")
    elif b.get("txnbench_cycle_ms") is not None:
        ops = " + ".join(f"{n} {op}" for op, n in b["txnbench_cycle_ops"].items())
        text += (f" txnbench overlaps transactions as pulsar-perf does (txn_pipeline {b.get('txnbench_txn_pipeline')}, "
                 f"send_concurrency {b.get('txnbench_send_concurrency')}): a user waits only for {ops}, whose mean "
                 f"latencies add up to {_num(b['txnbench_cycle_ms'])} ms.")
    if b.get("txnbench_sends_in_flight") is not None:
        text += (f" In flight (Little's law, rate x mean latency): sends, pulsar-perf "
                 f"{_num(b.get('pulsar-perf_sends_in_flight'))} and txnbench {_num(b.get('txnbench_sends_in_flight'))}")
        if b.get("txnbench_txns_in_flight") is not None:
            text += f"; txnbench transactions {_num(b['txnbench_txns_in_flight'])} (pulsar-perf times no commit)"
        text += "."
    pinned = b.get("pinned")
    if pinned:
        text += (f" The load generators ran on {pinned['load_cpus']} CPU(s) of their own, the cluster on the other "
                 f"{pinned['cluster_cpus']} (--load-cpus). While txnbench ran, the cluster's CPUs were "
                 f"{_num(pinned.get('txnbench_cluster_cpus_busy'))} of {pinned['cluster_cpus']} busy and the load "
                 f"generator's {_num(pinned.get('txnbench_load_cpus_busy'))} of {pinned['load_cpus']} (pulsar-perf's "
                 f"window: {_num(pinned.get('pulsar-perf_cluster_cpus_busy'))} and "
                 f"{_num(pinned.get('pulsar-perf_load_cpus_busy'))}).")
        load_busy = pinned.get("txnbench_load_cpus_busy")
        busy_load = isinstance(load_busy, int | float) and load_busy >= LOAD_BUSY * pinned["load_cpus"]
        if pinned.get("txnbench_cluster_saturated") and busy_load:
            text += (" The cluster's CPUs were saturated and the load generator's busy too: both set txnbench's "
                     "rate (answers also wait in the load process's one thread).")
        elif pinned.get("txnbench_cluster_saturated"):
            text += " The cluster's CPUs were saturated: the cluster, not the load generator, set txnbench's rate."
        elif pinned.get("txnbench_load_saturated"):
            text += " The load generator's CPUs were saturated: txnbench's own CPU set its rate."
    elif b.get("machine_saturated"):
        text += (f" The machine was saturated while txnbench ran ({_num(b.get('txnbench_host_busy_cores'))} of "
                 f"{b.get('host_cpus')} cores busy; pulsar-perf's window: "
                 f"{_num(b.get('pulsar-perf_host_busy_cores'))}): the load generator's CPU was taken from the "
                 "cluster, so its CPU per transaction lengthened the cluster's answers, not only its own work.")
    if b.get("txnbench_cpu_caps_below_goal"):
        text += (f" CPU per transaction caps txnbench: one load process (one core at most) at its measured CPU per "
                 f"transaction cannot exceed {_num(b.get('txnbench_ceiling_txn_per_s_per_core'))} txn/s, and "
                 f"matching pulsar-perf's rate would take {_num(b.get('txnbench_cores_to_match_pulsar_perf'))} cores.")
    elif b.get("txnbench_cpu_bound") is False and not b.get("machine_saturated") and not pinned:
        text += (" txnbench's load process used under 80% of a core: the limit is the waits (on a busy machine also "
                 "the wait for a core), not its own CPU.")
    if b.get("txnbench_cpu_bound"):
        text += " txnbench's load process was CPU-bound (80% of a core or more)."
    return "Bottleneck: " + text


def to_markdown(doc: Mapping[str, Any]) -> str:
    c = doc["cluster"]
    lines = [f"# Peer: pulsar-perf and txnbench, {doc['plan'].get('txn_path')} on Pulsar {c.get('release')}", "",
             f"`{doc['id']}`: one `{c.get('target')}` cluster ({c.get('brokers')} brokers), pulsar-perf first, then "
             f"txnbench{', then pulsar-perf again' if doc.get('bracket') else ''}, {doc['plan'].get('threads')} "
             "concurrent clients each.", "",
             "| measure | pulsar-perf | txnbench |", "|---|---:|---:|"]
    lines += [f"| {m} | {a} | {b} |" for m, a, b in rows(doc)]
    lines += [""] + ([bracket_text(doc), ""] if doc.get("bracket") else [])
    lines += [_goal(doc), "", bottleneck_text(doc), "", "## Commands", ""]
    lines += [f"* {k}: `{v}`" for k, v in doc["commands"].items()]
    lines += ["", "## How the load was matched", ""] + [f"* {n}" for n in doc["matching_notes"] or ["no changes"]]
    lines += ["", "## What pulsar-perf cannot tell", ""] + [f"* {n}" for n in doc["pulsar_perf_cannot_tell"]]
    return "\n".join(lines) + "\n"


def to_html(doc: Mapping[str, Any]) -> str:
    e = html.escape
    body = [f"<h1>{e(to_markdown(doc).splitlines()[0].lstrip('# '))}</h1>",
            "<table><tr><th>measure</th><th>pulsar-perf</th><th>txnbench</th></tr>"]
    body += [f"<tr><td>{e(m)}</td><td>{e(a)}</td><td>{e(b)}</td></tr>" for m, a, b in rows(doc)]
    body += ["</table>"] + ([f"<p>{e(bracket_text(doc))}</p>"] if doc.get("bracket") else [])
    body += [f"<p>{e(_goal(doc))}</p>", f"<p>{e(bottleneck_text(doc))}</p>", "<h2>Commands</h2><ul>"]
    body += [f"<li>{e(k)}: <code>{e(v)}</code></li>" for k, v in doc["commands"].items()]
    body += ["</ul><h2>How the load was matched</h2><ul>"] + [f"<li>{e(n)}</li>" for n in doc["matching_notes"]]
    body += ["</ul><h2>What pulsar-perf cannot tell</h2><ul>"]
    body += [f"<li>{e(n)}</li>" for n in doc["pulsar_perf_cannot_tell"]] + ["</ul>"]
    style = ("body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:4px 8px}td+td{text-align:right}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{e(doc['id'])}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
