"""`python -m harness.targets.compose check|write-configs|links [FILE...]`.

check          validate compose files (default: every compose/*.yaml); exit 1 on problems
write-configs  regenerate each file's default Toxiproxy config (x-txnbench.toxiproxy-config)
links          print the Toxiproxy links a file implies, as the run would create them
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.targets.compose.layout import ComposeFileError, load_layout
from harness.targets.compose.links import plan_links, toxiproxy_config_text
from harness.targets.compose.paths import COMPOSE_DIR
from harness.targets.compose.validate import validate_file


def _files(names: list[str]) -> list[Path]:
    return [Path(n) for n in names] if names else sorted(COMPOSE_DIR.glob("*.yaml"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.targets.compose")
    parser.add_argument("command", choices=["check", "write-configs", "links"])
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    status = 0
    for path in _files(args.files):
        try:
            if args.command == "check":
                problems = validate_file(path)
                for problem in problems:
                    print(problem)
                print(f"{path}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
                status = max(status, 1 if problems else 0)
            elif args.command == "write-configs":
                layout = load_layout(path)
                target = layout.default_toxiproxy_config
                if target is None:
                    print(f"{path}: no x-txnbench.toxiproxy-config; skipped", file=sys.stderr)
                    status = 1
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(toxiproxy_config_text(plan_links(layout, {})), encoding="utf-8")
                print(f"{path}: wrote {target}")
            else:
                for link in plan_links(load_layout(path), {}):
                    print(f"{link.name:28} {link.listen:22} -> {link.upstream}")
        except ComposeFileError as err:
            print(err, file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
