"""A fake *strict* Anthropic Messages endpoint for end-to-end tests, on loopback.

It refuses what a profile's Messages contract refuses (rules/providers/contract/messages.py,
each check citing its public source), with that provider's envelope: Anthropic's
``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}``, or OpenAI's
shape for DeepSeek's endpoint; a body that is not valid JSON (a lone surrogate) gets Anthropic's
parse error. Otherwise it answers like Anthropic: a ``tool_use`` of the first tool when the
request offers tools and its last message is the user's text, else text; a thinking block first
when thinking is on; Server-Sent Events (``message_start`` ... ``message_stop``) when
``stream: true``. ``/v1/messages/count_tokens`` answers a count. It records every request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from rules.anthropic.blocks import content_list, thinking_on
from rules.providers.contract.messages import Contract, violations
from tests.fake_upstream import Received

TEXT = "Hello from the strict fake Anthropic."


@dataclass
class FakeAnthropic:
    """State shared between the fake's handlers and the test."""

    received: list[Received] = field(default_factory=list)
    #: The contract it applies; ``None``: the Messages core.
    contract: Contract | None = None
    #: ``anthropic`` or ``openai`` (DeepSeek's Anthropic endpoint answers in OpenAI's shape).
    envelope: str = "anthropic"
    #: The key it requires in ``x-api-key`` (or ``Authorization: Bearer``), if any.
    api_key: str | None = None
    calls: int = 0


def error_body(message: str, envelope: str, kind: str = "invalid_request_error") -> bytes:
    if envelope == "openai":
        error = {"message": message, "type": kind, "param": None, "code": kind}
        return orjson.dumps({"error": error})
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


def reply(request: dict[str, Any], n: int) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason of the answer."""
    blocks: list[dict[str, Any]] = []
    if thinking_on(request):
        blocks.append({"type": "thinking", "thinking": "Thinking.", "signature": f"sig_fake_{n}"})
    messages = request.get("messages") or [{}]
    last = content_list(messages[-1]) or []
    answered = any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)
    tools = [t for t in request.get("tools") or () if isinstance(t, dict) and "name" in t]
    if tools and not answered:
        call = {"type": "tool_use", "id": f"toolu_fake_{n}", "name": tools[0]["name"], "input": {}}
        return [*blocks, call], "tool_use"
    return [*blocks, {"type": "text", "text": TEXT}], "end_turn"


def message(
    request: dict[str, Any], blocks: list[dict[str, Any]], stop: str, n: int
) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "claude-fake"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def events(request: dict[str, Any], blocks: list[dict[str, Any]], stop: str, n: int) -> list[bytes]:
    """The SSE events of a streamed answer, as Anthropic sends them."""
    start = message(request, [], stop, n) | {"stop_reason": None}
    out = [sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in ("Hello from ", TEXT[11:])]
        elif kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        else:
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": "{}"}]
        out.append(
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        out.extend(
            sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": stop, "stop_sequence": None}
    out.append(
        sse(
            "message_delta",
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 5}},
        )
    )
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


def create_fake_anthropic(state: FakeAnthropic) -> web.Application:
    async def record(request: web.Request) -> bytes:
        body = await request.read()
        state.received.append(
            Received(request.method, request.rel_url.raw_path_qs, dict(request.headers), body)
        )
        return body

    def authorized(request: web.Request) -> bool:
        if state.api_key is None:
            return True
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return state.api_key in (request.headers.get("x-api-key"), bearer)

    def refuse(
        message: str, status: int = 400, kind: str = "invalid_request_error"
    ) -> web.Response:
        return web.Response(
            status=status,
            body=error_body(message, state.envelope, kind),
            content_type="application/json",
        )

    async def messages(request: web.Request) -> web.StreamResponse:
        body = await record(request)
        if not authorized(request):
            return refuse("invalid x-api-key", 401, "authentication_error")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            # Anthropic's words for a lone surrogate (anthropics/claude-code#5934)
            return refuse(
                f"The request body is not valid JSON: no low surrogate in string: line 1 "
                f"column {exc.pos + 1} (char {exc.pos})"
            )
        found = violations(payload, state.contract)
        if found:
            return refuse(found[0].message, found[0].status)
        state.calls += 1
        blocks, stop = reply(payload, state.calls)
        if not payload.get("stream"):
            return web.json_response(message(payload, blocks, stop, state.calls))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events(payload, blocks, stop, state.calls):
            await response.write(event)
        await response.write_eof()
        return response

    async def count_tokens(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response({"input_tokens": 42})

    app = web.Application()
    app.router.add_post("/{prefix:.*}v1/messages/count_tokens", count_tokens)
    app.router.add_post("/{prefix:.*}v1/messages", messages)
    return app
