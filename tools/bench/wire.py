"""Micro-benchmark of the wire layer: `python -m tools.bench.wire [--payload-size N] ...`.

Measures what the client and the broker spend per frame, through the public API only:

* SEND encode: a producer builds the metadata and the SEND, `Connection.send` frames it;
* SEND decode: a broker's `Connection` cuts and decodes it, verifying the checksum (it
  does not parse the metadata: a broker stores the entry as is);
* MESSAGE encode: a broker dispatches a stored entry (no re-encoding of the entry);
* MESSAGE decode: a consumer decodes it, parses the metadata and unpacks the messages.

Each is run single (one message per frame) and batched (`--batch-size` messages per
entry). Rates are best-of-`--repeat` runs of `--frames` frames; MB/s counts frame bytes
(1 MB = 10^6 bytes); msgs/s counts messages. Single process, single thread.

Rates are per CPU-second of this process (`time.process_time`), which on an idle
machine equals wall-clock time and on a shared one is not distorted by other
processes; the last column gives the wall-clock µs per frame for comparison.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.wire import commands
from harness.wire.batch import BatchMessage, encode_batch, unpack_messages
from harness.wire.connection import Connection
from harness.wire.events import Command
from harness.wire.ids import MessageId
from harness.wire.payload import Payload
from harness.wire.rules import Role


@dataclass(frozen=True)
class Result:
    """One measured case."""

    name: str
    frames: int
    messages: int
    frame_bytes: int
    seconds: float  # CPU time
    wall_seconds: float

    def row(self) -> str:
        """A table row: frames/s, msgs/s, MB/s, CPU µs per frame, wall µs per frame."""
        return (
            f"{self.name:<28} {self.frames / self.seconds:>11,.0f} {self.messages / self.seconds:>11,.0f} "
            f"{self.frame_bytes / self.seconds / 1e6:>8,.1f} {self.seconds / self.frames * 1e6:>9.2f} "
            f"{self.wall_seconds / self.frames * 1e6:>9.2f}"
        )


def _ready_pair() -> tuple[Connection, Connection]:
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    server.receive_data(client.send(commands.connect()))
    server.next_event()
    client.receive_data(server.send(commands.connected()))
    client.next_event()
    return client, server


class _Clock:
    """CPU and wall time of one run."""

    def __init__(self) -> None:
        self.cpu = time.process_time()
        self.wall = time.perf_counter()

    def stop(self) -> tuple[float, float]:
        return time.process_time() - self.cpu, time.perf_counter() - self.wall


def _best(repeat: int, run: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    runs = [run() for _ in range(repeat)]
    return min(cpu for cpu, _ in runs), min(wall for _, wall in runs)


def _payload_bytes(size: int, index: int) -> bytes:
    head = f'{{"v": "value-{index}", "i": [], "p": "'.encode()
    return head + b"x" * max(0, size - len(head) - 2) + b'"}'


def _send_event(
    producer_id: int, sequence: int, bodies: list[bytes], keys: list[str], now_ms: int
) -> Command:
    if len(bodies) == 1:
        metadata = commands.message_metadata("bench-producer", sequence, now_ms)
        return commands.send(producer_id, sequence, metadata, bodies[0])
    data, count = encode_batch(
        BatchMessage(body, key=key) for body, key in zip(bodies, keys, strict=True)
    )
    metadata = commands.message_metadata(
        "bench-producer", sequence, now_ms, num_messages_in_batch=count
    )
    return commands.send(producer_id, sequence, metadata, data)


def run_case(batch: int, size: int, frames: int, repeat: int) -> list[Result]:
    """The four measurements for one batch size."""
    label = "single" if batch <= 1 else f"batch of {batch}"
    per_frame = max(1, batch)
    now_ms = int(time.time() * 1000)

    client, server = _ready_pair()
    # Message bodies are made beforehand: the run measures the wire layer, not f-strings.
    bodies = [[_payload_bytes(size, f * per_frame + i) for i in range(per_frame)] for f in range(frames)]
    keys = [f"key-{i}" for i in range(per_frame)]

    def encode_sends() -> tuple[float, float]:
        clock = _Clock()
        for sequence in range(frames):
            client.send(_send_event(1, sequence, bodies[sequence], keys, now_ms))
        return clock.stop()

    send_seconds = _best(repeat, encode_sends)
    sends = [client.send(_send_event(1, sequence, bodies[sequence], keys, now_ms))
             for sequence in range(frames)]
    send_stream = b"".join(sends)

    def decode_sends() -> tuple[float, float]:
        _, broker = _ready_pair()
        clock = _Clock()
        broker.receive_data(send_stream)
        count = 0
        for event in broker.events():
            payload = event.payload  # type: ignore[union-attr]
            if payload is not None and payload.checksum_ok:
                count += 1
        elapsed = clock.stop()
        assert count == frames, f"decoded {count} of {frames} SEND frames"
        return elapsed

    send_decode_seconds = _best(repeat, decode_sends)

    # The broker's stored entries, re-read from the ledger without re-verifying.
    entries = []
    server.receive_data(send_stream)
    for event in server.events():
        assert event.payload is not None  # type: ignore[union-attr]
        entries.append(bytes(event.payload.entry))  # type: ignore[union-attr]

    def encode_messages() -> tuple[float, float]:
        clock = _Clock()
        for index, entry in enumerate(entries):
            payload = Payload.parse(entry, verify=False)
            server.send(commands.message(7, MessageId(3, index), payload))
        return clock.stop()

    message_seconds = _best(repeat, encode_messages)
    message_stream = b"".join(
        server.send(commands.message(7, MessageId(3, i), Payload.parse(e, verify=False)))
        for i, e in enumerate(entries)
    )

    def decode_messages() -> tuple[float, float]:
        consumer, _ = _ready_pair()
        clock = _Clock()
        consumer.receive_data(message_stream)
        count = 0
        for event in consumer.events():
            payload = event.payload  # type: ignore[union-attr]
            if payload is not None and payload.checksum_ok:
                count += len(unpack_messages(payload))
        elapsed = clock.stop()
        assert count == frames * per_frame, f"unpacked {count} of {frames * per_frame} messages"
        return elapsed

    message_decode_seconds = _best(repeat, decode_messages)

    send_bytes, message_bytes = len(send_stream), len(message_stream)
    messages = frames * per_frame
    return [
        Result(f"SEND encode, {label}", frames, messages, send_bytes, *send_seconds),
        Result(f"SEND decode, {label}", frames, messages, send_bytes, *send_decode_seconds),
        Result(f"MESSAGE encode, {label}", frames, messages, message_bytes, *message_seconds),
        Result(f"MESSAGE decode, {label}", frames, messages, message_bytes, *message_decode_seconds),
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.wire", description=__doc__.split("\n")[0])
    parser.add_argument("--payload-size", type=int, default=256, help="bytes per message (256)")
    parser.add_argument("--batch-size", type=int, default=10, help="messages per batched entry (10)")
    parser.add_argument("--frames", type=int, default=20_000, help="frames per run (20000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the best counts (3)")
    args = parser.parse_args(argv)
    if args.payload_size < 1 or args.batch_size < 2 or args.frames < 1 or args.repeat < 1:
        parser.error("--payload-size, --frames and --repeat must be >= 1 and --batch-size >= 2")

    print(f"harness.wire bench: {args.payload_size}-byte payloads, {args.frames} frames per run, "
          f"best of {args.repeat}; Python {platform.python_version()} on {platform.machine()}")
    print(f"{'case':<28} {'frames/s':>11} {'msgs/s':>11} {'MB/s':>8} {'µs/frame':>9} {'wall µs':>9}")
    for batch in (1, args.batch_size):
        for result in run_case(batch, args.payload_size, args.frames, args.repeat):
            print(result.row())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
