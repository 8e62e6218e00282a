"""A null broker: speaks the Pulsar protocol and acknowledges everything at once.

It stores nothing and dispatches nothing; every request gets its success answer
immediately (SEND_RECEIPT, ACK_RESPONSE, NEW_TXN_RESPONSE, END_TXN_RESPONSE ...), so a
client measured against it is limited only by itself. It announces the v5 feature
flags, serves `tc_count` coordinators (v4: the assign topic has that many partitions,
all owned here; v5: a WATCH_TC_ASSIGNMENTS snapshot naming this broker as every
leader) and answers SCALABLE_TOPIC_LOOKUP with a one-segment DAG.

Run it as `python -m embedded.nullbroker [--port 0] [--tc-count 4]`: it prints
`READY <port>` once listening, binds 127.0.0.1 only, and exits on SIGTERM/SIGINT or
when its parent process is gone. asyncio is fine here: this is a server, not the client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import signal
import sys

from harness.wire import (
    Command,
    CommandType,
    Connection,
    ConnectionClosed,
    MessageId,
    ProtocolError,
    Role,
    TxnId,
    commands,
)

T = CommandType
ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
FEATURES = ("supports_scalable_topics", "supports_tc_metadata_discovery")


class NullBroker:
    """The shared counters of one null broker."""

    def __init__(self, port: int, tc_count: int) -> None:
        self.port = port
        self.url = f"pulsar://127.0.0.1:{port}"
        self.tc_count = tc_count
        self.entries = itertools.count()
        self.names = itertools.count(1)
        self.txn_seq: dict[int, itertools.count] = {}

    def answer(self, event: Command) -> list[Command]:
        """The commands that answer `event` (often one)."""
        kind = event.type
        body = event.body
        if kind is T.SEND:
            return [commands.send_receipt(body.producer_id, body.sequence_id,
                                          MessageId(1, next(self.entries)),
                                          highest_sequence_id=body.highest_sequence_id or None)]
        if kind is T.ACK:
            if body.HasField("request_id"):
                return [commands.ack_response(body.consumer_id, body.request_id,
                                              txn=commands.txn_of(body))]
            return []
        if kind in (T.ADD_PARTITION_TO_TXN, T.ADD_SUBSCRIPTION_TO_TXN, T.END_TXN):
            return [commands.txn_response(T(kind + 1), body.request_id, commands.txn_of(body))]
        if kind is T.NEW_TXN:
            counter = self.txn_seq.setdefault(body.tc_id, itertools.count())
            return [commands.new_txn_response(body.request_id, TxnId(body.tc_id, next(counter)))]
        if kind is T.CONNECT:
            return [commands.connected("txnbench-null-broker", feature_flags=FEATURES)]
        if kind is T.PING:
            return [commands.pong()]
        if kind is T.PARTITIONED_METADATA:
            partitions = self.tc_count if body.topic == ASSIGN_TOPIC else 0
            return [commands.partitioned_metadata_response(body.request_id, partitions)]
        if kind is T.LOOKUP:
            return [commands.lookup_response(body.request_id, self.url, authoritative=True)]
        if kind is T.PRODUCER:
            name = body.producer_name if body.HasField("producer_name") else \
                f"null-{next(self.names)}"
            return [commands.producer_success(body.request_id, name)]
        if kind in (T.SUBSCRIBE, T.CLOSE_PRODUCER, T.CLOSE_CONSUMER, T.UNSUBSCRIBE):
            return [commands.success(body.request_id)]
        if kind is T.TC_CLIENT_CONNECT_REQUEST:
            return [commands.tc_client_connect_response(body.request_id)]
        if kind is T.GET_LAST_MESSAGE_ID:
            return [commands.get_last_message_id_response(body.request_id, MessageId(1, -1))]
        if kind is T.WATCH_TC_ASSIGNMENTS:
            return [commands.watch_tc_assignments_update(
                body.watch_id, parallelism=self.tc_count,
                leaders={tc: self.url for tc in range(self.tc_count)})]
        if kind is T.SCALABLE_TOPIC_LOOKUP:
            dag = commands.segment_dag(1, [commands.segment_info(0, 0, 0xFFFF)])
            return [commands.scalable_topic_update(body.session_id, dag=dag,
                                                   resolved_topic_name=body.topic)]
        return []


class _Protocol(asyncio.Protocol):
    def __init__(self, broker: NullBroker) -> None:
        self._broker = broker
        self._wire = Connection(Role.SERVER)
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        assert transport is not None
        out: list[bytes] = []
        try:
            self._wire.receive_data(data)
            for event in self._wire.events():
                if isinstance(event, ConnectionClosed):
                    break
                for reply in self._broker.answer(event):
                    out.append(self._wire.send(reply))
        except ProtocolError:
            transport.close()
            return
        if out:
            transport.write(b"".join(out))

    def eof_received(self) -> bool:
        return False


async def serve(port: int, tc_count: int, ready: asyncio.Event | None = None,
                on_port: list[int] | None = None) -> None:
    """Serve until cancelled."""
    loop = asyncio.get_running_loop()
    holder: list[NullBroker] = []
    server = await loop.create_server(lambda: _Protocol(holder[0]), "127.0.0.1", port)
    actual = server.sockets[0].getsockname()[1]
    holder.append(NullBroker(actual, tc_count))
    if on_port is not None:
        on_port.append(actual)
    if ready is not None:
        ready.set()
    print(f"READY {actual}", flush=True)
    async with server:
        await server.serve_forever()


async def _watch_parent(parent: int) -> None:
    while True:
        await asyncio.sleep(1.0)
        if os.getppid() != parent:
            return


async def _main(port: int, tc_count: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    server = asyncio.create_task(serve(port, tc_count))
    watcher = asyncio.create_task(_watch_parent(os.getppid()))
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({server, watcher, stopper}, return_when=asyncio.FIRST_COMPLETED)
    for task in (server, watcher, stopper):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def main(argv: list[str] | None = None) -> int:
    """Command line: run a null broker on 127.0.0.1."""
    parser = argparse.ArgumentParser(prog="python -m embedded.nullbroker",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--tc-count", type=int, default=4, help="transaction coordinators")
    args = parser.parse_args(argv)
    asyncio.run(_main(args.port, args.tc_count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
