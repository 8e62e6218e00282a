"""JaCoCo's exec-data framing and the dump client, against a fake agent (no JVM).

The fake speaks what `org.jacoco.core.runtime.RemoteControlWriter` writes: its header, then per
dump command a session-info block, one execution-data block per class with hits, and CMDOK;
on a graceful exit it pushes one more dump to the connected client. The collector is judged by
its index: a dump comes before each kill, a life ends with how it ended and what it lost.
"""

from __future__ import annotations

import io
import itertools
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from targets.pulsar import jacoco
from targets.pulsar.jacoco import (
    HEADER,
    CoverageCollector,
    ExecFormatError,
    ExitWatch,
    dump,
    dump_command,
    parse_exec,
    read_index,
)


def utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def varint(value: int) -> bytes:
    out = bytearray()
    while value & ~0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def probes(bits: list[bool]) -> bytes:
    packed = bytearray()
    for i in range(0, len(bits), 8):
        packed.append(sum(1 << j for j, b in enumerate(bits[i:i + 8]) if b))
    return varint(len(bits)) + bytes(packed)


def session(name: str = "vm-1") -> bytes:
    return b"\x10" + utf(name) + struct.pack(">qq", 1000, 2000)


def class_block(class_id: int, name: str, bits: list[bool]) -> bytes:
    return b"\x11" + struct.pack(">q", class_id) + utf(name) + probes(bits)


def test_dump_command_is_header_then_dump_and_reset_flags() -> None:
    assert dump_command(True, True) == bytes.fromhex("01c0c01007") + bytes([0x40, 1, 1])
    assert dump_command(True, False)[-2:] == b"\x01\x00"


def test_an_exec_file_parses_and_counts_hits() -> None:
    bits = [True] * 3 + [False] * 7 + [True] * 200       # 210 probes: a varint of two bytes
    data = HEADER + session() + class_block(7, "org/apache/pulsar/A", bits) + class_block(8, "B", [False, True])
    parsed = parse_exec(data)
    assert parsed.sessions == ["vm-1"]
    assert (parsed.classes, parsed.probes_hit) == (2, 204)
    assert parsed.data == data                            # byte for byte: what the file holds


def test_a_concatenated_file_repeats_its_header_and_still_parses() -> None:
    one = HEADER + session() + class_block(1, "A", [True])
    assert parse_exec(one + one).classes == 2


@pytest.mark.parametrize("data, why", [
    (b"\x01\xc0\xc1\x10\x07", "not JaCoCo"),
    (b"\x01\xc0\xc0\x10\x06", "format"),
    (HEADER + b"\x77", "unknown block"),
])
def test_bad_data_is_refused_by_name(data: bytes, why: str) -> None:
    with pytest.raises(ExecFormatError, match=why):
        parse_exec(data)


def test_a_torn_block_is_an_eof() -> None:
    with pytest.raises(EOFError):
        parse_exec(HEADER + class_block(1, "A", [True] * 16)[:-1])


def test_the_answer_stops_at_cmdok() -> None:
    stream = io.BytesIO(session() + class_block(1, "A", [True]) + b"\x20" + b"trailing")
    result = jacoco.read_blocks(stream, until_ok=True)
    assert result.complete and result.classes == 1
    assert stream.read() == b"trailing"


