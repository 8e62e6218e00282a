"""Log entries per committed transaction, v4 against v4-batched (PIP-160's promise, measured).

`python -m tools.bench.v4 [--concurrency 32] [--transactions 960] [--paths v4,v4-batched]`

For each path it starts a metadata store, a ledger store and one broker (no fault
proxy) in a temporary folder with that path's transaction settings (those of
`targets/embedded.py` `path_settings`, on our own metadata store), then
runs `--concurrency` concurrent consume-transform-produce transactions over one
connection at the wire level, each:

    NEW_TXN, ADD_PARTITION_TO_TXN (out-a), ADD_PARTITION_TO_TXN (out-b),
    SEND out-a, SEND out-b, ADD_SUBSCRIPTION_TO_TXN (in/sub), ACK (in, txn), END_TXN COMMIT

and reads, before and after the measured transactions, the ledger store's
`txnbench_ledger_entries_total{kind}` for `txn-log` and `pending-ack` (entries the ledger
store appended) and the broker's `pulsar_txn_append_log_total` (coordinator records).
A short warm-up loads the coordinators and topics first and is not measured.

Every process it starts is stopped by pid before it returns.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from harness.wire import (
    Command,
    CommandType,
    Connection,
    ConnectionClosed,
    InitialPosition,
    MessageId,
    Role,
    SubType,
    TxnAction,
    TxnId,
    commands,
)
from tools.launch import LedgerProcess, one_broker

ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
PATH_SETTINGS: dict[str, dict[str, Any]] = {
    "v4": {"transactionCoordinatorEnabled": True, "transactionCoordinatorCount": 4,
           "transactionLogBatchedWriteEnabled": False, "transactionPendingAckBatchedWriteEnabled": False},
    "v4-batched": {"transactionCoordinatorEnabled": True, "transactionCoordinatorCount": 4,
                   "transactionLogBatchedWriteEnabled": True, "transactionLogBatchedWriteMaxRecords": 512,
                   "transactionLogBatchedWriteMaxSize": 4 * 1024 * 1024,
                   "transactionLogBatchedWriteMaxDelayInMillis": 1,
                   "transactionPendingAckBatchedWriteEnabled": True,
                   "transactionPendingAckBatchedWriteMaxRecords": 512,
                   "transactionPendingAckBatchedWriteMaxSize": 4 * 1024 * 1024,
                   "transactionPendingAckBatchedWriteMaxDelayInMillis": 1},
}


class BenchError(RuntimeError):
    pass


class WireSession:
    """One binary-protocol connection: requests by request id, receipts by sequence id, MESSAGE pushes."""

    def __init__(self) -> None:
        self.conn = Connection(Role.CLIENT)
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Command]] = {}
        self._receipts: dict[tuple[int, int], asyncio.Future[Command]] = {}
        self.messages: asyncio.Queue[MessageId] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._connected: asyncio.Future[None] | None = None

    async def open(self, url: str) -> None:
        host, port = url.removeprefix("pulsar://").rsplit(":", 1)
        reader, self._writer = await asyncio.open_connection(host, int(port))
        self._connected = asyncio.get_running_loop().create_future()
        self._reader = asyncio.ensure_future(self._read(reader))
        self._writer.write(self.conn.send(commands.connect("txnbench-v4-bench")))
        await asyncio.wait_for(self._connected, 10)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        for _ in range(100_000_000):   # bounded by the connection's life
            data = await reader.read(1 << 16)
            self.conn.receive_data(data)
            for event in self.conn.events():
                if isinstance(event, ConnectionClosed):
                    return
                self._on(event)
            if not data:
                return

    def _on(self, command: Command) -> None:
        kind = command.type
        if kind is CommandType.CONNECTED and self._connected is not None and not self._connected.done():
            self._connected.set_result(None)
        elif kind is CommandType.PING:
            self.send(commands.pong())
        elif kind is CommandType.MESSAGE:
            self.messages.put_nowait(MessageId.from_proto(command.body.message_id))
        elif kind in (CommandType.SEND_RECEIPT, CommandType.SEND_ERROR):
            future = self._receipts.pop((command.body.producer_id, command.body.sequence_id), None)
            if future is not None and not future.done():
                future.set_result(command)
        else:
            request_id = commands.request_id_of(command)
            future = self._waiting.pop(request_id, None) if request_id is not None else None
            if future is not None and not future.done():
                future.set_result(command)

    def send(self, command: Command) -> None:
        assert self._writer is not None
        self._writer.write(self.conn.send(command))

    async def request(self, build: Any, timeout_s: float = 30.0) -> Command:
        request_id = next(self._ids)
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self.send(build(request_id))
        answer = await asyncio.wait_for(future, timeout_s)
        error = commands.error_of(answer)
        if error is not None:
            raise BenchError(f"{answer.type.name}: {error[0].name}: {error[1]}")
        return answer

    async def publish(self, producer_id: int, sequence_id: int, value: bytes, txn: TxnId | None) -> None:
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._receipts[(producer_id, sequence_id)] = future
        meta = commands.message_metadata("bench", sequence_id, int(time.time() * 1000), txn=txn)
        self.send(commands.send(producer_id, sequence_id, meta, value))
        receipt = await asyncio.wait_for(future, 30)
        if receipt.type is not CommandType.SEND_RECEIPT:
            raise BenchError(f"send failed: {commands.describe(receipt)}")

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader is not None:
            self._reader.cancel()


@dataclass
class Measured:
    committed: int
    seconds: float
    txn_log_entries: float
    txn_log_records: float
    pending_ack_entries: float


async def _drive(url: str, concurrency: int, transactions: int, warmup: int, ledger: LedgerProcess,
                 broker_metrics: str) -> Measured:
    session = WireSession()
    await session.open(url)
    try:
        meta = await session.request(lambda r: commands.partitioned_metadata(ASSIGN, r))
        coordinators = meta.body.partitions
        for tc in range(coordinators):   # the lookup makes this broker own the partition: the TC loads
            await session.request(lambda r, tc=tc: commands.lookup(f"{ASSIGN}-partition-{tc}", r))
            for _ in range(100):
                try:
                    await session.request(lambda r, tc=tc: commands.tc_client_connect_request(r, tc))
                    break
                except BenchError:
                    await asyncio.sleep(0.1)
        suffix = f"{int(time.time())}"
        source, out_a, out_b = (f"persistent://public/default/bench-{n}-{suffix}" for n in ("in", "a", "b"))
        for producer_id, topic in ((1, source), (2, out_a), (3, out_b)):
            await session.request(lambda r, t=topic: commands.lookup(t, r))   # makes this broker the owner
            await session.request(lambda r, t=topic, p=producer_id: commands.producer(t, p, r))
        total = warmup + transactions
        sequence = itertools.count()
        await asyncio.gather(*(session.publish(1, next(sequence), b"input", None) for _ in range(total)))
        await session.request(lambda r: commands.subscribe(source, "bench", 1, r, sub_type=SubType.Shared,
                                                           initial_position=InitialPosition.Earliest))
        session.send(commands.flow(1, total + 10))
        sequences = {2: itertools.count(), 3: itertools.count()}
        tc_ids = itertools.count()

        async def one() -> None:
            message = await asyncio.wait_for(session.messages.get(), 30)
            answer = await session.request(lambda r: commands.new_txn(r, next(tc_ids) % coordinators,
                                                                      timeout_ms=60_000))
            txn = commands.txn_of(answer)
            assert txn is not None
            for producer_id, topic in ((2, out_a), (3, out_b)):
                await session.request(lambda r, t=topic: commands.add_partition_to_txn(r, txn, [t]))
                await session.publish(producer_id, next(sequences[producer_id]), b"output", txn)
            await session.request(lambda r: commands.add_subscription_to_txn(r, txn, [(source, "bench")]))
            await session.request(lambda r: commands.ack(1, [message], txn=txn, request_id=r))
            await session.request(lambda r: commands.end_txn(r, txn, TxnAction.COMMIT))

        async def workers(count: int) -> None:
            remaining = itertools.count()

            async def loop() -> None:
                while next(remaining) < count:   # bounded by count
                    await one()

            await asyncio.gather(*(loop() for _ in range(concurrency)))

        await workers(warmup)
        await asyncio.sleep(0.2)   # let the warm-up's record deletions settle
        before = _counters(ledger, broker_metrics)
        started = time.perf_counter()
        await workers(transactions)
        seconds = time.perf_counter() - started
        await asyncio.sleep(0.2)
        after = _counters(ledger, broker_metrics)
        return Measured(transactions, seconds, *(after[i] - before[i] for i in range(3)))
    finally:
        await session.close()


def _counters(ledger: LedgerProcess, broker_metrics: str) -> tuple[float, float, float]:
    with urllib.request.urlopen(broker_metrics, timeout=5) as resp:
        text = resp.read().decode()
    records = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith("pulsar_txn_append_log_total{"))
    return (ledger.metric("txnbench_ledger_entries_total", kind="txn-log"), records,
            ledger.metric("txnbench_ledger_entries_total", kind="pending-ack"))


def run_path(txn_path: str, concurrency: int, transactions: int, warmup: int) -> Measured:
    with one_broker(PATH_SETTINGS[txn_path], txn_path=txn_path,
                    prefix=f"txnbench-v4-bench-{txn_path}-") as (_, ledger, broker):
        metrics_url = f"http://127.0.0.1:{broker.http_port}/metrics"
        return asyncio.run(_drive(broker.service_url, concurrency, transactions, warmup, ledger, metrics_url))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=32, help="transactions in flight at once")
    parser.add_argument("--transactions", type=int, default=960, help="measured committed transactions per path")
    parser.add_argument("--warmup", type=int, default=64)
    parser.add_argument("--paths", default="v4,v4-batched")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results: dict[str, Measured] = {}
    for txn_path in args.paths.split(","):
        results[txn_path] = run_path(txn_path, args.concurrency, args.transactions, args.warmup)
    if args.json:
        print(json.dumps({p: vars(m) for p, m in results.items()}, indent=2))
        return
    print(f"{args.transactions} committed consume-transform-produce transactions, {args.concurrency} concurrent, "
          "one broker")
    print(f"{'path':12} {'txn/s':>8} {'txn-log entries/txn':>20} {'TC records/txn':>15} {'pending-ack entries/txn':>24}")
    for txn_path, m in results.items():
        n = m.committed
        print(f"{txn_path:12} {n / m.seconds:8.0f} {m.txn_log_entries / n:20.3f} {m.txn_log_records / n:15.2f} "
              f"{m.pending_ack_entries / n:24.3f}")
    if "v4" in results and "v4-batched" in results:
        plain, batched = results["v4"], results["v4-batched"]
        if batched.txn_log_entries and batched.pending_ack_entries:
            print(f"batching cuts txn-log entries {plain.txn_log_entries / batched.txn_log_entries:.1f}x and "
                  f"pending-ack entries {plain.pending_ack_entries / batched.pending_ack_entries:.1f}x")


if __name__ == "__main__":
    main()
