"""What the brokers' logs say about the transactions that hold read horizons.

Why: a held horizon names its holder and its coordinator's status, which says *that* nobody will
end it, not *why*. The why is in the brokers' ERROR and WARN lines naming the transaction: on
2.10.5 `chaos.yaml` reported 98 lost writes behind `1:1356` (ABORTING), and the cause
(`End transaction fail! ... ManagedLedger ... has already been closed`: an abort that failed on a
topic closed during its buffer's recovery, never retried;
docs/findings/historical/v4-end-abandoned-when-buffer-recovery-fails.md) took a reading of
800,000 log lines by hand. The report now quotes the last few such lines beside the holder (the
latest failures are what left it holding).

Pulsar names a transaction `(most,least)` in its log lines, in 2.10-4.0's messages
(`TxnId : (1,1356)`) and 5.0's structured fields (`txnId=(2,903)`) alike; the exception a line
logs follows it on the next line. Embedded runs have no such logs: nothing is quoted. Bounded:
`PER_HOLDER` lines each, the files read once, line by line.

DEBUG lines naming the holder are quoted too: the brokers write DEBUG for one logger only
(targets/pulsar/conf.py DEBUG_LOGGERS), whose DEBUG line is the only trace of a coordinator giving
up a transaction's timeout (2.10.5 left `1:1317` OPEN with nothing logged above DEBUG;
docs/findings/historical/v4-timeout-lost-after-coordinator-recovery.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

PER_HOLDER = 4
#: `2026-12-04T22:57:04,286 ERROR [thread] o.a.p.b.TransactionMetadataStoreService - message`
LINE = re.compile(r"^(?P<stamp>\S*T(?P<time>\d\d:\d\d:\d\d,\d{3})) +(?P<level>ERROR|WARN|DEBUG) +\[[^\]]*\] +(?P<logger>\S+) - "
                  r"(?P<message>.*)$")
#: the line after an ERROR or WARN line that names the exception it logged
EXCEPTION = re.compile(r"^(?:Caused by: )?[\w.$]+(?:Exception|Error)\b.*")
MAX_TEXT = 320


def broker_lines_naming(logs_dir: Path, holders: Iterable[str]) -> dict[str, list[str]]:
    """Per holder (`most:least`), the last PER_HOLDER distinct ERROR, WARN or DEBUG lines of the brokers' logs
    naming it (the latest failures are what left it holding), in time order, each with the exception
    logged on the line after it."""
    wanted = {f"({h.replace(':', ',')})": h for h in holders if re.fullmatch(r"\d+:\d+", h)}
    found: dict[str, list[tuple[str, str, str]]] = {h: [] for h in wanted.values()}
    if not wanted or not logs_dir.is_dir():
        return {}
    for log in sorted(logs_dir.glob("broker-*.log")):
        _scan(log, wanted, found)
    quoted = {}
    for holder, lines in found.items():
        latest: dict[str, tuple[str, str]] = {}
        for stamp, shape, text in sorted(lines):
            latest.pop(shape, None)
            latest[shape] = (stamp, text)
        if latest:
            quoted[holder] = [text for _stamp, text in list(latest.values())[-PER_HOLDER:]]
    return quoted


def _scan(log: Path, wanted: dict[str, str], found: dict[str, list[tuple[str, str, str]]]) -> None:
    pending: tuple[str, str, str, str] | None = None     # holder, stamp, shape, text awaiting its exception line
    with log.open(errors="replace") as lines:
        for raw in lines:
            if pending is not None:
                holder, stamp, shape, text = pending
                cause = EXCEPTION.match(raw.strip())
                kind = cause.group(0).split(":", 1)[0] if cause else ""
                found[holder].append((stamp, f"{shape} {kind}", _trim(f"{text} ({cause.group(0)})" if cause else text)))
                pending = None
            if "(" not in raw:
                continue
            named = next((h for pattern, h in wanted.items() if pattern in raw), None)
            if named is None or len(found[named]) >= 1000:
                continue
            match = LINE.match(raw.rstrip("\n"))
            if match is None:
                continue
            logger = match["logger"].rsplit(".", 1)[-1]
            message = match["message"].removesuffix(" {}").strip()
            shape = logger + " " + re.sub(r"\d+", "#", message)
            pending = (named, match["stamp"], shape, f"{log.stem} {match['time']} {match['level']} {logger} - {message}")
    if pending is not None:
        holder, stamp, shape, text = pending
        found[holder].append((stamp, f"{shape} ", _trim(text)))


def _trim(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 3] + "..."
