"""docs/scenarios.md must be the rendering of harness/config.py, and cover all of it.

The page is generated, so the drift to catch is a committed page older than the config
classes (or the shipped scenarios). The coverage checks find every config dataclass on
their own, by scanning harness.config, so a new block that the renderer failed to reach
fails here rather than going undocumented.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

import harness.config as config_module
from faults.kinds import KINDS
from harness.config import SCENARIO_DIR, WorkloadConfig, available_scenarios
from orchestrator.scenario_doc import REFERENCE_PATH, WRITE_COMMAND, main, render_scenario_reference


def _config_classes() -> list[type]:
    return [cls for _, cls in inspect.getmembers(config_module, inspect.isclass)
            if dataclasses.is_dataclass(cls) and cls.__module__ == config_module.__name__]


def _sections(page: str) -> dict[str, str]:
    """Heading text -> the section's body, for every `## ` section."""
    chunks = re.split(r"^## (.+)$", page, flags=re.MULTILINE)
    return {chunks[i].strip(): chunks[i + 1] for i in range(1, len(chunks), 2)}


def _table(body: str) -> dict[str, list[str]]:
    """Key -> its row's cells (key, type, default, range, meaning), backticks kept."""
    rows: dict[str, list[str]] = {}
    for line in body.splitlines():
        match = re.match(r"^\| `([A-Za-z_]+)` \|", line)
        if match:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            rows[match.group(1)] = cells
    return rows


def _section_of(page: str, cls: type) -> tuple[str, str]:
    found = [(title, body) for title, body in _sections(page).items()
             if f"class `{cls.__name__}`" in body]
    assert len(found) == 1, f"{cls.__name__}: expected one section naming the class, found {len(found)}"
    return found[0]


def test_committed_page_is_current() -> None:
    committed = REFERENCE_PATH.read_text(encoding="utf-8") if REFERENCE_PATH.is_file() else ""
    assert committed == render_scenario_reference(), (
        f"docs/scenarios.md is out of date with harness/config.py or scenarios/; "
        f"run `{WRITE_COMMAND}` and commit the result")


def test_every_field_of_every_config_class_has_a_row() -> None:
    page = render_scenario_reference()
    classes = _config_classes()
    assert len(classes) >= 10  # RunConfig and its nine blocks at least: the scan itself works
    for cls in classes:
        title, body = _section_of(page, cls)
        names = [f.name for f in dataclasses.fields(cls)]
        assert list(_table(body)) == names, f"section {title} ({cls.__name__}) rows differ from its fields"


def test_sections_follow_the_yaml_blocks() -> None:
    titles = list(_sections(render_scenario_reference()))
    assert titles == ["Top level", "`cluster`", "`phases`", "`load`", "`workload`", "`faults`",
                      "`faults.schedule[]`", "`faults.schedule[].flap`", "`faults.schedule[].trigger`",
                      "`faults.schedule[].overlap[]`", "`faults.random`", "`faults.generated`", "`checks`",
                      "`checks.expected[]`",
                      "Shipped scenarios"]


def test_bounded_field_shows_default_range_and_help() -> None:
    page = render_scenario_reference()
    _, body = _section_of(page, WorkloadConfig)
    key, type_text, default, value_range, meaning = _table(body)["hold_s"]
    assert (key, type_text, default, value_range) == ("`hold_s`", "number", "`0.0`", "0..600")
    help_text = next(f for f in dataclasses.fields(WorkloadConfig) if f.name == "hold_s").metadata["help"]
    assert meaning == " ".join(help_text.split())


def test_literal_after_field_is_its_meaning_and_enums_list_values() -> None:
    page = render_scenario_reference()
    _, body = _section_of(page, config_module.LoadConfig)
    rows = _table(body)
    assert rows["rate_per_user"][4].startswith("Transactions per second per user; null runs closed-loop")
    assert rows["rate_per_user"][1] == "number or null"
    _, top = _section_of(page, config_module.RunConfig)
    assert _table(top)["path"][1] == "one of: `v4`, `v4-batched`, `v5`"
    _, expected = _section_of(page, config_module.ExpectedAnomalies)
    assert _table(expected)["reason"][2] == "*required*"


def test_intro_shows_a_real_error_line_and_every_shipped_scenario_is_listed() -> None:
    page = render_scenario_reference()
    assert "txnbench: scenarios/my-bench.yaml: workload.hold_sec: unknown key; did you mean 'hold_s'?" in page
    assert "exit status 2" in page
    _, shipped = next((t, b) for t, b in _sections(page).items() if t == "Shipped scenarios")
    for name in available_scenarios():
        description = config_module.load_scenario(str(SCENARIO_DIR / f"{name}.yaml")).description
        assert f"| [`{name}`](../scenarios/{name}.yaml) | {description} |" in shipped


def test_fault_kinds_come_from_their_registry() -> None:
    """The config keeps a kind as text; the page still lists the kinds, and tables them, from
    faults/kinds/."""
    page = render_scenario_reference()
    _, body = _section_of(page, config_module.FaultSpec)
    assert _table(body)["kind"][1] == "one of: " + ", ".join(f"`{k.name}`" for k in KINDS)
    for kind in KINDS:
        assert f"| **`{kind.name}`** | {kind.summary} |" in body
    _, random_body = _section_of(page, config_module.RandomFaults)
    assert _table(random_body)["kinds"][1] == "list, each " + _table(body)["kind"][1]


def test_main_prints_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert capsys.readouterr().out == render_scenario_reference()
