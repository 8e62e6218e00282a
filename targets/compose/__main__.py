"""`python -m targets.compose check|write-configs|links|scenario [FILE...]`.

check          validate compose files (default: every compose/*.yaml); exit 1 on problems
write-configs  regenerate each file's default Toxiproxy config (x-txnbench.toxiproxy-config)
links          print the Toxiproxy links a file implies, as the run would create them
scenario       write a scenario that runs --base (default: chaos) on one compose file and its
               path only (--out FILE); the nightly workflow runs one per compose file
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from harness.config import resolve_scenario
from targets.compose.layout import ComposeFileError, load_layout
from targets.compose.links import plan_links, toxiproxy_config_text
from targets.compose.txn_files import COMPOSE_DIR
from targets.compose.validate import validate_file


def _files(names: list[str]) -> list[Path]:
    return [Path(n) for n in names] if names else sorted(COMPOSE_DIR.glob("*.yaml"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m targets.compose")
    parser.add_argument("command", choices=["check", "write-configs", "links", "scenario"])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--base", default="chaos", help="scenario: the scenario to derive from")
    parser.add_argument("--out", type=Path, help="scenario: where to write it")
    args = parser.parse_args(argv)
    if args.command == "scenario":
        return _scenario(args)
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


def _scenario(args: argparse.Namespace) -> int:
    """The base scenario on one compose file: its path only, cluster.compose_file set."""
    if len(args.files) != 1 or args.out is None:
        print("scenario needs exactly one compose file and --out FILE", file=sys.stderr)
        return 2
    compose_file = Path(args.files[0])
    if not compose_file.is_file():
        compose_file = COMPOSE_DIR / args.files[0]
    try:
        layout = load_layout(compose_file)
    except ComposeFileError as err:
        print(err, file=sys.stderr)
        return 2
    if layout.txn_path is None:
        print(f"{compose_file}: x-txnbench.path is missing", file=sys.stderr)
        return 2
    data = yaml.safe_load(resolve_scenario(args.base).read_text(encoding="utf-8")) or {}
    data["name"] = f"{data.get('name', args.base)}-{compose_file.stem}"
    data["paths"] = [layout.txn_path.value]
    data["path"] = layout.txn_path.value
    data["target"] = "compose"
    data.setdefault("cluster", {})["compose_file"] = str(compose_file.resolve())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
