from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from embedded.rpc import (
    AsyncRpcClient,
    BlockingRpcClient,
    FrameDecoder,
    FrameError,
    RpcError,
    RpcServer,
    RpcUnavailable,
    ServerConnection,
    encode_frame,
)


def test_stream_split_at_every_byte_decodes_the_same() -> None:
    stream = encode_frame({"id": 1, "op": "put", "key": "/a"}) + encode_frame({"id": 2}, b"\x00\x01payload")
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder()
        decoder.feed(stream[:cut])
        frames = decoder.frames()
        decoder.feed(stream[cut:])
        frames += decoder.frames()
        assert [f.header for f in frames] == [{"id": 1, "op": "put", "key": "/a"}, {"id": 2}]
        assert frames[1].payload == b"\x00\x01payload"


def test_bad_length_is_a_frame_error() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"\x00\x00\x00\x02xx")
    with pytest.raises(FrameError):
        decoder.frames()


def test_round_trip_and_errors_over_loopback() -> None:
    async def echo(conn: ServerConnection, header: dict[str, Any], payload: bytes) -> Any:
        conn.push("hello", n=1)
        return {"got": header["x"]}, payload[::-1]

    async def boom(conn: ServerConnection, header: dict[str, Any], payload: bytes) -> Any:
        raise RpcError("KeyNotFound", "no /a")

    async def main() -> None:
        server = RpcServer({"echo": echo, "boom": boom})
        port = await server.start()
        pushes: list[dict[str, Any]] = []
        client = AsyncRpcClient("127.0.0.1", port, on_push=lambda h, p: pushes.append(h))
        await client.connect()
        header, payload = await client.call("echo", b"abc", x=5)
        assert header["got"] == 5 and payload == b"cba"
        with pytest.raises(RpcError) as info:
            await client.call("boom")
        assert info.value.code == "KeyNotFound"
        with pytest.raises(RpcError):
            await client.call("nope")
        assert pushes and pushes[0]["push"] == "hello"

        blocking = BlockingRpcClient("127.0.0.1", port)
        assert await asyncio.to_thread(blocking.call, "echo", b"xy", x=1) == ({"id": 1, "ok": True, "got": 1}, b"yx")
        blocking.close()

        await server.close()
        await client.close()
        with pytest.raises(RpcUnavailable):
            await client.call("echo", x=1)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_connect_refused_is_unavailable() -> None:
    async def main() -> None:
        client = AsyncRpcClient("127.0.0.1", 1)
        with pytest.raises(RpcUnavailable):
            await client.connect(timeout=2)

    asyncio.run(main())


def test_cancelling_a_call_cancels_it_even_when_the_reply_races() -> None:
    """A caller cancelled while its reply arrives must see CancelledError, not hang or return."""

    async def slow(conn: ServerConnection, header: dict[str, Any], payload: bytes) -> Any:
        await asyncio.sleep(0.05)
        return {}

    async def main() -> None:
        server = RpcServer({"slow": slow})
        port = await server.start()
        client = AsyncRpcClient("127.0.0.1", port)
        await client.connect()
        for delay in (0.0, 0.02, 0.049, 0.05, 0.051, 0.06):
            task = asyncio.create_task(client.call("slow", timeout=5))
            await asyncio.sleep(delay)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), 2)
            assert task.done()
        header, _ = await client.call("slow", timeout=5)  # the connection is still usable
        assert header["ok"]
        await client.close()
        await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))