class FakeAgent:
    """A tcpserver agent: answers dumps with `classes` (emptied on reset), pushes at `exit()`."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.port = self.server.getsockname()[1]
        self.hits: dict[str, list[bool]] = {"org/apache/pulsar/A": [True, False, True]}
        self.commands: list[tuple[bool, bool]] = []
        self.watchers: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _answer(self) -> bytes:
        body = session() + b"".join(class_block(i, name, bits) for i, (name, bits) in enumerate(self.hits.items())
                                    if any(bits))
        return body + b"\x20"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.sendall(HEADER)
            stream = conn.makefile("rb")
            if stream.read(5) != HEADER:
                conn.close()
                continue
            self.watchers.append(conn)
            while True:
                command = stream.read(3)
                if len(command) < 3:
                    break
                dump_flag, reset = bool(command[1]), bool(command[2])
                self.commands.append((dump_flag, reset))
                conn.sendall(self._answer())
                if reset:
                    self.hits = {name: [False] * len(bits) for name, bits in self.hits.items()}
            self.watchers.remove(conn)
            conn.close()

    def exit(self) -> None:
        """The JVM exits gracefully: the agent pushes its data to the connected client."""
        for conn in list(self.watchers):
            conn.sendall(self._answer())
            conn.close()
        self.close()

    def close(self) -> None:
        self._stop.set()
        self.server.close()


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    fake = FakeAgent()
    yield fake
    fake.close()


def test_dump_asks_and_reads_one_answer(agent: FakeAgent) -> None:
    first = dump("127.0.0.1", agent.port, reset=True)
    assert (first.classes, first.probes_hit, first.complete) == (1, 2, True)
    assert agent.commands == [(True, True)]
    assert dump("127.0.0.1", agent.port).empty          # reset: nothing ran since


def test_a_dead_agent_is_an_oserror() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OSError):
        dump("127.0.0.1", port, timeout_s=1)


def test_the_exit_watch_keeps_what_the_agent_pushes(agent: FakeAgent) -> None:
    watch = ExitWatch("127.0.0.1", agent.port)
    time.sleep(0.2)
    agent.exit()
    pushed = watch.collect(timeout_s=2)
    assert pushed is not None and pushed.classes == 1


def test_the_collector_dumps_before_a_kill_and_records_the_life(agent: FakeAgent, tmp_path: Path) -> None:
    alive = {"broker-0": True}
    collector = CoverageCollector(tmp_path, lambda s: alive[s], dump_every_s=3600)
    collector.started("broker-0", agent.port)
    order: list[str] = []

    def kill() -> None:
        order.append(f"kill after {len(agent.commands)} dumps")
        alive["broker-0"] = False

    collector.before_kill("broker-0", kill)
    assert order == ["kill after 1 dumps"]
    index = read_index(tmp_path)
    dumps = [e for e in index if e["event"] == "dump"]
    assert dumps[0]["reason"] == "before kill" and dumps[0]["ok"] and dumps[0]["classes"] == 1
    assert (tmp_path / dumps[0]["file"]).is_file()
    end = next(e for e in index if e["event"] == "end")
    assert end["how"] == "kill" and end["dumped"] and end["unrecorded_s"] < 1
    collector.close()


def test_a_life_that_exits_on_its_own_is_counted_as_lost(agent: FakeAgent, tmp_path: Path) -> None:
    collector = CoverageCollector(tmp_path, lambda s: False, dump_every_s=3600)
    collector.started("ledger", agent.port)
    time.sleep(0.1)
    collector.started("ledger", agent.port)              # the supervisor started it again
    collector.close()
    ends = [e for e in read_index(tmp_path) if e["event"] == "end"]
    assert [e["how"] for e in ends] == ["exited", "exited"]
    assert not ends[0]["dumped"] and ends[0]["unrecorded_s"] >= 0.1
    assert [e["life"] for e in read_index(tmp_path) if e["event"] == "start"] == [1, 2]


def test_periodic_dumps_and_the_final_one(agent: FakeAgent, tmp_path: Path) -> None:
    collector = CoverageCollector(tmp_path, lambda s: True, dump_every_s=0.2)
    collector.started("broker-1", agent.port)
    time.sleep(0.7)
    agent.hits["org/apache/pulsar/A"] = [True, True, True]
    collector.close()
    reasons = [e["reason"] for e in read_index(tmp_path) if e["event"] == "dump"]
    assert reasons[0] == "periodic" and reasons[-1] == "final"
    windows = [e for e in read_index(tmp_path) if e["event"] == "dump" and e["ok"]]
    assert all(a["to_ms"] <= b["from_ms"] + 1 for a, b in itertools.pairwise(windows))


def test_a_graceful_stop_saves_the_exit_push(agent: FakeAgent, tmp_path: Path) -> None:
    collector = CoverageCollector(tmp_path, lambda s: True, dump_every_s=3600)
    collector.started("broker-0", agent.port)

    def stop() -> None:
        agent.hits["org/apache/pulsar/A"] = [False, True, False]   # what ran up to the agent's exit hook
        time.sleep(0.1)
        agent.exit()
        time.sleep(0.3)                                            # the JVM's shutdown after the push

    collector.before_stop("broker-0", stop)
    dumps = [e for e in read_index(tmp_path) if e["event"] == "dump"]
    assert [d["reason"] for d in dumps] == ["before stop", "exit push"]
    assert dumps[1]["probes_hit"] == 1
    end = next(e for e in read_index(tmp_path) if e["event"] == "end")
    assert end["how"] == "stop" and 0.3 <= end["unrecorded_s"] < 2


def test_the_agent_option_names_a_tcpserver_on_loopback() -> None:
    option = jacoco.agent_option(Path("/x/agent.jar"), 4242)
    assert option.startswith("-javaagent:/x/agent.jar=output=tcpserver,address=127.0.0.1,port=4242,")
    assert "includes=org.apache.pulsar.*:org.apache.bookkeeper.mledger.*" in option
