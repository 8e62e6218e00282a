from __future__ import annotations

import asyncio
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
