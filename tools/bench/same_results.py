"""`python -m tools.bench.same_results BASE OTHER...`: do checks of one history give the same result?

Why: a change of the checker that only makes it faster (issue #45's passes, a Spark setting, a
new engine) must give the same `results.json` on every history it is tried on, the planted,
adversarial and hidden ones included; "same" must not be eyeballed. What may differ between
two checks of one history is how the check ran, never what it found: `checker` (elapsed time,
rate, Spark's master and version, shuffle partitions) and `history.source` (the JSONL, a Parquet
copy it wrote, or one it read). Everything else is compared, and so is each check's `instances/`
folder (the anomalies kept beyond the examples), file by file and line by line.

Each argument is a `results.json`, a folder holding one (a run's `analysis/`, a recheck's
`analysis/check-<stamp>/`), or a run folder (its `analysis/results.json`). Prints each difference
as a dotted path with both values; exit 0 when every OTHER matches BASE, 1 when one differs, 2
when an input cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

#: what may differ between two checks of one history: how the check ran, not what it found
HOW_IT_RAN: tuple[str, ...] = ("checker", "history.source")
RESULTS = "results.json"
INSTANCES = "instances"
#: differences printed per pair before the rest are only counted
SHOWN = 40


class UnreadableResult(Exception):
    """An argument names no readable `results.json`."""


@dataclass(frozen=True)
class RecordedCheck:
    """One check's `results.json`, and the instance files beside it (name -> their lines' objects)."""

    path: Path
    results: dict[str, Any]
    instances: dict[str, list[Any]]


def results_path(given: Path) -> Path:
    """The `results.json` an argument names: the file, the one in a folder, or a run's analysis'."""
    for candidate in (given, given / RESULTS, given / "analysis" / RESULTS):
        if candidate.is_file():
            return candidate
    raise UnreadableResult(f"{given}: no {RESULTS} there (pass a results.json, the folder holding one, "
                           "or a run folder with analysis/results.json)")


def load(given: Path) -> RecordedCheck:
    path = results_path(given)
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UnreadableResult(f"{path}: not readable as JSON ({err})") from err
    if not isinstance(results, dict):
        raise UnreadableResult(f"{path}: not a results object (a JSON {type(results).__name__})")
    folder = path.parent / INSTANCES
    instances: dict[str, list[Any]] = {}
    if folder.is_dir():
        for file in sorted(folder.iterdir()):
            if not file.is_file():
                continue
            try:
                instances[file.name] = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()
                                        if line.strip()]
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                raise UnreadableResult(f"{file}: not readable as JSON lines ({err})") from err
    return RecordedCheck(path, results, instances)


def _without(results: dict[str, Any], ignored: Sequence[str]) -> dict[str, Any]:
    """`results` without the dotted paths of `ignored` (a copy: the caller's stays whole).

    An anomaly's `instances` names its file by the folder the check wrote into (a run's
    `analysis/`, a recheck's `analysis/check-<stamp>/`): that is where the check ran, so only
    the file's name is kept here; its lines are compared on their own (`compare`)."""
    copy: dict[str, Any] = json.loads(json.dumps(results))
    anomalies = copy.get("anomalies")
    if isinstance(anomalies, dict):
        for entry in anomalies.values():
            if isinstance(entry, dict) and isinstance(entry.get("instances"), str):
                entry["instances"] = PurePosixPath(entry["instances"]).name
    for dotted in ignored:
        *parents, leaf = dotted.split(".")
        node: Any = copy
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return copy


def differences(base: Any, other: Any, where: str = "") -> Iterator[str]:
    """Each place where `other` differs from `base`, as `path: base -> other`, in key order."""
    if isinstance(base, dict) and isinstance(other, dict):
        for key in sorted(set(base) | set(other)):
            at = f"{where}.{key}" if where else str(key)
            if key not in other:
                yield f"{at}: {_short(base[key])} -> (missing)"
            elif key not in base:
                yield f"{at}: (missing) -> {_short(other[key])}"
            else:
                yield from differences(base[key], other[key], at)
    elif isinstance(base, list) and isinstance(other, list):
        if len(base) != len(other):
            yield f"{where}: {len(base)} items -> {len(other)} items"
        for i, (mine, theirs) in enumerate(zip(base, other, strict=False)):
            yield from differences(mine, theirs, f"{where}[{i}]")
    elif base != other or type(base) is not type(other):
        yield f"{where}: {_short(base)} -> {_short(other)}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def compare(base: RecordedCheck, other: RecordedCheck, ignored: Sequence[str] = HOW_IT_RAN) -> list[str]:
    """Every difference between two checks: their results (but `ignored`), then their instances."""
    found = list(differences(_without(base.results, ignored), _without(other.results, ignored)))
    for name in sorted(set(base.instances) | set(other.instances)):
        mine, theirs = base.instances.get(name), other.instances.get(name)
        if mine is None or theirs is None:
            found.append(f"{INSTANCES}/{name}: {'(missing)' if mine is None else f'{len(mine)} lines'} -> "
                         f"{'(missing)' if theirs is None else f'{len(theirs)} lines'}")
            continue
        found.extend(f"{INSTANCES}/{name}{where}" for where in differences(mine, theirs))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench.same_results",
        description="Compare checks of one history: exit 0 when each OTHER found what BASE found.")
    parser.add_argument("base", type=Path, help="a results.json, a folder holding one, or a run folder")
    parser.add_argument("others", type=Path, nargs="+", metavar="other", help="the same, to compare with BASE")
    parser.add_argument("--ignore", action="append", default=[], metavar="DOTTED.PATH",
                        help=f"another field that may differ (always ignored: {', '.join(HOW_IT_RAN)}); "
                             "e.g. history.directory for a copy of the run elsewhere")
    args = parser.parse_args(argv)
    ignored = (*HOW_IT_RAN, *args.ignore)
    try:
        base = load(args.base)
        others = [load(path) for path in args.others]
    except UnreadableResult as err:
        print(f"same_results: {err}", file=sys.stderr)
        return 2
    status = 0
    for other in others:
        found = compare(base, other, ignored)
        if not found:
            print(f"same: {other.path} (valid={other.results.get('valid')})")
            continue
        status = 1
        print(f"DIFFERENT: {other.path} from {base.path}, {len(found)} difference(s):")
        for line in found[:SHOWN]:
            print(f"  {line}")
        if len(found) > SHOWN:
            print(f"  ... and {len(found) - SHOWN} more")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
