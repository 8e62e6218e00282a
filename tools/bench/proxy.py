"""How much the fault proxy costs with no toxics: throughput and added round-trip latency.

`python -m tools.bench.proxy [--megabytes N] [--round-trips N] [--json]` starts the
proxy as its own process (as the cluster runs it), plus a sink and an echo server in
this process, and measures each thing twice, directly and through the proxy:

* throughput: one connection sends N MB to the sink; MB/s from the first byte sent
  to the last byte received (1 MB = 10^6 bytes);
* round trips: one connection sends 64 bytes and waits for the echo, N times; the
  added latency is the proxied median minus the direct median, in microseconds.

Everything is on 127.0.0.1 and bounded by the given sizes and a timeout per socket.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.launch import ProxyProcess

HOST = "127.0.0.1"
SEND_BUFFER = 256 * 1024
IO_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Throughput:
    megabytes: float
    direct_mb_s: float
    proxied_mb_s: float


@dataclass(frozen=True)
class RoundTrips:
    count: int
    direct_p50_us: float
    direct_p99_us: float
    proxied_p50_us: float
    proxied_p99_us: float
    added_p50_us: float


@dataclass(frozen=True)
class BenchResult:
    throughput: Throughput
    round_trips: RoundTrips


@contextmanager
def _server(serve_one: Callable[[socket.socket], None]) -> Iterator[str]:
    """A listening socket whose connections `serve_one` handles, each in a thread."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(IO_TIMEOUT_S)
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield f"{HOST}:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _sink(received: list[int], done: threading.Event) -> Callable[[socket.socket], None]:
    def serve(conn: socket.socket) -> None:
        with conn:
            total = 0
            buffer = bytearray(SEND_BUFFER)
            while (n := conn.recv_into(buffer)) > 0:
                total += n
            received.append(total)
            done.set()
    return serve


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=IO_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def measure_throughput(address: str, size: int, received: list[int], done: threading.Event) -> float:
    """MB/s of one connection sending `size` bytes to the sink behind `address`."""
    received.clear()
    done.clear()
    chunk = b"\x5a" * SEND_BUFFER
    started = time.perf_counter()
    with _connect(address) as sock:
        sent = 0
        while sent < size:
            sock.sendall(chunk[:min(SEND_BUFFER, size - sent)])
            sent += min(SEND_BUFFER, size - sent)
    if not done.wait(IO_TIMEOUT_S):
        raise RuntimeError("the sink did not see the end of the stream in time")
    elapsed = time.perf_counter() - started
    if received[-1] != size:
        raise RuntimeError(f"the sink received {received[-1]} of {size} bytes")
    return size / 1e6 / elapsed


def measure_round_trips(address: str, count: int) -> list[float]:
    """Seconds of each of `count` 64-byte round trips on one connection (after a warm-up)."""
    payload = b"r" * 64
    times: list[float] = []
    with _connect(address) as sock:
        for i in range(count + 100):
            started = time.perf_counter()
            sock.sendall(payload)
            got = 0
            while got < len(payload):
                data = sock.recv(65536)
                if not data:
                    raise RuntimeError("the echo connection closed")
                got += len(data)
            if i >= 100:
                times.append(time.perf_counter() - started)
    return times


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def run(megabytes: float, round_trips: int, workdir: Path) -> BenchResult:
    received: list[int] = []
    done = threading.Event()
    size = int(megabytes * 1e6)
    with _server(_sink(received, done)) as sink, _server(_echo) as echo:
        proxy = ProxyProcess(workdir, [
            {"name": "bench-sink", "listen": f"{HOST}:0", "upstream": sink, "enabled": True},
            {"name": "bench-echo", "listen": f"{HOST}:0", "upstream": echo, "enabled": True},
        ], log_level="WARNING")
        proxy.start()
        try:
            measure_throughput(proxy.listen("bench-sink"), min(size, 10_000_000), received, done)  # warm-up
            direct_mb_s = measure_throughput(sink, size, received, done)
            proxied_mb_s = measure_throughput(proxy.listen("bench-sink"), size, received, done)
            direct = measure_round_trips(echo, round_trips)
            proxied = measure_round_trips(proxy.listen("bench-echo"), round_trips)
        finally:
            proxy.stop()
    us = 1e6
    return BenchResult(
        Throughput(megabytes, round(direct_mb_s, 1), round(proxied_mb_s, 1)),
        RoundTrips(round_trips, round(_p(direct, 50) * us, 1), round(_p(direct, 99) * us, 1),
                   round(_p(proxied, 50) * us, 1), round(_p(proxied, 99) * us, 1),
                   round((_p(proxied, 50) - _p(direct, 50)) * us, 1)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=200.0, help="bytes sent per throughput run (MB)")
    parser.add_argument("--round-trips", type=int, default=5000, help="64-byte round trips per run")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.megabytes <= 0 or args.round_trips < 2:
        parser.error("--megabytes must be > 0 and --round-trips at least 2")
    with tempfile.TemporaryDirectory(prefix="proxy-bench-") as tmp:
        result = run(args.megabytes, args.round_trips, Path(tmp))
    if args.json:
        print(json.dumps(asdict(result), indent=2))
        return
    t, r = result.throughput, result.round_trips
    print(f"throughput, one connection, {t.megabytes:g} MB: direct {t.direct_mb_s} MB/s, "
          f"through the proxy {t.proxied_mb_s} MB/s")
    print(f"round trips of 64 bytes, {r.count}: direct p50 {r.direct_p50_us} us / p99 {r.direct_p99_us} us; "
          f"through the proxy p50 {r.proxied_p50_us} us / p99 {r.proxied_p99_us} us; "
          f"added p50 {r.added_p50_us} us")


if __name__ == "__main__":
    main()
