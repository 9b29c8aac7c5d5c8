"""Issue 27: no input, from a client or an upstream, stalls or kills the process. Each test
replays an attack of the second round against a real `chatmend serve` (a hostile fake upstream
where the attack is the upstream's), then checks the bound the fix sets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.proxy.test_operate import serving

Server = Callable[..., Awaitable[TestServer]]

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
KEY = {"Authorization": "Bearer sk-client-a"}  # a credential: the response is observed
#: What a hostile upstream streams after its first deltas: far more than the observer's bound.
ENDLESS_BYTES = 96 * 1024 * 1024
PIECE = 64 * 1024


def _status_kib(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` memory field: ``VmRSS`` now, ``VmHWM`` its peak so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _chat_event(delta: dict[str, Any]) -> bytes:
    return _sse({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]})


def _endless_chat() -> tuple[list[bytes], bytes]:
    """A thinking turn whose arguments never end: reasoning, a call, then ENDLESS_BYTES of
    argument pieces (the first events, and the piece repeated)."""
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}
    head = [
        _chat_event({"reasoning_content": "I call f."}),
        _chat_event({"tool_calls": [call]}),
    ]
    more = {"index": 0, "function": {"arguments": "a" * PIECE}}
    return head, _chat_event({"tool_calls": [more]})


def _endless_messages() -> tuple[list[bytes], bytes]:
    """The same on the Messages front: a thinking block, a tool_use, endless input_json_delta."""
    thinking = {"type": "thinking", "thinking": "I call f.", "signature": "sig"}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    head = [
        _sse({"type": "message_start", "message": {"id": "msg_1", "content": []}}),
        _sse({"type": "content_block_start", "index": 0, "content_block": thinking}),
        _sse({"type": "content_block_stop", "index": 0}),
        _sse({"type": "content_block_start", "index": 1, "content_block": tool}),
    ]
    piece = {"type": "input_json_delta", "partial_json": "a" * PIECE}
    return head, _sse({"type": "content_block_delta", "index": 1, "delta": piece})


async def _hostile_upstream(aiohttp_server: Server, head: list[bytes], piece: bytes) -> str:
    async def endless(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in head:
            await response.write(event)
        for _ in range(ENDLESS_BYTES // len(piece)):
            await response.write(piece)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/{tail:.*}", endless)
    return base_url(await aiohttp_server(app))


@pytest.mark.slow
@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_an_endless_observed_stream_keeps_the_process_alive_and_small(
    api: str, tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: 2 s of an endless arguments stream grew RSS 54 -> 783 MB, then orjson segfaulted
    on the giant string at the stream's end. Now the observer gives up at its bound, counted,
    and the client still gets every byte."""
    head, piece = _endless_chat() if api == "chat" else _endless_messages()
    url = await _hostile_upstream(aiohttp_server, head, piece)
    config = tmp_path / "chatmend.yaml"
    config.write_text(f"upstream: {{url: '{url}'}}\nprofile: deepseek\n")
    if api == "chat":
        path = CHAT
        body: dict[str, Any] = {"model": "deepseek-v4-pro", "stream": True, "messages": []}
        body["messages"] = [{"role": "user", "content": "go"}]
    else:
        path = MESSAGES
        body = {
            "model": "deepseek-v4-pro",
            "stream": True,
            "max_tokens": 1024,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [{"role": "user", "content": "go"}],
        }
    expected = sum(map(len, head)) + len(piece) * (ENDLESS_BYTES // len(piece))
    async with serving(config) as proxy, aiohttp.ClientSession() as http:
        before = _status_kib(proxy.process.pid, "VmRSS")
        received = 0
        async with http.post(proxy.url + path, json=body, headers=KEY) as response:
            assert response.status == 200
            async for chunk in response.content.iter_any():
                received += len(chunk)
        grown = _status_kib(proxy.process.pid, "VmHWM") - before  # the peak, not what is left
        assert grown < 48 * 1024, f"RSS grew {grown} KiB"  # the bound is 8 MiB kept
        metrics = await (await http.get(proxy.url + "/metrics")).text()
        (event,) = await proxy.wait_for("limit_exceeded")
        assert proxy.process.returncode is None
    assert received == expected  # the relay went on untouched
    assert event["limit"] == "observed_response" and event["bound"] == "observed_bytes"
    assert 'chatmend_limits_total{limit="observed_response"} 1.0' in metrics
