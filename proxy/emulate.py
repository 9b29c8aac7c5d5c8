"""``chatmend emulate``: a local strict provider, for testing agents and proxies in CI.

It answers chat completions the way a strict DeepSeek-style provider does: a payload the contract
(``rules.contract``) rejects gets HTTP 400 with the provider's error envelope and text (the first
rejection, as providers report one at a time); anything else gets a canned completion, streamed
as SSE when ``stream: true``. ``GET .../models`` lists one model; every other path is a 404 in the
same envelope. Nothing is forwarded anywhere.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from proxy.log import get_logger
from rules.contract import violations

MODEL = "deepseek-chat"
COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-emulated",
    "object": "chat.completion",
    "created": 1700000000,
    "model": MODEL,
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello from chatmend emulate."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
}

log = get_logger()


def provider_error(status: int, message: str) -> web.Response:
    """The envelope DeepSeek and OpenAI use for a rejected request."""
    error = {"message": message, "type": "invalid_request_error", "param": None}
    body = {"error": {**error, "code": "invalid_request_error"}}
    return web.json_response(body, status=status)


def sse_chunk(content: str | None, finish: str | None = None) -> bytes:
    """One ``chat.completion.chunk`` event."""
    delta: dict[str, Any] = {} if content is None else {"content": content}
    event = {
        "id": COMPLETION["id"],
        "object": "chat.completion.chunk",
        "created": COMPLETION["created"],
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(event) + b"\n\n"


def rejection(body: bytes) -> web.Response | None:
    """The 400 a strict provider gives this request body, or ``None`` if it is accepted."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return provider_error(400, "Failed to deserialize the JSON body into the target type")
    found = violations(payload)
    if not found:
        return None
    log.info("emulate_rejected", code=found[0].code, index=found[0].index, rejections=len(found))
    return provider_error(400, found[0].message)


async def stream_completion(
    request: web.Request, *, chunks: int = 5, delay: float = 0.0
) -> web.StreamResponse:
    """The canned completion as SSE: a role chunk, ``chunks`` text chunks, stop, ``[DONE]``."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(sse_chunk(""))
    for number in range(chunks):
        if delay:
            await asyncio.sleep(delay)
        await response.write(sse_chunk(f"part{number} "))
    await response.write(sse_chunk(None, "stop"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def create_emulator(*, chunks: int = 5, delay: float = 0.0) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/")
        if request.method == "POST" and path.endswith("/chat/completions"):
            body = await request.read()
            rejected = rejection(body)
            if rejected is not None:
                return rejected
            if orjson.loads(body).get("stream"):
                return await stream_completion(request, chunks=chunks, delay=delay)
            return web.json_response(COMPLETION)
        if request.method == "GET" and path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        return provider_error(404, f"Unknown request URL: {request.method} {request.path}.")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
