"""The frames every check reads, as DuckDB tables: analysis.checks.context.prepare in SQL.

Theory of operation. The caller gives a connection holding two relations: `ops`, the
history's events (analysis.model.OPS_COLUMNS, as analysis.columnar converts them), and
`pairs_src`, its operations paired (analysis.columnar_pairs, orphans included). `prepare`
derives the same frames, with the same columns and the same rules, as the Spark checker's
`prepare` (its docstring lists them): the final reads and the visible values, the sends with
their visibility, every transaction decided (analysis.model.transaction_outcomes, then the
coordinator's records and redelivery), the sends and acks with their outcomes, the
observations. Each is a table of the connection named as the frame; a check is SQL over them.

Why tables and not views: DuckDB computes a view again for every query that reads it, and
each frame is read by several checks; a table is computed once (spilled to the temporary
folder when memory is short). `pairs` alone stays a view of the Parquet copy, as the large
Spark check reads its pairs from disk: each reader scans only the columns and kinds it needs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from analysis.checks.base import MAX_EXAMPLES
from analysis.checks.context import (
    DEFAULT_ABORT_BOUND_S,
    DEFAULT_STALL_AFTER_S,
    DEFAULT_TXN_TIMEOUT_S,
    DRAIN_PHASE,
    SENDS_COLUMNS,
    TERMINAL_STATES,
)
from analysis.checks.lookups import latest_readings
from analysis.duck.sql import in_list, literal, logical_topic
from analysis.model import (
    ABORTED,
    COMMITTED,
    COORDINATOR,
    LEAN_PAIR_COLUMNS,
    LIVE_READ_PROCESS,
    NO_COMMIT,
    REDELIVERY,
    TXN_COLUMNS,
    UNKNOWN,
    UNKNOWN_ABORTED,
    UNKNOWN_COMMITTED,
    VISIBILITY,
    DrainInfo,
    HistoryOverview,
    logical,
)
from harness.history.schema import OpF, OpType

__all__ = ["DuckContext", "prepare", "rows_of"]

_OBSERVED = ("writer", "index", "process", "time_ns", "delivered_ns", "topic", "segment", "subscription",
             "msg_id")
_SENT = ("writer", "index", "process", "type", "invoke_ns", "topic", "segment", "msg_id")

_OK, _FAIL, _INFO = literal(OpType.OK.value), literal(OpType.FAIL.value), literal(OpType.INFO.value)
_SEND, _ACK = literal(OpF.SEND.value), literal(OpF.ACK.value)


def q(name: str) -> str:
    """A column name quoted (`index`, `key`, `value` and `type` are words of SQL)."""
    return f'"{name}"'


def cols(names: tuple[str, ...] | list[str], table: str = "") -> str:
    prefix = f"{table}." if table else ""
    return ", ".join(f"{prefix}{q(n)}" for n in names)


def rows_of(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """The rows of `sql` as dicts (structs as dicts, lists as lists)."""
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@dataclass(frozen=True)
class DuckContext:
    """Inputs of the SQL checks: analysis.checks.context.CheckContext with table names for frames.

    The frames are the tables `pairs`, `txns`, `sends`, `acks`, `receives`, `reads`, `visible`,
    `observations` and, when the history has `txn-state` readings, `txn_states`."""

    con: duckdb.DuckDBPyConnection
    drain: DrainInfo
    stall_after_ns: int
    history_end_ns: int | None
    drain_phase_ns: int | None
    overview: HistoryOverview
    max_examples: int = MAX_EXAMPLES
    lost_writers: tuple[str, ...] = ()
    commit_blocked_windows: tuple[tuple[int, int | None], ...] = ()
    has_txn_states: bool = False
    txn_timeout_ns: int = int(DEFAULT_TXN_TIMEOUT_S * 1e9)
    abort_bound_ns: int = int(DEFAULT_ABORT_BOUND_S * 1e9)
    clock_slack_ns: int = 0
    _derived: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _deriving: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def later(self, a: str, b: str) -> str:
        """`a` certainly after `b`, given the clock slack."""
        return f"(({a}) > ({b}) + {self.clock_slack_ns})" if self.clock_slack_ns else f"(({a}) > ({b}))"

    def count(self, what: str) -> int:
        """A count from the overview (CheckContext.count)."""
        return int(self.overview.counts.get(what, 0))

    def drained(self, topic: str, subscription: str) -> str:
        """True when (topic, subscription) was consumed until empty by the drain."""
        return drained(self.drain, topic, subscription)

    def columns(self, table: str) -> list[str]:
        """The columns of a frame, in order."""
        return [row[0] for row in self.con.execute(f"DESCRIBE {table}").fetchall()]

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """The rows of `sql` as dicts. A cursor of its own: checks may run in threads."""
        return rows_of(self.con.cursor(), sql, params)

    def shared(self, name: str, build: Callable[[], str]) -> str:
        """The table of the query `build()` gives, made once per context (CheckContext.shared):
        for a result two checks read."""
        with self._deriving:
            table = self._derived.get(name)
            if table is None:
                table = f"shared_{name}"
                self.con.execute(f"CREATE OR REPLACE TABLE {table} AS {build()}")
                self._derived[name] = table
            return table

    def coordinator_records(self, txns: list[str]) -> dict[str, dict[str, object]]:
        """CheckContext.coordinator_records: the latest `txn-state` reading of each of a few txns."""
        if not self.has_txn_states or not txns:
            return {}
        return latest_readings(self.rows_where("txn_states", "txn", txns))

    def rows_where(self, frame: str, column: str, values: Sequence[str]) -> list[dict[str, Any]]:
        """analysis.checks.lookups.ExampleRows: the rows of a frame whose `column` is one of `values`."""
        return self.rows(f"SELECT * FROM {frame} WHERE {in_list(q(column), values)}") if values else []

    def rows_carrying(self, frame: str, column: str, values: Sequence[str]) -> list[dict[str, Any]]:
        """analysis.checks.lookups.ExampleRows: the rows whose list column `column` holds one of `values`."""
        if not values:
            return []
        wanted = ", ".join(literal(v) for v in sorted(set(values)))
        return self.rows(f"SELECT * FROM {frame} WHERE list_has_any(coalesce({q(column)}, []::VARCHAR[]), "
                         f"[{wanted}]::VARCHAR[])")


def drained(drain: DrainInfo, topic: str, subscription: str) -> str:
    """analysis.checks.context.drained in SQL: never null."""
    if not drain.complete or not drain.subscriptions:
        return "false"
    pairs = sorted({(logical(t), s) for t, s in drain.subscriptions})
    return f"coalesce(({_drained_test(pairs, logical_topic(topic), subscription)}), false)"


def _drained_test(pairs: list[tuple[str, str]], topic: str, subscription: str) -> str:
    """(topic, subscription) among `pairs`, grouped by subscription so the test stays short."""
    by_sub: dict[str, list[str]] = {}
    for t, s in pairs:
        by_sub.setdefault(s, []).append(t)
    parts = [f"(({subscription}) = {literal(s)} AND ({topic}) IN ({', '.join(literal(t) for t in sorted(ts))}))"
             for s, ts in sorted(by_sub.items())]
    return " OR ".join(parts)


def _lone(type_: str = q("type"), visible: str = "visible", covered: str = "covered") -> str:
    """A send outside any transaction is its own unit of atomicity."""
    return (f"(CASE WHEN {type_} = {_OK} THEN {literal(COMMITTED)} WHEN {type_} = {_FAIL} THEN {literal(ABORTED)} "
            f"WHEN {visible} THEN {literal(COMMITTED)} WHEN {covered} THEN {literal(ABORTED)} "
            f"ELSE {literal(UNKNOWN)} END)")


def prepare(con: duckdb.DuckDBPyConnection, facts: HistoryOverview, *,
            stall_after_s: float = DEFAULT_STALL_AFTER_S, max_examples: int = MAX_EXAMPLES,
            lost_writers: tuple[str, ...] = (), clock_slack_ns: int = 0,
            txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S, abort_bound_s: float = DEFAULT_ABORT_BOUND_S,
            commit_blocked_windows: tuple[tuple[int, int | None], ...] = ()) -> DuckContext:
    """Make the frames from `ops` and `pairs_src` in `con` (the module's docstring); `facts` is
    the history's overview (analysis.model.overview_from_row of the validated summary)."""
    drain = facts.drain
    run = con.execute
    run(f"CREATE OR REPLACE VIEW pairs AS SELECT {cols(LEAN_PAIR_COLUMNS)} FROM pairs_src WHERE NOT orphan")
    live = f"coalesce(starts_with(process, {literal(LIVE_READ_PROCESS)}), false)"
    run(f"""CREATE OR REPLACE TABLE reads AS
        SELECT value, topic, segment, msg_id, time_ns, writer, "index", process FROM ops
        WHERE f = {literal(OpF.READ.value)} AND NOT {live}""")
    run("""CREATE OR REPLACE TABLE visible AS
        WITH per_place AS (
            SELECT value, coalesce(topic, '') AS _topic, coalesce(segment, '') AS _segment,
                   coalesce(msg_id, '') AS _msg_id, min(time_ns) AS _first_ns,
                   min({'time_ns': time_ns, 'writer': writer, 'index': "index"}) AS _first, count(*) AS _reads
            FROM reads WHERE value IS NOT NULL GROUP BY value, _topic, _segment, _msg_id)
        SELECT value, min(_first_ns) AS read_ns, min(_first) AS read_pos, sum(_reads)::BIGINT AS reads,
               count(*) AS positions
        FROM per_place GROUP BY value""")
    covered = sorted(drain.topics) if drain.complete else None
    covered_logical = sorted({logical(t) for t in covered}) if covered else []
    covered_sql = in_list(logical_topic("p.topic"), covered_logical)
    live_covered = sorted(drain.live_topics) if drain.complete else []
    if live_covered:
        live_join = f"""LEFT JOIN (SELECT value, min(time_ns) AS live_read_ns FROM ops
                        WHERE f = {literal(OpF.READ.value)} AND {live} AND value IS NOT NULL GROUP BY value) l
                        ON l.value = p.value"""
        live_cols = (f"l.live_read_ns, l.live_read_ns IS NOT NULL AS live_visible, "
                     f"{in_list(logical_topic('p.topic'), [logical(t) for t in live_covered])} AS live_covered")
    else:
        live_join = ""
        live_cols = "NULL::BIGINT AS live_read_ns, false AS live_visible, false AS live_covered"
    run(f"""CREATE OR REPLACE TABLE send_vis AS
        SELECT p.value, p.writer, p."index", p.process, p."type", p.txn, p.topic, p.segment, p."key", p.inputs,
               p.msg_id, p.invoke_ns, v.read_ns, v.read_pos, v.read_ns IS NOT NULL AS visible,
               {covered_sql} AS covered, {live_cols}
        FROM pairs p LEFT JOIN visible v ON v.value = p.value {live_join}
        WHERE p.f = {_SEND}""")
    run("""CREATE OR REPLACE TABLE receives AS
        SELECT value, topic, segment, subscription, msg_id, time_ns, writer, "index", process,
               least(coalesce(delivered_ns, time_ns), time_ns) AS delivered_ns
        FROM ops WHERE f = 'receive'""")
    _transaction_outcomes(con, covered)
    has_states = bool(facts.counts.get("txn_states", 0))
    if has_states:
        run(f"""CREATE OR REPLACE TABLE txn_states AS
            SELECT txn, time_ns, writer, "index", process, json_extract_string(extra, '$.status') AS status, error
            FROM ops WHERE f = {literal(OpF.TXN_STATE.value)}""")
        terminal = ", ".join(literal(s) for s in TERMINAL_STATES)
        _with_decisions(con, f"""SELECT txn, min(_o) AS _decision FROM (
            SELECT txn, CASE WHEN status = 'COMMITTED' THEN {literal(COMMITTED)} ELSE {literal(ABORTED)} END AS _o
            FROM txn_states WHERE status IN ({terminal})) GROUP BY txn HAVING min(_o) = max(_o)""", COORDINATOR)
    if facts.counts.get("acks", 0) and drain.complete:
        _with_decisions(con, _redelivery_decisions(drain), REDELIVERY)
    lone = _lone('s."type"', "s.visible", "s.covered")
    run(f"""CREATE OR REPLACE TABLE sends AS
        SELECT {', '.join(_send_column(c, lone) for c in SENDS_COLUMNS)}
        FROM send_vis s LEFT JOIN txns t ON t.txn = s.txn""")
    observed = ", ".join(f'r.{q(c)} AS o_{c}' for c in _OBSERVED)
    sent = ", ".join(f's.{q(c)} AS s_{c}' for c in _SENT)
    run(f"""CREATE OR REPLACE TABLE observations AS
        SELECT r.value, 'receive' AS kind, {observed}, {sent}, s.txn,
               CASE WHEN s.value IS NULL THEN NULL::VARCHAR
                    WHEN s.txn IS NULL THEN {_lone('s."type"', 's.visible', 's.covered')}
                    ELSE coalesce(t.outcome, {literal(UNKNOWN)}) END AS outcome,
               t.decided_by, t.commit_invoke_ns, s.value IS NOT NULL AS sent
        FROM receives r LEFT JOIN send_vis s ON s.value = r.value LEFT JOIN txns t ON t.txn = s.txn""")
    topic = "a.topic"
    join_topic = ""
    if facts.counts.get("acks_without_topic", 0):
        topic = "coalesce(a.topic, st._send_topic)"
        join_topic = "LEFT JOIN (SELECT value, topic AS _send_topic FROM sends) st ON st.value = a.value"
    run(f"""CREATE OR REPLACE TABLE acks AS
        SELECT a.value, a.writer, a."index", a.process, a."type", a.txn, {topic} AS topic, a.segment, a.subscription,
               a.msg_id, coalesce(a.cumulative, false) AS cumulative, a.invoke_ns,
               coalesce(t.outcome, {literal(UNKNOWN)}) AS outcome,
               coalesce(t.client_outcome, {literal(UNKNOWN)}) AS client_outcome, t.end_ns, t.commit_invoke_ns
        FROM pairs a {join_topic} LEFT JOIN txns t ON t.txn = a.txn
        WHERE a.f = {_ACK}""")
    marks = [m for m in facts.phases if m.name == DRAIN_PHASE]
    return DuckContext(
        con=con, drain=drain, stall_after_ns=int(stall_after_s * 1e9), history_end_ns=facts.last_ns,
        drain_phase_ns=marks[0].time_ns if marks else None, overview=facts, max_examples=max_examples,
        lost_writers=tuple(lost_writers), commit_blocked_windows=tuple(commit_blocked_windows),
        has_txn_states=has_states, txn_timeout_ns=int(txn_timeout_s * 1e9), abort_bound_ns=int(abort_bound_s * 1e9),
        clock_slack_ns=int(clock_slack_ns))


def _send_column(name: str, lone: str) -> str:
    if name == "outcome":
        return f"CASE WHEN s.txn IS NULL THEN {lone} ELSE coalesce(t.outcome, {literal(UNKNOWN)}) END AS outcome"
    if name in ("decided_by", "commit_invoke_ns"):
        return f"t.{name}"
    return f"s.{q(name)}"


def _transaction_outcomes(con: duckdb.DuckDBPyConnection, covered: list[str] | None) -> None:
    """analysis.model.transaction_outcomes over `send_vis` and `pairs`: the table `txns`."""
    commit, abort, open_ = literal(OpF.TXN_COMMIT.value), literal(OpF.TXN_ABORT.value), literal(OpF.TXN_OPEN.value)
    logical_covered = sorted({logical(t) for t in covered}) if covered is not None else None
    visible = "coalesce(_visible, false)"
    maybe_written = f"(f = {_SEND} AND \"type\" IN ({_OK}, {_INFO}))"
    if logical_covered is not None:
        uncovered = (f"({maybe_written} AND NOT {visible} AND (NOT {in_list(logical_topic('topic'), logical_covered)} "
                     f"OR topic IS NULL))")
    else:
        uncovered = "false"
    on_covered = in_list(logical_topic("topic"), logical_covered or [])
    ok_unseen = f"(f = {_SEND} AND \"type\" = {_OK} AND NOT {visible})"
    commit_ok, abort_ok = f"(f = {commit} AND \"type\" = {_OK})", f"(f = {abort} AND \"type\" = {_OK})"
    commit_fail = f"(f = {commit} AND \"type\" = {_FAIL})"
    open_ok = f"(f = {open_} AND \"type\" = {_OK})"

    def some(cond: str) -> str:
        return f"max(CASE WHEN {cond} THEN 1 ELSE 0 END)"

    def least(cond: str, column: str) -> str:
        return f"min(CASE WHEN {cond} THEN {column} END)"

    def n(cond: str) -> str:
        return f"sum(CASE WHEN {cond} THEN 1 ELSE 0 END)::BIGINT"

    if logical_covered is not None:
        none_possible = "((sends_ok + sends_info) > 0 AND sends_uncovered = 0)"
    else:
        none_possible = "false"
    c, a, u = literal(COMMITTED), literal(ABORTED), literal(UNKNOWN)
    con.execute(f"""CREATE OR REPLACE TABLE txns AS
        WITH tx AS (
            SELECT txn, {_SEND} AS f, "type", invoke_ns, NULL::BIGINT AS complete_ns, writer, "index", process,
                   topic, inputs, visible AS _visible
            FROM send_vis WHERE txn IS NOT NULL
            UNION ALL
            SELECT txn, f, "type", invoke_ns, complete_ns, writer, "index", process, topic, inputs, NULL::BOOLEAN
            FROM pairs WHERE txn IS NOT NULL AND f <> {literal(OpF.TXN_STATE.value)} AND f <> {_SEND}),
        flagged AS (
            SELECT txn, f, "type", invoke_ns, complete_ns, writer, "index", process,
                   ({maybe_written} AND {visible}) AS _seen, {uncovered} AS _uncovered,
                   ({ok_unseen} AND {on_covered}) AS _ok_missing, ({ok_unseen} AND NOT {on_covered}) AS _ok_uncovered,
                   (f = {_SEND} AND len(coalesce(inputs, []::VARCHAR[])) > 0) AS _carries
            FROM tx),
        shares AS (
            SELECT txn, writer, process, min(invoke_ns) AS _first_ns, min("index") AS _first_index,
                   {least(f"f = {open_}", "invoke_ns")} AS _open_ns, {least(f"f = {open_}", '"index"')} AS _open_index,
                   {least(f"f = {commit}", "invoke_ns")} AS commit_invoke_ns,
                   {least(f"f IN ({commit}, {abort})", "invoke_ns")} AS end_invoke_ns,
                   {some(commit_ok)} AS _commit_ok, {some(f"{abort_ok} OR {commit_fail}")} AS _aborted,
                   {some(f"{commit_ok} OR {abort_ok}")} AS _ended_ok,
                   {least(commit_ok, "complete_ns")} AS _commit_ns,
                   {least(f"{abort_ok} OR {commit_fail}", "complete_ns")} AS _abort_ns,
                   {n(f'f = {_SEND} AND "type" = {_OK}')} AS sends_ok,
                   {n(f'f = {_SEND} AND "type" = {_INFO}')} AS sends_info,
                   {n(f'f = {_SEND} AND "type" = {_FAIL}')} AS sends_fail,
                   {n("_seen")} AS sends_visible, {n("_uncovered")} AS sends_uncovered,
                   {n("_ok_missing")} AS sends_ok_missing, {n("_ok_uncovered")} AS sends_ok_uncovered,
                   {n(f"f = {_ACK}")} AS acks, {some("_carries")} AS ctp,
                   {n(open_ok)} AS opens_ok, {least(open_ok, "invoke_ns")} AS ok_open_invoke_ns,
                   {least(open_ok, "complete_ns")} AS ok_open_complete_ns
            FROM flagged GROUP BY txn, writer, process),
        agg AS (
            SELECT txn,
                   min({{'invoke_ns': _first_ns, 'writer': writer, 'index': _first_index, 'process': process}}) AS _first,
                   min(CASE WHEN _open_ns IS NOT NULL THEN {{'invoke_ns': _open_ns, 'index': _open_index}} END) AS _open,
                   min(commit_invoke_ns) AS commit_invoke_ns, min(end_invoke_ns) AS end_invoke_ns,
                   min(_commit_ns) AS _commit_ns, min(_abort_ns) AS _abort_ns,
                   min(ok_open_invoke_ns) AS ok_open_invoke_ns, min(ok_open_complete_ns) AS ok_open_complete_ns,
                   max(_commit_ok) > 0 AS _commit_ok, max(_aborted) > 0 AS _aborted, max(_ended_ok) > 0 AS _ended_ok,
                   max(ctp) > 0 AS ctp,
                   sum(sends_ok)::BIGINT AS sends_ok, sum(sends_info)::BIGINT AS sends_info,
                   sum(sends_fail)::BIGINT AS sends_fail, sum(sends_visible)::BIGINT AS sends_visible,
                   sum(sends_uncovered)::BIGINT AS sends_uncovered, sum(sends_ok_missing)::BIGINT AS sends_ok_missing,
                   sum(sends_ok_uncovered)::BIGINT AS sends_ok_uncovered, sum(acks)::BIGINT AS acks,
                   sum(opens_ok)::BIGINT AS opens_ok
            FROM shares GROUP BY txn),
        client AS (
            SELECT *, CASE WHEN _commit_ok THEN {c} WHEN _aborted THEN {a} ELSE {u} END AS client_outcome FROM agg),
        decided AS (
            SELECT *, CASE WHEN client_outcome <> {u} THEN client_outcome
                           WHEN commit_invoke_ns IS NULL THEN {a}
                           WHEN sends_visible > 0 THEN {c}
                           WHEN {none_possible} THEN {a} ELSE {u} END AS outcome
            FROM client)
        SELECT txn, _first.writer AS writer, _first.process AS process, _open."index" AS open_index,
               _open.invoke_ns AS open_ns, commit_invoke_ns, end_invoke_ns,
               CASE WHEN client_outcome = {c} THEN _commit_ns WHEN client_outcome = {a} THEN _abort_ns END AS end_ns,
               client_outcome, outcome,
               CASE WHEN client_outcome <> {u} THEN 'client' WHEN commit_invoke_ns IS NULL THEN {literal(NO_COMMIT)}
                    WHEN outcome <> {u} THEN {literal(VISIBILITY)} END AS decided_by,
               CASE WHEN client_outcome <> {u} THEN client_outcome WHEN outcome = {c} THEN {literal(UNKNOWN_COMMITTED)}
                    WHEN outcome = {a} THEN {literal(UNKNOWN_ABORTED)} ELSE {u} END AS outcome_label,
               sends_ok, sends_info, sends_fail, sends_visible, sends_uncovered, sends_ok_missing, sends_ok_uncovered,
               acks, ctp, opens_ok, ok_open_invoke_ns, ok_open_complete_ns, _ended_ok AS ended_ok
        FROM decided""")


def _with_decisions(con: duckdb.DuckDBPyConnection, decisions: str, by: str) -> None:
    """analysis.checks.context.with_decisions: `txns` with the outcomes `decisions` (txn,
    `_decision`) gave to transactions whose client does not know theirs and invoked the commit."""
    decision = f"(CASE WHEN t.client_outcome = {literal(UNKNOWN)} AND t.commit_invoke_ns IS NOT NULL THEN d._decision END)"
    replaced = {
        "outcome": f"coalesce({decision}, t.outcome)",
        "decided_by": f"CASE WHEN {decision} IS NOT NULL THEN {literal(by)} ELSE t.decided_by END",
        "outcome_label": (f"CASE WHEN {decision} = {literal(COMMITTED)} THEN {literal(UNKNOWN_COMMITTED)} "
                          f"WHEN {decision} = {literal(ABORTED)} THEN {literal(UNKNOWN_ABORTED)} "
                          "ELSE t.outcome_label END"),
    }
    select = ", ".join(f"{replaced[c]} AS {c}" if c in replaced else f"t.{q(c)}" for c in TXN_COLUMNS)
    con.execute(f"CREATE OR REPLACE TABLE _decided AS SELECT {select} FROM txns t "
                f"LEFT JOIN ({decisions}) d ON d.txn = t.txn")
    con.execute("DROP TABLE txns")
    con.execute("ALTER TABLE _decided RENAME TO txns")


def _redelivery_decisions(drain: DrainInfo) -> str:
    """analysis.checks.context.redelivery_decisions: txn, `_decision` for the ack-only transactions
    of unknown outcome their subscriptions decide."""
    judgeable = (f'(a."type" = {_OK} AND NOT coalesce(a.cumulative, false) AND a.subscription IS NOT NULL '
                 f'AND {drained(drain, "a.topic", "a.subscription")})')
    return f"""
        WITH undecided AS (
            SELECT txn FROM txns WHERE outcome = {literal(UNKNOWN)} AND commit_invoke_ns IS NOT NULL
                AND (sends_ok + sends_info) = 0 AND acks > 0),
        per_ack AS (
            SELECT a.txn, a.writer, a."index",
                   bool_or(coalesce(r.delivered_ns > a.invoke_ns, false)) AS _back,
                   bool_and({judgeable}) AS _judgeable
            FROM pairs a LEFT JOIN receives r ON r.value = a.value AND r.subscription = a.subscription
            WHERE a.f = {_ACK} AND a.txn IN (SELECT txn FROM undecided)
            GROUP BY a.txn, a.writer, a."index")
        SELECT txn, CASE WHEN bool_or(_back) THEN {literal(ABORTED)} ELSE {literal(COMMITTED)} END AS _decision
        FROM per_ack GROUP BY txn HAVING bool_and(_judgeable)"""
