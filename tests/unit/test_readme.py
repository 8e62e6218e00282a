"""README.md stays a front page whose commands are true.

Every `make <target>` the README names is a target of the Makefile, every `txnbench ...`
command line it shows parses with the real argparse parser (orchestrator.cli.build_parser:
its subcommands and options exist), every example a command's `--help` ends with is shown
in the README, and the README is at most 12,000 characters. Nothing is run: the Makefile is
read as text and the command lines only parsed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from orchestrator.cli import EXAMPLES, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
MAX_CHARS = 12_000


def readme() -> str:
    return README.read_text(encoding="utf-8")


def make_targets() -> set[str]:
    """The Makefile's explicit targets (rule heads, .PHONY names), without file or pattern rules."""
    text = MAKEFILE.read_text(encoding="utf-8")
    targets: set[str] = set()
    for line in text.splitlines():
        if line.startswith((" ", "\t", "#")):
            continue
        if line.startswith(".PHONY:"):
            targets.update(line.split(":", 1)[1].split())
            continue
        head = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
        if head:
            targets.update(head.group(1).split())
    return targets


def code(text: str, *, comments: bool = False) -> list[str]:
    """The README's code: each code span (it may wrap a line), and each line of each code
    block, its trailing `# comment` cut unless `comments`."""
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))]
    blocks = [b.replace("\\\n", " ") for b in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)]
    lines = [line if comments else line.split("#", 1)[0] for block in blocks for line in block.splitlines()]
    return [c.strip() for c in spans + lines if c.strip()]


def readme_make_targets(text: str) -> set[str]:
    """Every target of a `make ...` command the README shows, in code and in code comments."""
    names: set[str] = set()
    for snippet in code(text, comments=True):
        for match in re.finditer(r"(?:^|[;&|#:]\s*)make((?:[ \t]+[A-Za-z][A-Za-z0-9_-]*(?:=\S*)?)*)", snippet):
            names.update(word for word in match.group(1).split() if "=" not in word)
    return names


def readme_txnbench_lines(text: str) -> list[str]:
    """Every `txnbench ...` command the README shows; `$(...)` stands for one argument."""
    lines: list[str] = []
    for snippet in code(text):
        snippet = re.sub(r"\$\([^()]*\)", "x", snippet)
        for part in snippet.split(";"):
            part = part.strip()
            if re.match(r"^txnbench\s+\S", part):
                lines.append(part)
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse as `txnbench` would; an unknown command or option fails the test with argparse's message."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            return build_parser().parse_args(argv)
        except SystemExit as exit_:
            if exit_.code == 0:        # --help or --version: printed and done
                return argparse.Namespace()
            pytest.fail(f"`txnbench {' '.join(argv)}` does not parse: {err.getvalue().strip()}")


def argv_of(line: str) -> list[str]:
    """The arguments of one README command line; `[...]` optional parts and placeholders resolved."""
    line = re.sub(r"\[([^\[\]]*)\]", r"\1", line)          # an optional part, shown in brackets: keep it
    words = shlex.split(line.replace("\\\n", " "))[1:]
    out = []
    for word in words:
        word = re.sub(r"<[^<>]*>", "x", word)               # results/<run_id> -> results/x
        out.append(word)
    return out


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """'' for txnbench itself, then 'run', 'bench', ..., 'cluster up', ..."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        found[prefix] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(f"{prefix} {name}".strip(), child)

    walk("", build_parser())
    return found


def test_readme_is_at_most_12000_characters() -> None:
    size = len(readme())
    assert size <= MAX_CHARS, f"README.md is {size} characters; the front page's limit is {MAX_CHARS}"


def test_makefile_parser_sees_the_known_targets() -> None:
    assert {"bench", "test", "setup", "lint", "report"} <= make_targets()


def test_every_make_target_the_readme_names_exists() -> None:
    named = readme_make_targets(readme())
    assert {"bench", "test"} <= named, "the README's two commands are `make bench` and `make test`"
    missing = sorted(named - make_targets())
    assert not missing, f"README.md names make targets the Makefile lacks: {missing}"


def test_every_txnbench_command_the_readme_shows_parses() -> None:
    lines = readme_txnbench_lines(readme())
    assert len(lines) >= 10, lines
    commands = subcommand_parsers()
    for line in lines:
        argv = argv_of(line)
        if " ".join(argv) in commands:     # a command named in prose, e.g. `txnbench worker`
            continue
        parse(argv)


def test_every_option_the_readme_names_exists() -> None:
    options = {opt for parser in subcommand_parsers().values() for action in parser._actions
               for opt in action.option_strings}
    named = {snippet.split()[0].split("=")[0] for snippet in code(readme()) if snippet.startswith("--")}
    missing = sorted(named - options)
    assert not missing, f"README.md names options no txnbench command has: {missing}"


def test_every_help_ends_with_its_example_and_the_readme_shows_it() -> None:
    text = readme()
    parsers = subcommand_parsers()
    for name, parser in parsers.items():
        key = name or "txnbench"
        assert key in EXAMPLES, f"`txnbench {name} --help` has no example"
        example = EXAMPLES[key]
        assert parser.format_help().rstrip().endswith(example), f"`txnbench {name} --help` does not end with it"
        assert example in text, f"README.md does not show the example of `txnbench {name}`: {example}"
        for part in readme_txnbench_lines(example):
            parse(argv_of(part))


def test_the_readme_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme()):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_the_architecture_map_is_linked_from_the_first_screen() -> None:
    first_screen = "\n".join(readme().splitlines()[:25])
    assert "docs/architecture.md" in first_screen
