"""A fake *strict* OpenAI-compatible upstream for end-to-end tests: ``chatmend emulate``'s
contract, envelope and SSE chunks, plus recording and the hooks the tests need.

It rejects broken chat payloads the way DeepSeek-class providers do, with the real error texts
quoted in rules/providers/contract/ (the public source cited next to each check), and otherwise
answers a
canned completion (SSE when ``stream: true``). It records every request it receives.
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from rules.providers.contract import Contract, violations
from tools.emulate.chat import sse_chunk
from tools.emulate.errors import provider_error


@dataclass
class Received:
    method: str
    path_qs: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeUpstream:
    """State shared between the fake's handlers and the test."""

    received: list[Received] = field(default_factory=list)
    #: Number of SSE chunks a streamed completion sends, and the delay between them.
    stream_chunks: int = 5
    stream_delay: float = 0.0
    #: Set when a streaming response was cut short because the proxy closed the connection.
    stream_aborted: asyncio.Event = field(default_factory=asyncio.Event)
    chunks_sent: int = 0
    #: The contract it applies (a profile's, with that provider's texts and statuses);
    #: ``None``: the default contract.
    contract: Contract | None = None


def strict_errors(payload: Any, contract: Contract | None = None) -> list[str]:
    """Every rejection a strict provider would give this chat payload (empty: accepted): the
    product's own contract (rules/providers/contract.py), so the tests hold the rules to it."""
    return [violation.message for violation in violations(payload, contract)]


COMPLETION = {
    "id": "chatcmpl-fake",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "deepseek-chat",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello from the strict fake."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
}


def create_fake_upstream(state: FakeUpstream) -> web.Application:
    async def record(request: web.Request) -> bytes:
        body = await request.read()
        state.received.append(
            Received(request.method, request.rel_url.raw_path_qs, dict(request.headers), body)
        )
        return body

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await record(request)
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return provider_error(400, "Failed to deserialize the JSON body into the target type")
        errors = violations(payload, state.contract)
        if errors:
            return provider_error(errors[0].status, errors[0].message)
        if payload.get("stream"):
            return await _stream(request, state)
        data = orjson.dumps(COMPLETION)
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            return web.Response(
                body=gzip.compress(data),
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
        return web.Response(body=data, content_type="application/json")

    async def models(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response({"object": "list", "data": [{"id": "deepseek-chat"}]})

    async def echo(request: web.Request) -> web.Response:
        body = await record(request)
        return web.Response(body=body, status=201, headers={"X-Echo": "yes"})

    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/chat/completions", chat)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_route("*", "/echo/{tail:.*}", echo)
    app.router.add_post("/v1/embeddings", echo)
    return app


async def _stream(request: web.Request, state: FakeUpstream) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    try:
        await response.write(sse_chunk(""))
        for number in range(state.stream_chunks):
            if state.stream_delay:
                await asyncio.sleep(state.stream_delay)
            await response.write(sse_chunk(f"part{number} "))
            state.chunks_sent += 1
        await response.write(sse_chunk(None, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (ConnectionResetError, asyncio.CancelledError):
        state.stream_aborted.set()
        raise
    return response
