"""What one request's trip produces, end to end through the app (proxy/server/trip.py): the
status, chatmend's headers, the bytes the upstream got, the bytes the client got and the
``request_done`` line, for the kinds of request the fixed-cost work (docs/performance.md#fixed-cost)
must leave as they were: clean, broken, gzip, streamed, refused, a reply the reply rules rewrite,
Anthropic Messages and Responses.

The oracle is written here from the documented behaviour (README, docs/replies.md): a body no rule
changed reaches the upstream byte for byte (compressed as it came), ``X-Chatmend-Changes`` says
``0`` or ``N; rules=a,b``, the request ids are one id echoed twice when the client sent none, an
answer no reply rule changed reaches the client byte for byte, and a call written as text in a
declared tool's name becomes a call, in that request only.
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import create_app
from tests import payloads
from tests.anthropic_bodies import clean_session
from tests.transcripts import BROKEN, chat
from tools.emulate.text_calls import WRITERS

Client = TestClient[Any, Any]
CHAT = "/v1/chat/completions"
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-trip",
        "object": "chat.completion",
        "created": 1,
        "model": "deepseek-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Done."},
                "finish_reason": "stop",
            }
        ],
    }
)
MESSAGE = orjson.dumps(
    {
        "id": "msg_trip",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Done."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
)
RESPONSE = orjson.dumps(
    {"id": "resp_trip", "object": "response", "status": "completed", "output": []}
)
STREAM = (
    b"".join(
        b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": part}}]}) + b"\n\n"
        for part in ("one ", "two")
    )
    + b"data: [DONE]\n\n"
)
REFUSAL = orjson.dumps({"error": {"message": "Invalid request: no.", "type": "invalid_request"}})
#: A DeepSeek answer with its call written as text (docs/replies.md).
TEXT_CALL = WRITERS["deepseek-dsml"]("read_file", {"path": "a.py"}, "call_0")


def _tool(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


@dataclass
class Upstream:
    """Records what it got; answers by path, and on chat by the ``X-Answer`` header."""

    got: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    def app(self) -> web.Application:
        async def answer(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            self.got.append((request.path, dict(request.headers), body))
            kind = request.headers.get("X-Answer", "")
            if request.path == "/v1/messages":
                return web.Response(body=MESSAGE, content_type="application/json")
            if request.path == "/v1/responses":
                return web.Response(body=RESPONSE, content_type="application/json")
            if kind == "refuse":
                return web.Response(status=400, body=REFUSAL, content_type="application/json")
            if kind == "text-call":
                completion = orjson.loads(COMPLETION)
                completion["choices"][0]["message"]["content"] = TEXT_CALL
                return web.Response(body=orjson.dumps(completion), content_type="application/json")
            if b'"stream":true' in body:
                response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                await response.prepare(request)
                await response.write(STREAM)
                await response.write_eof()
                return response
            return web.Response(body=COMPLETION, content_type="application/json")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        return app


@pytest.fixture
async def trip(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> tuple[Client, Upstream]:
    upstream = Upstream()
    server = await aiohttp_server(upstream.app())
    url = str(server.make_url("")).rstrip("/")
    # Recovery off: a refusal is relayed as it came (recovery has tests of its own).
    config = parse_config({"recover": {"enabled": False}}, default_upstream=url)
    return await aiohttp_client(create_app(config)), upstream


async def _send(
    client: Client, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, Any, bytes, MutableMapping[str, Any]]:
    with capture_logs() as logs:
        response = await client.post(path, data=body, headers=headers or {})
        answer = await response.read()
    (done,) = [entry for entry in logs if entry["event"] == "request_done"]
    return response.status, response.headers, answer, done


def _ids(headers: Any) -> None:
    """One id, chatmend's, on both headers when the client sent none; the overhead a number."""
    assert len(headers["X-Chatmend-Request-Id"]) >= 16
    assert headers["X-Request-ID"] == headers["X-Chatmend-Request-Id"]
    assert float(headers["X-Chatmend-Overhead-Ms"]) >= 0


def _done(
    done: MutableMapping[str, Any], path: str, status: int, changes: int, outcome: str
) -> None:
    assert done["method"] == "POST" and done["path"] == path
    assert (done["status"], done["changes"], done["outcome"]) == (status, changes, outcome)
    assert done["client_request_id"] is None
    assert isinstance(done["duration_ms"], float)
    assert isinstance(done["upstream_ms"], float)


async def test_a_clean_body_goes_byte_for_byte_and_its_answer_comes_back_so(
    trip: tuple[Client, Upstream],
) -> None:
    client, upstream = trip
    body = payloads.build_variant(10, "clean")
    status, headers, answer, done = await _send(client, CHAT, body)
    assert (status, answer) == (200, COMPLETION)
    assert upstream.got[-1][2] == body
    assert headers["X-Chatmend-Changes"] == "0"
    assert "X-Chatmend-Response-Changes" not in headers
    _ids(headers)
    _done(done, CHAT, 200, 0, "completed")
    assert isinstance(done["sanitize_ms"], float)


