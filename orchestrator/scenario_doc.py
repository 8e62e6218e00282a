"""The scenario key reference (docs/scenarios.md), rendered from the config classes.

Theory of operation. `harness/config.py` is the one place scenario keys are defined:
each key is a field of a frozen dataclass whose type hint, default and metadata
(`min`, `max`, `help`, set by `harness._validate.bounded`) are exactly what the loader
enforces. This module walks the same classes from `RunConfig` down, one Markdown
section per YAML block, so the page cannot name a key the loader rejects, miss one it
accepts, or state another default or range. A field's meaning is its `help` metadata
or, failing that, the string literal written right after it in the class body; Python
drops those literals at runtime, so they are read back from the source with `ast`.
The error example and the list of shipped scenarios are computed too, by the loader
itself. Fault kinds are the faults package's vocabulary (the config holds them as text):
their allowed values and their table come from the kinds' registry, `faults.kinds.KINDS`. `tests/unit/test_scenario_doc.py` compares the committed page with a fresh
rendering, and `python -m orchestrator.scenario_doc --write` regenerates it.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import inspect
import itertools
import re
import sys
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from faults.kinds import BY_NAME, KINDS
from harness.config import SCENARIO_DIR, RunConfig, available_scenarios, parse_scenario
from harness.errors import ConfigError
from harness.txn_paths import ALL_PATHS

REFERENCE_PATH = Path(__file__).resolve().parent.parent / "docs" / "scenarios.md"
WRITE_COMMAND = "python -m orchestrator.scenario_doc --write"
TOP_LEVEL_TITLE = "Top level"

# Parsed by the loader to show a real error line; a typo is the mistake users make most.
_EXAMPLE_SOURCE = "scenarios/my-bench.yaml"
_EXAMPLE_TEXT = "workload:\n  hold_sec: 2\n"

# Keys whose values are a vocabulary another package owns (harness.config keeps them as text).
_VOCABULARIES: Mapping[str, Iterable[str]] = {
    "faults.schedule[].kind": BY_NAME,
    "faults.schedule[].overlap[].kind": BY_NAME,
    "faults.random.kinds": BY_NAME,
}


@dataclass(frozen=True)
class Section:
    """One YAML block: `key` is its dotted path ("" at the top, `[]` marks list items)."""

    key: str
    cls: type

    @property
    def title(self) -> str:
        return f"`{self.key}`" if self.key else TOP_LEVEL_TITLE


def scenario_sections(root: type = RunConfig) -> list[Section]:
    """Every config class reachable from `root`, depth first, in field order.

    Depth first in declaration order puts each block right after the key that opens
    it, which is how a scenario file reads.
    """
    sections: list[Section] = []

    def visit(cls: type, key: str) -> None:
        sections.append(Section(key, cls))
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            nested = _nested_class(hints[f.name])
            if nested is not None:
                child, is_list = nested
                visit(child, _join(key, f.name) + ("[]" if is_list else ""))

    visit(root, "")
    return sections


def render_scenario_reference() -> str:
    """The whole page: intro, one table per YAML block, the shipped scenarios."""
    sections = scenario_sections()
    anchors = {s.key: _anchor(s.title) for s in sections}
    parts = [_intro(sections, anchors)]
    parts.extend(_render_section(s, anchors) for s in sections)
    parts.append(_shipped_scenarios())
    return "\n\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator.scenario_doc",
        description="Print the scenario key reference, or write it to docs/scenarios.md.")
    parser.add_argument("--write", action="store_true", help=f"write {_display(REFERENCE_PATH)}")
    args = parser.parse_args(argv)
    page = render_scenario_reference()
    if args.write:
        REFERENCE_PATH.write_text(page, encoding="utf-8")
        print(f"wrote {_display(REFERENCE_PATH)}")
    else:
        sys.stdout.write(page)
    return 0


# --- sections ---------------------------------------------------------------------------

def _intro(sections: list[Section], anchors: Mapping[str, str]) -> str:
    try:
        parse_scenario(_EXAMPLE_TEXT, source=_EXAMPLE_SOURCE)
    except ConfigError as err:
        example = str(err)
    else:  # the loader accepted a key that does not exist: the intro would lie
        raise AssertionError(f"{_EXAMPLE_TEXT!r} should not load; pick another example")
    contents = ", ".join(f"[{s.title}](#{anchors[s.key]})" for s in sections)
    return "\n".join([
        "# Scenario reference",
        "",
        f"<!-- Generated from harness/config.py by `{WRITE_COMMAND}`; edit the config classes, "
        "not this page. -->",
        "",
        "A scenario is a YAML file saying what to run (workload, load shape, phases, faults, "
        "checks) and against which cluster. `--scenario NAME` finds `scenarios/NAME.yaml`, "
        "looking in `scenarios/` under the current directory first, then in the one shipped with "
        "txnbench; a path to any file works too. Every key is optional unless its default reads "
        "*required*, and a key left out takes its default. Every key is validated before "
        "anything starts: an unknown key, a wrong type or an out-of-range value stops the "
        f"command with one line naming the file, the key and the fix, and exit status {ConfigError.exit_code}, e.g.",
        "",
        "```",
        f"txnbench: {example}",
        "```",
        "",
        "Types: a *number* may be written as an integer; *null* is YAML's `null` (or `~`); a "
        "list is `[a, b]` or `- item` lines; *one of* lists the allowed values. A range "
        "`a..b` includes both ends.",
        "",
        f"Blocks: {contents}, [Shipped scenarios](#shipped-scenarios).",
    ])


def _render_section(section: Section, anchors: Mapping[str, str]) -> str:
    cls = section.cls
    lines = [f"## {section.title}", ""]
    if section.key.endswith("[]"):
        lines += [f"Each item of the list `{section.key[:-2]}` has these keys "
                  f"(class `{cls.__name__}`).", ""]
    else:
        lines += [f"Keys of class `{cls.__name__}`.", ""]
    doc = _class_docstring(cls)
    if doc:
        lines += [*_paragraphs(doc), ""]
    lines += ["| key | type | default | range | meaning |", "|---|---|---|---|---|"]
    hints = typing.get_type_hints(cls)
    literals = _field_literals(cls)
    for f in dataclasses.fields(cls):
        child_key = _join(section.key, f.name)
        cells = (f"`{f.name}`", _type_text(hints[f.name], child_key, anchors), _default_text(f),
                 _range_text(f), f.metadata.get("help") or literals.get(f.name, ""))
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if section.key == "faults.schedule[]":
        lines += ["", *_fault_kinds()]
    return "\n".join(lines)


def _fault_kinds() -> list[str]:
    """The table of fault kinds, one row per entry of their registry (faults/kinds/__init__.py)."""
    lines = ["The fault kinds (`kind`; `faults.random.kinds` draws from the same), from their registry "
             "`faults.kinds.KINDS`. A kind that does not apply to a run's path is left out of its "
             "timeline; one that needs what the target lacks (e.g. processes on an external cluster) "
             "stops the command before anything starts.", "",
             "| kind | what it does | targets | params (default) | paths | needs | healed |",
             "|---|---|---|---|---|---|---|"]
    for kind in KINDS:
        params = "; ".join(f"`{name}` {_yaml_value(p.default) if p.default is not None else '(computed)'}: {p.help}"
                           for name, p in kind.params.items())
        paths = "all" if kind.paths == frozenset(ALL_PATHS) else ", ".join(p.value for p in ALL_PATHS
                                                                          if p in kind.paths)
        needs = ", ".join(sorted(n.value for n in kind.needs))
        healed = "when its window ends" if kind.healable else "no: instant, it stays"
        targets = ", ".join(f"`{t}`" for t in kind.describe_accepts().split(", "))
        cells = (f"**`{kind.name}`**", kind.summary, targets, params, paths, needs, healed)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _shipped_scenarios() -> str:
    lines = ["## Shipped scenarios", "", "In `scenarios/`, each with its `description:`.", "",
             "| scenario | description |", "|---|---|"]
    for name in available_scenarios():
        path = SCENARIO_DIR / f"{name}.yaml"
        config = parse_scenario(path.read_text(encoding="utf-8"), source=str(path), default_name=name)
        lines.append(f"| [`{name}`](../scenarios/{name}.yaml) | {_cell(config.description)} |")
    return "\n".join(lines)


# --- cells ------------------------------------------------------------------------------

def _type_text(hint: Any, key: str, anchors: Mapping[str, str]) -> str:
    """A type hint as a YAML reader thinks of it, nested blocks linked to their section."""
    if hint is Any:
        return "any"
    options = _union_options(hint)
    if options is not None:
        inner = [o for o in options if o is not type(None)]
        text = " or ".join(_type_text(o, key, anchors) for o in inner)
        return f"{text} or null" if len(inner) < len(options) else text
    if dataclasses.is_dataclass(hint):
        return f"mapping, see [`{key}`](#{anchors[key]})"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of: " + ", ".join(f"`{m.value}`" for m in hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        item = args[0]
        if dataclasses.is_dataclass(item):
            return f"list of mappings, see [`{key}[]`](#{anchors[key + '[]']})"
        return f"list, each {_type_text(item, key, anchors)}"
    if origin in (Mapping, dict) or hint in (Mapping, dict):
        key_hint, value_hint = args or (str, Any)
        return (f"mapping of ({_type_text(key_hint, key, anchors)}) "
                f"to ({_type_text(value_hint, key, anchors)})")
    if hint is str and key in _VOCABULARIES:
        return "one of: " + ", ".join(f"`{name}`" for name in _VOCABULARIES[key])
    names = {bool: "boolean", int: "integer", float: "number", str: "text"}
    if hint in names:
        return names[hint]
    raise TypeError(f"{key}: no reference text for type hint {hint!r}; teach _type_text about it")


def _default_text(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return f"`{_yaml_value(f.default)}`"
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        if dataclasses.is_dataclass(value):
            return "its keys' defaults"
        return f"`{_yaml_value(value)}`"
    return "*required*"


def _range_text(f: dataclasses.Field[Any]) -> str:
    lo, hi = f.metadata.get("min"), f.metadata.get("max")
    if lo is not None and hi is not None:
        return f"{_number(lo)}..{_number(hi)}"
    if lo is not None:
        return f">= {_number(lo)}"
    if hi is not None:
        return f"<= {_number(hi)}"
    return ""


def _yaml_value(value: Any) -> str:
    """A default as it would be written in a scenario file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_yaml_value(k)}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return repr(value)


