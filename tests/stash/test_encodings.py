"""Reasoning continuity survives compression: on an observed request chatmend offers the
upstream only the encodings its observer reads, so a client advertising ``zstd`` (LiteLLM sends
``gzip, deflate, zstd``) still gets its reasoning restored; a body the observer cannot read
anyway is logged as ``reasoning_not_observed``, never silently skipped. Against a fake upstream
on loopback that prefers zstd whenever it is offered."""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import create_app
from proxy.stash.observer import readable_accept_encoding
from tests.fake_thinking import ThinkingUpstream, create_thinking_upstream, turn_one, turn_two

Client = TestClient[Any, Any]
URL = "/v1/chat/completions"
LITELLM = "gzip, deflate, zstd"


def zstd_frame(data: bytes) -> bytes:
    """One Zstandard frame (RFC 8878, section 3.1.1) made of raw blocks: what any zstd decoder
    reads, written without a zstd library (Python 3.11 has none)."""
    frame = bytearray(b"\x28\xb5\x2f\xfd")  # magic number
    frame += bytes([0x00, 0x38])  # no content size, checksum or dictionary; window 2**17
    pieces = [data[i : i + 128 * 1024] for i in range(0, len(data), 128 * 1024)] or [b""]
    for number, piece in enumerate(pieces):
        last = number == len(pieces) - 1
        frame += ((len(piece) << 3) | int(last)).to_bytes(3, "little")  # raw block header
        frame += piece
    return bytes(frame)


@dataclass
class ZstdUpstream(ThinkingUpstream):
    """The thinking upstream, compressing its JSON answers: zstd when offered (or always, with
    ``force_zstd``, as a misbehaving server would), else gzip when offered."""

    accept_encodings: list[str] = field(default_factory=list)
    force_zstd: bool = False


def create_zstd_upstream(state: ZstdUpstream) -> web.Application:
    @web.middleware
    async def compress(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        offered = request.headers.get("Accept-Encoding", "")
        state.accept_encodings.append(offered)
        response = await handler(request)
        if not isinstance(response, web.Response) or response.body is None:
            return response
        body = response.body
        assert isinstance(body, bytes)
        if state.force_zstd or "zstd" in offered:
            encoded, coding = zstd_frame(body), "zstd"
        elif "gzip" in offered:
            encoded, coding = gzip.compress(body), "gzip"
        else:
            return response
        return web.Response(
            status=response.status,
            body=encoded,
            headers={"Content-Type": response.content_type, "Content-Encoding": coding},
        )

    app = create_thinking_upstream(state)
    app.middlewares.append(compress)
    return app


@pytest.fixture
def upstream() -> ZstdUpstream:
    return ZstdUpstream()


@pytest.fixture
async def start(
    upstream: ZstdUpstream,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> Callable[..., Awaitable[Client]]:
    server = await aiohttp_server(create_zstd_upstream(upstream))
    url = str(server.make_url("")).rstrip("/")

    async def start(yaml: dict[str, Any] | None = None, **client: Any) -> Client:
        app = create_app(parse_config(yaml or {}, default_upstream=url))
        return await aiohttp_client(app, **client)

    return start


def test_the_zstd_frame_is_a_zstd_frame() -> None:
    frame = zstd_frame(b"hello")
    assert frame[:4] == bytes.fromhex("28b52ffd")
    assert frame[-5:] == b"hello" and int.from_bytes(frame[6:9], "little") == (5 << 3) | 1


@pytest.mark.parametrize(
    ("offered", "sent"),
    [
        ("gzip, deflate, zstd", "gzip, deflate"),
        ("zstd, br", "identity"),
        ("br;q=1.0, gzip;q=0.8", "gzip;q=0.8"),
        ("gzip;q=0, zstd", "identity"),
        ("*", "identity"),
        ("GZIP", "GZIP"),
        ("identity", "identity"),
    ],
)
def test_accept_encoding_is_narrowed_to_what_the_observer_reads(offered: str, sent: str) -> None:
    assert readable_accept_encoding(offered) == sent


KEY = {"Authorization": "Bearer sk-client-with-a-key"}


async def test_a_client_offering_zstd_still_gets_its_reasoning_restored(
    start: Callable[..., Awaitable[Client]], upstream: ZstdUpstream
) -> None:
    proxy = await start()
    # a client with a key: the stash keeps nothing for an anonymous one (issue 15)
    headers = {"Accept-Encoding": LITELLM, **KEY}
    first = await proxy.post(URL, data=turn_one(), headers=headers)
    assert first.status == 200, await first.text()
    assert first.headers["Content-Encoding"] == "gzip"  # one the client offered
    message = (await first.json())["choices"][0]["message"]
    assert upstream.accept_encodings[-1] == "gzip, deflate"  # zstd was not offered upstream
    with capture_logs() as logs:
        second = await proxy.post(URL, data=turn_two(message), headers=headers)
        assert second.status == 200, await second.text()
    assert upstream.received[-1]["messages"][1]["reasoning_content"] == upstream.reasonings[0]
    assert "reasoning_placeholder" not in [entry["event"] for entry in logs]


async def test_a_body_the_observer_cannot_read_is_logged(
    start: Callable[..., Awaitable[Client]], upstream: ZstdUpstream
) -> None:
    """An upstream that answers zstd although only gzip was offered: the client gets the body
    as it came, and the log says why the next turn will carry a placeholder."""
    upstream.force_zstd = True
    proxy = await start(auto_decompress=False)
    with capture_logs() as logs:
        first = await proxy.post(URL, data=turn_one(), headers={"Accept-Encoding": LITELLM, **KEY})
        assert first.status == 200
        assert first.headers["Content-Encoding"] == "zstd"
        assert (await first.read())[:4] == bytes.fromhex("28b52ffd")  # relayed untouched
    [event] = [entry for entry in logs if entry["event"] == "reasoning_not_observed"]
    assert (event["reason"], event["encoding"]) == ("unreadable_content_encoding", "zstd")
    call = {
        "id": upstream.call_ids[0],
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
    }
    with capture_logs() as logs:
        second = await proxy.post(URL, data=turn_two({"tool_calls": [call]}), headers=KEY)
        assert second.status == 200
    assert "reasoning_placeholder" in [entry["event"] for entry in logs]


@pytest.mark.parametrize(
    "yaml", [{"profile": "passthrough"}, {"reasoning": {"store": "off"}}], ids=["no-rule", "off"]
)
async def test_unobserved_requests_keep_the_clients_accept_encoding(
    start: Callable[..., Awaitable[Client]], upstream: ZstdUpstream, yaml: dict[str, Any]
) -> None:
    """Narrowing changes what the client asked for only when the response is to be observed."""
    proxy = await start(yaml, auto_decompress=False)
    response = await proxy.post(URL, data=turn_one(), headers={"Accept-Encoding": LITELLM})
    assert response.status == 200
    assert response.headers["Content-Encoding"] == "zstd"
    assert upstream.accept_encodings == [LITELLM]
    body = await response.read()
    assert orjson.loads(body[9:])["choices"][0]["message"]["tool_calls"]