async def test_a_broken_body_is_repaired_and_says_so(trip: tuple[Client, Upstream]) -> None:
    client, upstream = trip
    body = chat(BROKEN["empty_tool_calls"])
    status, headers, answer, done = await _send(client, CHAT, body)
    assert (status, answer) == (200, COMPLETION)
    sent = upstream.got[-1][2]
    assert sent != body
    assert "tool_calls" not in orjson.loads(sent)["messages"][1]
    count, rules = headers["X-Chatmend-Changes"].split("; rules=")
    assert int(count) == done["changes"] > 0
    assert "empty-tool-calls" in rules.split(",")
    _done(done, CHAT, 200, int(count), "completed")


async def test_a_gzip_body_no_rule_changed_goes_compressed_as_it_came(
    trip: tuple[Client, Upstream],
) -> None:
    client, upstream = trip
    body = gzip.compress(payloads.build_variant(10, "clean"))
    status, headers, answer, done = await _send(
        client, CHAT, body, {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    )
    assert (status, answer) == (200, COMPLETION)
    _, sent_headers, sent = upstream.got[-1]
    # The upstream (aiohttp) reads the body inflated; what came on the wire is the client's.
    assert sent_headers["Content-Encoding"] == "gzip"
    assert int(sent_headers["Content-Length"]) == len(body) and sent == gzip.decompress(body)
    assert headers["X-Chatmend-Changes"] == "0"
    _done(done, CHAT, 200, 0, "completed")


async def test_a_stream_comes_back_as_its_bytes(trip: tuple[Client, Upstream]) -> None:
    client, _ = trip
    body = chat(BROKEN["empty_tool_calls"], stream=True)
    status, headers, answer, done = await _send(client, CHAT, body)
    assert (status, answer) == (200, STREAM)
    assert headers["Content-Type"].startswith("text/event-stream")
    assert headers["X-Chatmend-Changes"].startswith(f"{done['changes']}; rules=")
    _ids(headers)
    _done(done, CHAT, 200, done["changes"], "completed")


async def test_a_refusal_is_relayed_as_it_came(trip: tuple[Client, Upstream]) -> None:
    client, upstream = trip
    body = payloads.build_variant(10, "clean")
    status, headers, answer, done = await _send(client, CHAT, body, {"X-Answer": "refuse"})
    assert (status, answer) == (400, REFUSAL)
    assert upstream.got[-1][2] == body
    assert headers["X-Chatmend-Changes"] == "0"
    _done(done, CHAT, 400, 0, "completed")


async def test_a_refused_method_never_reaches_the_upstream(trip: tuple[Client, Upstream]) -> None:
    client, upstream = trip
    with capture_logs() as logs:
        response = await client.request("TRACE", CHAT)
    assert response.status == 405
    assert upstream.got == []
    assert response.headers["X-Chatmend-Changes"] == "0"
    (done,) = [entry for entry in logs if entry["event"] == "request_done"]
    assert (done["status"], done["outcome"], done["upstream_ms"]) == (405, "rejected", None)


async def test_a_call_written_as_text_becomes_a_call_for_its_own_request_only(
    trip: tuple[Client, Upstream],
) -> None:
    """The reply rules' tables are made once per set of formats; which tools a request
    declared is its own: the same answer is a call for a request that declared ``read_file``,
    text for one that declared only ``write_file``, and a call again after it."""
    client, _ = trip
    reads = chat(BROKEN["empty_tool_calls"][:1], tools=[_tool("read_file")])
    writes = chat(BROKEN["empty_tool_calls"][:1], tools=[_tool("write_file")])
    answers = []
    for body in (reads, writes, reads):
        status, headers, answer, done = await _send(client, CHAT, body, {"X-Answer": "text-call"})
        assert status == 200 and done["changes"] == 0
        answers.append((headers.get("X-Chatmend-Response-Changes"), orjson.loads(answer)))
    for changed, completion in (answers[0], answers[2]):
        message = completion["choices"][0]["message"]
        assert message["tool_calls"][0]["function"]["name"] == "read_file"
        assert orjson.loads(message["tool_calls"][0]["function"]["arguments"]) == {"path": "a.py"}
        assert completion["choices"][0]["finish_reason"] == "tool_calls"
        assert changed is not None and "response-text-tool-calls" in changed
    changed, completion = answers[1]
    assert changed is None  # undeclared: the answer as the upstream wrote it
    assert completion["choices"][0]["message"] == {"role": "assistant", "content": TEXT_CALL}


async def test_a_messages_body_and_a_responses_body_go_as_they_came(
    trip: tuple[Client, Upstream],
) -> None:
    client, upstream = trip
    messages = orjson.dumps(clean_session())
    status, headers, answer, done = await _send(client, "/v1/messages", messages)
    assert (status, answer, upstream.got[-1][2]) == (200, MESSAGE, messages)
    assert headers["X-Chatmend-Changes"] == "0"
    _done(done, "/v1/messages", 200, 0, "completed")
    responses = orjson.dumps({"model": "gpt-5", "input": [{"role": "user", "content": "Hi"}]})
    status, headers, answer, done = await _send(client, "/v1/responses", responses)
    assert (status, answer, upstream.got[-1][2]) == (200, RESPONSE, responses)
    assert headers["X-Chatmend-Changes"] == "0"
    _done(done, "/v1/responses", 200, 0, "completed")
