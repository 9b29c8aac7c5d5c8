"""A fake *strict* OpenAI-compatible upstream for end-to-end tests.

It rejects broken chat payloads the way DeepSeek-class providers do, with the real error texts
quoted in ../shared/provider-errors.md (row cited next to each check), and otherwise answers a
canned completion (SSE when ``stream: true``). It records every request it receives.
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web


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


def strict_errors(payload: Any) -> list[str]:
    """Every rejection a strict provider would give this chat payload (empty: accepted)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        return ["Failed to deserialize the JSON body into the target type"]
    messages: list[Any] = payload["messages"]
    errors: list[str] = []
    seen_results: set[Any] = set()
    pending: list[Any] = []  # call ids of the last assistant not yet answered
    previous_role: str | None = None
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if pending and role != "tool":
            # provider-errors.md 1.A, DeepSeek (langgenius/dify#32222): a call with no result
            # in the tool messages right after its assistant
            errors.append(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. (insufficient tool messages following "
                "tool_calls message)"
            )
            pending = []
        if role == "assistant":
            assert isinstance(message, dict)
            if previous_role == "assistant":
                # provider-errors.md 1.B, deepseek-reasoner (deepseek-ai/DeepSeek-R1#21)
                errors.append(
                    "deepseek-reasoner does not support successive user or assistant messages "
                    f"(messages[{index - 1}] and messages[{index}] in your input). You should "
                    "interleave the user/assistant messages in the message sequence."
                )
            errors.extend(_assistant_errors(message, index))
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                pending = [c.get("id") for c in calls if isinstance(c, dict)]
        elif role == "tool":
            assert isinstance(message, dict)
            tool_call_id = message.get("tool_call_id")
            if not isinstance(tool_call_id, str) or not tool_call_id:
                # provider-errors.md 1.A, OpenAI/Azure (langchain-ai/langchain#22600)
                errors.append(
                    "Missing parameter 'tool_call_id': messages with role 'tool' must have a "
                    "'tool_call_id'."
                )
                previous_role = role
                continue
            if tool_call_id in seen_results:
                # provider-errors.md 1.A, DeepSeek (craft-ai-agents/craft-agents-oss#621)
                errors.append(f"Duplicate value for 'tool_call_id' of in message[{index}]")
            seen_results.add(tool_call_id)
            if tool_call_id in pending:
                pending.remove(tool_call_id)
            else:
                # provider-errors.md 1.A, DeepSeek (FoundationAgents/OpenManus#23): a result
                # before any call, after another message, or for a call of an earlier block
                errors.append(
                    "Messages with role 'tool' must be a response to a preceding message "
                    "with 'tool_calls'"
                )
        previous_role = role
    if pending:
        errors.append(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. (insufficient tool messages following "
            "tool_calls message)"
        )
    call_ids = [
        call.get("id")
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list)
        for call in message["tool_calls"]
        if isinstance(call, dict)
    ]
    if len(call_ids) != len(set(call_ids)):
        # provider-errors.md 1.A: DeepSeek checks uniqueness across the whole request
        # (hermes-agent#79221); the reported text names the duplicated id.
        errors.append("Duplicate value for 'tool_call_id' in tool_calls")
    return errors


def _assistant_errors(message: dict[str, Any], index: int) -> list[str]:
    errors: list[str] = []
    calls = message.get("tool_calls")
    if "tool_calls" in message and (not isinstance(calls, list) or not calls):
        # provider-errors.md 1.A, DeepSeek via OpenCode (anomalyco/opencode#41860)
        errors.append(
            f"Invalid 'messages[{index}].tool_calls': empty array. Expected an array with "
            "minimum length 1, but got an empty array instead."
        )
    content = message.get("content")
    if not calls and content in (None, "", []):
        # provider-errors.md 1.C, DeepSeek V3 (carlrobertoh/ProxyAI#830)
        errors.append("Invalid assistant message: content or tool_calls must be set")
    for position, call in enumerate(calls if isinstance(calls, list) else []):
        arguments = call.get("function", {}).get("arguments") if isinstance(call, dict) else None
        if not isinstance(arguments, str):
            # provider-errors.md 1.A, OpenAI (aaif-goose/goose-mobile#20)
            errors.append(
                f"Invalid type for 'messages[{index}].tool_calls[{position}].function.arguments'"
                f": expected a string, but got {type(arguments).__name__} instead."
            )
            continue
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            # provider-errors.md 1.A, unattributed Moonshot-like (justrach/codegraff#752)
            errors.append(
                f"Invalid request: messages.{index}.tool_calls.{position}.function.arguments: "
                "arguments must be a valid JSON object string"
            )
    return errors


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


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta: dict[str, Any] = {} if content is None else {"content": content}
    event = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "deepseek-chat",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(event) + b"\n\n"


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
            return _error(400, "Failed to deserialize the JSON body into the target type")
        errors = strict_errors(payload)
        if errors:
            return _error(400, errors[0])
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
        await response.write(_chunk(""))
        for number in range(state.stream_chunks):
            if state.stream_delay:
                await asyncio.sleep(state.stream_delay)
            await response.write(_chunk(f"part{number} "))
            state.chunks_sent += 1
        await response.write(_chunk(None, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (ConnectionResetError, asyncio.CancelledError):
        state.stream_aborted.set()
        raise
    return response


def _error(status: int, message: str) -> web.Response:
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }
    return web.json_response(body, status=status)