def _number(value: float) -> str:
    """Bounds without float noise: 600 rather than 600.0, 0.1 as written."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# --- reading the classes ----------------------------------------------------------------

def _nested_class(hint: Any) -> tuple[type, bool] | None:
    """The config class a field opens as a block (and whether it is a list of them)."""
    options = _union_options(hint)
    if options is not None:
        found = [n for n in (_nested_class(o) for o in options) if n is not None]
        return found[0] if found else None
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint, False
    args = typing.get_args(hint)
    if (typing.get_origin(hint) is tuple and args and isinstance(args[0], type)
            and dataclasses.is_dataclass(args[0])):
        return args[0], True
    return None


def _union_options(hint: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return None


def _class_node(cls: type) -> ast.ClassDef:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    node = tree.body[0]
    if not isinstance(node, ast.ClassDef):
        raise TypeError(f"{cls.__qualname__}: source does not start with its class statement")
    return node


def _class_docstring(cls: type) -> str:
    """The docstring as written; dataclass() invents one from the signature when there is none."""
    return ast.get_docstring(_class_node(cls)) or ""


def _field_literals(cls: type) -> dict[str, str]:
    """Field name -> the string literal right after the field in the class body."""
    body = _class_node(cls).body
    found: dict[str, str] = {}
    for stmt, following in itertools.pairwise(body):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            found[stmt.target.id] = inspect.cleandoc(following.value.value)
    return found


def _paragraphs(doc: str) -> list[str]:
    """Docstring paragraphs, each on one line, separated by blank lines."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", doc.strip()):
        if out:
            out.append("")
        out.append(" ".join(block.split()))
    return out


def _anchor(title: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
