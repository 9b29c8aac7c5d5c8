"""Client faults: a client that leaves early, sends slowly, or just holds connections open."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient
from structlog.testing import capture_logs

from proxy.config import ConfigError, parse_config
from proxy.server.app import SESSION_KEY
from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream
from tests.faulty_upstream import FaultyUpstream, assert_no_leaks, sse

Client = TestClient[Any, Any]
CHAT = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture
async def faulty() -> AsyncIterator[FaultyUpstream]:
    upstream = await FaultyUpstream().start()
    yield upstream
    await upstream.close()


async def connect(proxy: Client) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    assert proxy.server.port is not None
    return await asyncio.open_connection("127.0.0.1", proxy.server.port)


def request_head(length: int, path: str = "/v1/chat/completions") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: chatmend\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def read_response(reader: asyncio.StreamReader, timeout: float = 3) -> tuple[int, bytes]:
    """Status and body of one response with a Content-Length."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    body = await asyncio.wait_for(reader.readexactly(length), timeout)
    return int(lines[0].split(" ", 2)[1]), body


# ---------------------------------------------------------------------------------------------
# client_body_timeout: the config key
# ---------------------------------------------------------------------------------------------


def test_client_body_timeout_defaults_to_60_seconds() -> None:
    assert parse_config({}).client_body_timeout == 60.0
    assert parse_config({"client_body_timeout": 2.5}).client_body_timeout == 2.5


@pytest.mark.parametrize("value", [0, -1, "60", True, None])
def test_client_body_timeout_must_be_positive_seconds(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^client_body_timeout: must be a positive number"):
        parse_config({"client_body_timeout": value})


# ---------------------------------------------------------------------------------------------
# Slow and vanishing bodies
# ---------------------------------------------------------------------------------------------


async def test_slow_loris_body_gets_408(make_proxy: ProxyFactory, fake: FakeUpstream) -> None:
    proxy = await make_proxy({"client_body_timeout": 0.3})
    reader, writer = await connect(proxy)
    started = time.monotonic()
    with capture_logs() as logs:
        writer.write(request_head(len(CHAT)) + CHAT[:5])

        async def dribble() -> None:  # one byte every 50 ms: never finishes in time
            for byte in CHAT[5:]:
                await asyncio.sleep(0.05)
                writer.write(bytes([byte]))

        dribbling = asyncio.create_task(dribble())
        status, body = await read_response(reader)
        dribbling.cancel()
    elapsed = time.monotonic() - started
    writer.close()
    assert status == 408
    error = orjson.loads(body)["error"]
    assert error["code"] == "request_timeout"
    assert error["type"] == "invalid_request_error"
    # Answered at the deadline; aiohttp then drains what is still coming for at most its
    # lingering time (10 s, like nginx's lingering close) and closes the connection.
    assert 0.3 <= elapsed < 1.5
    assert fake.received == []
    done = [e for e in logs if e["event"] == "request_done"]
    assert done[0]["status"] == 408
    assert done[0]["outcome"] == "client_timeout"


async def test_slow_body_within_the_timeout_is_forwarded(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    proxy = await make_proxy({"client_body_timeout": 5})
    reader, writer = await connect(proxy)
    writer.write(request_head(len(CHAT)))
    for start in range(0, len(CHAT), 20):
        writer.write(CHAT[start : start + 20])
        await writer.drain()
        await asyncio.sleep(0.02)
    writer.write_eof()
    status, _ = await read_response(reader)
    writer.close()
    assert status == 200
    assert fake.received[-1].body == CHAT


@pytest.mark.parametrize("sent", [0, 10])
async def test_client_leaving_before_its_body_ends(
    sent: int, make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    proxy = await make_proxy()
    baseline = set(asyncio.all_tasks())
    with capture_logs() as logs:
        _, writer = await connect(proxy)
        writer.write(request_head(1000) + CHAT[:sent])
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.close()
        await writer.wait_closed()
        await asyncio.sleep(0.2)
    assert fake.received == [], "nothing reaches the upstream"
    done = [e for e in logs if e["event"] == "request_done"]
    assert done and done[0]["status"] == 499
    assert done[0]["outcome"] == "client_disconnected"
    assert not [e for e in logs if e["event"] == "request_failed"]
    await assert_no_leaks(proxy.app[SESSION_KEY], baseline)


# ---------------------------------------------------------------------------------------------
# Mid-stream disconnect
# ---------------------------------------------------------------------------------------------


async def test_mid_stream_disconnect_closes_the_upstream_within_a_second(
    make_proxy: ProxyFactory, faulty: FaultyUpstream
) -> None:
    faulty.default = sse(200, then="end", delay=0.02)
    proxy = await make_proxy(url=faulty.url)
    baseline = set(asyncio.all_tasks())
    async with aiohttp.ClientSession() as client:
        response = await client.post(proxy.make_url("/v1/chat/completions"), data=CHAT)
        await response.content.readline()
        left = time.monotonic()
        response.close()  # the client walks away mid-stream
        closed = await faulty.wait_peer_closed(timeout=1)
    assert closed - left < 1.0
    assert len(faulty.requests) == 1
    await assert_no_leaks(proxy.app[SESSION_KEY], baseline)


# ---------------------------------------------------------------------------------------------
# Idle connections
# ---------------------------------------------------------------------------------------------

IDLE_CONNECTIONS = 500


@pytest.mark.slow
async def test_many_idle_keep_alive_connections_do_not_stop_service(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    proxy = await make_proxy()
    idle: list[asyncio.StreamWriter] = []
    try:
        for number in range(IDLE_CONNECTIONS):
            reader, writer = await connect(proxy)
            idle.append(writer)
            if number % 2:  # half finish one request and keep the connection; half send nothing
                writer.write(b"GET /v1/models HTTP/1.1\r\nHost: chatmend\r\n\r\n")
                await reader.readuntil(b"\r\n\r\n")
            if number % 100 == 99:
                await asyncio.sleep(0)
        started = time.monotonic()
        async with (
            aiohttp.ClientSession() as client,
            client.post(proxy.make_url("/v1/chat/completions"), data=CHAT) as response,
        ):
            assert response.status == 200
            await response.read()
        assert time.monotonic() - started < 2
        assert fake.received[-1].body == CHAT
    finally:
        for writer in idle:
            writer.close()
