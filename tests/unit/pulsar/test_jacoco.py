"""JaCoCo's exec-data framing and the dump client, against a fake dump server (no JVM).

The fake answers as `jacoco_dump/DumpServer.java` does: one byte in (1: reset), JaCoCo's
`ExecutionDataWriter` bytes out (its header, a session-info block, one execution-data block per
class with hits), then the end of the stream. The collector is judged by its index: a dump
comes before each kill, a graceful stop is dumped while the JVM shuts down, a life ends with how
it ended and what it lost.
"""

from __future__ import annotations

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
    dump,
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


class FakeServer:
    """The dump server: answers each connection with the hits (emptied on reset); `exit()` ends it."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.port = self.server.getsockname()[1]
        self.hits: dict[str, list[bool]] = {"org/apache/pulsar/A": [True, False, True]}
        self.requests: list[bool] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                asked = conn.recv(1)
                if not asked:
                    continue
                reset = asked == b"\x01"
                self.requests.append(reset)
                conn.sendall(HEADER + session() + b"".join(class_block(i, name, bits) for i, (name, bits)
                                                           in enumerate(self.hits.items()) if any(bits)))
                if reset:
                    self.hits = {name: [False] * len(bits) for name, bits in self.hits.items()}

    def exit(self) -> None:
        self.server.close()


@pytest.fixture
def agent() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.exit()


def test_dump_asks_and_reads_to_the_end(agent: FakeServer) -> None:
    first = dump("127.0.0.1", agent.port, reset=True)
    assert (first.classes, first.probes_hit) == (1, 2)
    assert agent.requests == [True]
    assert dump("127.0.0.1", agent.port).empty          # reset: nothing ran since
    dump("127.0.0.1", agent.port, reset=False)
    assert agent.requests[-1] is False


def test_a_dead_server_is_an_oserror() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OSError):
        dump("127.0.0.1", port, timeout_s=1)


def test_the_collector_dumps_before_a_kill_and_records_the_life(agent: FakeServer, tmp_path: Path) -> None:
    alive = {"broker-0": True}
    collector = CoverageCollector(tmp_path, lambda s: alive[s], dump_every_s=3600)
    collector.started("broker-0", agent.port)
    order: list[str] = []

    def kill() -> None:
        order.append(f"kill after {len(agent.requests)} dumps")
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


def test_a_life_that_exits_on_its_own_is_counted_as_lost(agent: FakeServer, tmp_path: Path) -> None:
    collector = CoverageCollector(tmp_path, lambda s: False, dump_every_s=3600)
    collector.started("ledger", agent.port)
    time.sleep(0.1)
    collector.started("ledger", agent.port)              # the supervisor started it again
    collector.close()
    ends = [e for e in read_index(tmp_path) if e["event"] == "end"]
    assert [e["how"] for e in ends] == ["exited", "exited"]
    assert not ends[0]["dumped"] and ends[0]["unrecorded_s"] >= 0.1
    assert [e["life"] for e in read_index(tmp_path) if e["event"] == "start"] == [1, 2]


def test_periodic_dumps_and_the_final_one(agent: FakeServer, tmp_path: Path) -> None:
    collector = CoverageCollector(tmp_path, lambda s: True, dump_every_s=0.2)
    collector.started("broker-1", agent.port)
    time.sleep(0.7)
    agent.hits["org/apache/pulsar/A"] = [True, True, True]
    collector.close()
    reasons = [e["reason"] for e in read_index(tmp_path) if e["event"] == "dump"]
    assert reasons[0] == "periodic" and reasons[-1] == "final"
    windows = [e for e in read_index(tmp_path) if e["event"] == "dump" and e["ok"]]
    assert all(a["to_ms"] <= b["from_ms"] + 1 for a, b in itertools.pairwise(windows))


def test_a_graceful_stop_is_dumped_while_the_jvm_shuts_down(agent: FakeServer, tmp_path: Path) -> None:
    collector = CoverageCollector(tmp_path, lambda s: True, dump_every_s=3600)
    collector.started("broker-0", agent.port)

    def stop() -> None:
        time.sleep(0.1)
        agent.hits["org/apache/pulsar/A"] = [False, True, False]   # the shutdown unloads a topic
        time.sleep(0.5)
        agent.exit()                                               # the JVM is gone
        time.sleep(0.1)

    collector.before_stop("broker-0", stop)
    dumps = [e for e in read_index(tmp_path) if e["event"] == "dump" and e["ok"]]
    assert dumps[0]["reason"] == "before stop"
    during = [d for d in dumps if d["reason"] == "during stop"]
    assert during and sum(d["probes_hit"] for d in during) == 1
    end = next(e for e in read_index(tmp_path) if e["event"] == "end")
    assert end["how"] == "stop" and end["unrecorded_s"] < 0.5


def test_the_agent_options_name_jacoco_then_the_dump_server_on_loopback() -> None:
    jacoco_option, server_option = jacoco.agent_options(Path("/x/agent.jar"), Path("/x/dump.jar"), 4242)
    assert jacoco_option.startswith("-javaagent:/x/agent.jar=output=none,")
    assert "includes=org.apache.pulsar.*:org.apache.bookkeeper.mledger.*" in jacoco_option
    assert server_option == "-javaagent:/x/dump.jar=127.0.0.1:4242"
