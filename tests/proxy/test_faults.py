"""Upstream faults: each has a defined client-visible result, a log event, no leaked connection
or task, and no retry (the upstream sees each POST exactly once)."""

from __future__ import annotations

import asyncio
import gzip
import socket
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient
from structlog.testing import capture_logs

from proxy.relay.streaming import BUFFER_MAX_BYTES
from proxy.server.app import SESSION_KEY
from tests.conftest import ProxyFactory
from tests.faulty_upstream import (
    FaultyUpstream,
    assert_no_leaks,
    close_before_headers,
    reset_before_headers,
    reset_mid_body,
    respond,
    sse,
    sse_body,
    stall_before_headers,
)

Client = TestClient[Any, Any]
CHAT = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
COMPLETION = orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": []})


@pytest.fixture
async def faulty() -> AsyncIterator[FaultyUpstream]:
    upstream = await FaultyUpstream().start()
    yield upstream
    await upstream.close()


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    """A client that closes its connection after each response and decodes nothing, so the
    leak check sees no keep-alive handler and the test sees the bytes chatmend sent."""
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        yield session


class Run:
    """One proxied request against the faulty upstream, with the logs and a task baseline."""

    def __init__(self, proxy: Client) -> None:
        self.proxy = proxy
        self.baseline: set[asyncio.Task[object]] = set(asyncio.all_tasks())
        self.logs: list[MutableMapping[str, Any]] = []

    def events(self, name: str) -> list[MutableMapping[str, Any]]:
        return [e for e in self.logs if e["event"] == name]

    @property
    def done(self) -> MutableMapping[str, Any]:
        (line,) = self.events("request_done")
        return line

    async def no_leaks(self) -> None:
        await assert_no_leaks(self.proxy.app[SESSION_KEY], self.baseline)


async def start(make_proxy: ProxyFactory, faulty: FaultyUpstream, **upstream: Any) -> Run:
    return Run(await make_proxy(url=faulty.url, **upstream))


async def post(
    run: Run, client: aiohttp.ClientSession, body: bytes = CHAT
) -> tuple[aiohttp.ClientResponse, bytes | type[Exception]]:
    """POST to the proxy; the body read, or the exception type reading it raised."""
    with capture_logs() as logs:
        async with client.post(run.proxy.make_url("/v1/chat/completions"), data=body) as response:
            try:
                data: bytes | type[Exception] = await response.read()
            except aiohttp.ClientPayloadError as exc:
                data = type(exc)
        await asyncio.sleep(0.05)  # the handler logs request_done after the last write
    run.logs = logs
    return response, data


def error_code(data: bytes | type[Exception]) -> str:
    assert isinstance(data, bytes)
    error = orjson.loads(data)["error"]
    assert set(error) == {"message", "type", "code"}
    return str(error["code"])


# ---------------------------------------------------------------------------------------------
# Before the response starts: an OpenAI-style error from chatmend
# ---------------------------------------------------------------------------------------------


async def test_connection_refused(make_proxy: ProxyFactory, client: aiohttp.ClientSession) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        run = Run(await make_proxy(url=f"http://127.0.0.1:{port}"))
        response, data = await post(run, client)
    assert response.status == 502
    assert error_code(data) == "upstream_unreachable"
    failed = run.events("upstream_failed")[0]
    assert failed["error"] == "ClientConnectorError"
    # Where and why, in the operating system's words: the first thing a new user needs.
    assert failed["host"] == f"127.0.0.1:{port}" and failed["cause"] == "Connection refused"
    assert run.done["outcome"] == "upstream_unreachable"
    await run.no_leaks()


