"""SQL text helpers shared by the frames and the checks: literals, lists, op references.

Everything a check writes goes through these so that values from a history (topic names,
subscription names) reach DuckDB only as quoted literals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from analysis.checks.base import REF_FIELDS

__all__ = ["LONG_REF_FIELDS", "in_list", "literal", "logical_topic", "ordered", "ref", "struct_of"]

LONG_REF_FIELDS = ("index", "time_ns")
_PARTITION_SUFFIX = "-partition-[0-9]+$"


def literal(value: str | int | float | bool | None) -> str:
    """`value` as a SQL literal (strings quoted, quotes doubled)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value.replace("'", "''") + "'"


def in_list(expr: str, values: Iterable[str]) -> str:
    """`expr IN (values)`, never null: false for an empty list or a null `expr` (as Spark's
    `coalesce(isin(...), false)`)."""
    items = sorted(set(values))
    if not items:
        return "false"
    return f"coalesce(({expr}) IN ({', '.join(literal(v) for v in items)}), false)"


def logical_topic(expr: str) -> str:
    """analysis.model.logical_topic in SQL: a topic without its `-partition-N` suffix."""
    return (f"(CASE WHEN contains({expr}, '-partition-') THEN regexp_replace({expr}, '{_PARTITION_SUFFIX}', '') "
            f"ELSE {expr} END)")


def ref(columns: Sequence[str], prefix: str = "", *, f: str | None = None, f_expr: str | None = None,
        time: str | None = None, table: str = "", **overrides: str | None) -> str:
    """analysis.checks.base.ref in SQL: a struct naming one operation (REF_FIELDS, in order).

    Field `x` is column `prefix + x` when `columns` has it, else a typed null; `f` a literal
    operation name (or `f_expr` an expression), `time` the column of its time; keyword overrides
    give an expression, or None for null. `table` qualifies the column names."""
    qualifier = f"{table}." if table else ""
    fields: dict[str, str] = {}
    for name in REF_FIELDS:
        null = "NULL::BIGINT" if name in LONG_REF_FIELDS else "NULL::VARCHAR"
        fields[name] = f'{qualifier}"{prefix + name}"' if prefix + name in columns else null
    if time is not None:
        fields["time_ns"] = time
    if f is not None:
        fields["f"] = literal(f)
    if f_expr is not None:
        fields["f"] = f_expr
    for name, value in overrides.items():
        if name not in fields:
            raise ValueError(f"{name} is not an op reference field")
        fields[name] = value if value is not None else (
            "NULL::BIGINT" if name in LONG_REF_FIELDS else "NULL::VARCHAR")
    casts = {name: "BIGINT" if name in LONG_REF_FIELDS else "VARCHAR" for name in REF_FIELDS}
    return "{" + ", ".join(f"'{name}': ({fields[name]})::{casts[name]}" for name in REF_FIELDS) + "}"


def ordered(keys: Sequence[str]) -> str:
    """An ORDER BY list in Spark's order: ascending keys put nulls first, descending ones last."""
    out = []
    for key in keys:
        lowered = key.strip().lower()
        if lowered.endswith(" desc"):
            out.append(f"{key} NULLS LAST")
        elif lowered.endswith(" asc"):
            out.append(f"{key} NULLS FIRST")
        else:
            out.append(f"{key} ASC NULLS FIRST")
    return ", ".join(out)


def struct_of(fields: Mapping[str, str]) -> str:
    """A struct literal of `fields` (name -> expression), in the mapping's order."""
    return "{" + ", ".join(f"{literal(name)}: {expr}" for name, expr in fields.items()) + "}"