@pytest.mark.parametrize("fault", [reset_before_headers, close_before_headers])
async def test_connection_dropped_before_headers(
    fault: Any, make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    faulty.default = fault()
    run = await start(make_proxy, faulty)
    response, data = await post(run, client)
    assert response.status == 502
    assert error_code(data) == "upstream_unreachable"
    assert run.events("upstream_failed")
    assert run.done["status"] == 502
    assert len(faulty.requests) == 1, "a POST must never be retried"
    await run.no_leaks()


async def test_post_on_a_reused_connection_is_not_retried(
    make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    """aiohttp retries idempotent requests on a pooled connection that turns out dead; a POST
    must fail instead, or the provider could run (and bill) one completion twice."""
    faulty.script = [respond(200, COMPLETION, keep_alive=True), close_before_headers()]
    run = await start(make_proxy, faulty)
    first, _ = await post(run, client)
    assert first.status == 200
    response, data = await post(run, client)
    assert response.status == 502
    assert error_code(data) == "upstream_unreachable"
    assert faulty.connections == 1, "both requests went over one pooled connection"
    assert len(faulty.requests) == 2
    await run.no_leaks()


async def test_stall_before_headers_gets_504_and_the_connection_is_closed(
    make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    faulty.default = stall_before_headers()
    run = await start(make_proxy, faulty, read_timeout=0.3)
    response, data = await post(run, client)
    assert response.status == 504
    assert error_code(data) == "upstream_timeout"
    assert run.events("upstream_failed")[0]["error"] == "SocketTimeoutError"
    await faulty.wait_peer_closed(timeout=1)
    assert len(faulty.requests) == 1
    await run.no_leaks()


async def test_small_sized_body_reset_midway_gets_502(
    make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    """A small sized body is read whole before anything is sent: a clean 502."""
    faulty.default = reset_mid_body(announced=1000, sent=30)
    run = await start(make_proxy, faulty)
    response, data = await post(run, client)
    assert response.status == 502
    assert error_code(data) == "upstream_broken"
    assert run.done["outcome"] == "upstream_failed"
    assert run.events("upstream_failed")[0]["error"] == "ClientPayloadError"
    assert len(faulty.requests) == 1
    await run.no_leaks()


# ---------------------------------------------------------------------------------------------
# After the response started: the status cannot change, the client sees a truncated body
# ---------------------------------------------------------------------------------------------


async def test_large_sized_body_reset_midway_is_truncated(
    make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    announced = 4 * BUFFER_MAX_BYTES
    faulty.default = reset_mid_body(announced=announced, sent=BUFFER_MAX_BYTES)
    run = await start(make_proxy, faulty)
    response, data = await post(run, client)
    assert response.status == 200
    assert response.headers["Content-Length"] == str(announced)
    assert data is aiohttp.ClientPayloadError, "the client must see the body is incomplete"
    assert run.done["outcome"] == "upstream_failed"
    failed = run.events("upstream_failed")[0]
    assert 0 < failed["bytes_relayed"] < announced
    assert len(faulty.requests) == 1
    await run.no_leaks()


@pytest.mark.parametrize("ending", ["reset", "eof"])
async def test_stream_broken_midway_is_truncated(
    ending: str, make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    """Reset, or closed without the terminating chunk: a truncated SSE stream."""
    faulty.default = sse(3, then=ending)
    run = await start(make_proxy, faulty)
    received = bytearray()
    with capture_logs() as logs:
        async with client.post(run.proxy.make_url("/v1/chat/completions"), data=CHAT) as response:
            assert response.status == 200
            with pytest.raises(aiohttp.ClientPayloadError):
                async for piece in response.content.iter_any():
                    received += piece
        await asyncio.sleep(0.05)
    run.logs = logs
    assert bytes(received) == sse_body(3), "every event before the break is relayed"
    assert run.done["outcome"] == "upstream_failed"
    assert run.events("upstream_failed")[0]["bytes_relayed"] == len(sse_body(3))
    assert len(faulty.requests) == 1
    await run.no_leaks()


async def test_stream_stalled_past_the_read_timeout_is_truncated(
    make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    faulty.default = sse(2, then="stall")
    run = await start(make_proxy, faulty, read_timeout=0.3)
    response, data = await post(run, client)
    assert response.status == 200
    assert data is aiohttp.ClientPayloadError
    assert run.done["outcome"] == "upstream_failed"
    assert run.events("upstream_failed")[0]["error"] == "SocketTimeoutError"
    await faulty.wait_peer_closed(timeout=1)
    await run.no_leaks()


async def test_stream_ending_inside_an_event_is_relayed_as_is(
    make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    """chatmend relays bytes, not events: a well-framed stream whose last event is cut (no
    ``[DONE]``) reaches the client exactly as the upstream sent it."""
    tail = b'data: {"choices": [{"delta": {"con'
    faulty.default = sse(2, then="end", tail=tail)
    run = await start(make_proxy, faulty)
    response, data = await post(run, client)
    assert response.status == 200
    assert data == sse_body(2, tail)
    assert run.done["outcome"] == "completed"
    await run.no_leaks()


# ---------------------------------------------------------------------------------------------
# Upstream errors and odd bodies: relayed verbatim
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (429, {"Retry-After": "17", "x-ratelimit-remaining-requests": "0"}),
        (500, {}),
        (503, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}),
    ],
)
async def test_upstream_error_statuses_are_relayed_verbatim(
    status: int,
    headers: dict[str, str],
    make_proxy: ProxyFactory,
    faulty: FaultyUpstream,
    client: aiohttp.ClientSession,
) -> None:
    body = orjson.dumps(
        {"error": {"message": f"upstream says {status}", "type": "server_error", "code": None}}
    )
    faulty.default = respond(status, body, headers)
    run = await start(make_proxy, faulty)
    response, data = await post(run, client)
    assert response.status == status
    assert response.reason == "Whatever", "the upstream's reason phrase is kept"
    assert data == body
    for name, value in headers.items():
        assert response.headers[name] == value
    assert run.done["status"] == status
    assert run.done["outcome"] == "completed"
    assert len(faulty.requests) == 1, "no retry on an error status either"
    await run.no_leaks()


@pytest.mark.parametrize("size", [100, 2 * BUFFER_MAX_BYTES])
async def test_invalid_gzip_is_relayed_as_is(
    size: int, make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    """chatmend never decodes a response: a body that claims gzip and is not arrives
    byte for byte (buffered when small, streamed when large)."""
    garbage = (gzip.compress(COMPLETION)[:10] + b"\x00not gzip at all" * size)[:size]
    faulty.default = respond(200, garbage, {"Content-Encoding": "gzip"})
    run = await start(make_proxy, faulty)
    response, data = await post(run, client)
    assert response.status == 200
    assert response.headers["Content-Encoding"] == "gzip"
    assert data == garbage
    assert run.done["outcome"] == "completed"
    await run.no_leaks()


async def test_upstream_sees_the_exact_body_once(
    make_proxy: ProxyFactory, faulty: FaultyUpstream, client: aiohttp.ClientSession
) -> None:
    faulty.default = respond(200, COMPLETION)
    run = await start(make_proxy, faulty)
    response, data = await post(run, client)
    assert response.status == 200
    assert data == COMPLETION
    (request,) = faulty.requests
    assert (request.method, request.target, request.body) == ("POST", "/v1/chat/completions", CHAT)
    await run.no_leaks()
