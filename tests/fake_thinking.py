"""A fake thinking-mode upstream for the reasoning stash's end-to-end tests.

Turn 1 (a request whose last message is the user's) is answered with reasoning and a tool call,
as DeepSeek's thinking mode answers (streamed as SSE when ``stream: true``, the reasoning and
the arguments in several deltas). Every request is first judged by ``chatmend emulate``'s
deepseek contract, so a later turn whose tool-call turn lacks ``reasoning_content`` gets
DeepSeek V4's 400 (docs/providers.md#deepseek-reasoning): a strict thinking-mode upstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tools.emulate.chat import rejection
from tools.emulate.text_calls import WRITERS

MODEL = "deepseek-v4-pro"


@dataclass
class ThinkingUpstream:
    received: list[dict[str, Any]] = field(default_factory=list)
    #: Every reasoning text and tool-call id answered so far, in order.
    reasonings: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    rejected: int = 0
    #: The profile whose provider contract judges every request (``chatmend emulate``'s).
    profile: str = "deepseek"
    #: Write the tool call as DSML text in ``content`` with ``stop`` (as DeepSeek's API does
    #: for some calls, deepseek-ai/DeepSeek-V3#1244), not as a ``tool_calls`` entry.
    as_text: bool = False

    def reasoning(self, number: int) -> str:
        return f"PRIVATE-THOUGHT-{number}: the user wants a.txt, so I call read_file on it."


def turn_two(turn_one: dict[str, Any], *, model: str = MODEL, stream: bool = False) -> bytes:
    """The client's next request: the assistant's tool-call turn as an SDK keeps it, without
    ``reasoning_content``, then the tool's result."""
    assistant = {"role": "assistant", "content": None, "tool_calls": turn_one["tool_calls"]}
    call = turn_one["tool_calls"][0]
    return orjson.dumps(
        {
            "model": model,
            "stream": stream,
            "messages": [
                {"role": "user", "content": "Read a.txt"},
                assistant,
                {"role": "tool", "tool_call_id": call["id"], "content": "hello"},
            ],
        }
    )


#: The tool turn one may declare (the reply rules act only for a request that declared tools).
READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


def turn_one(*, model: str = MODEL, stream: bool = False, tools: bool = False) -> bytes:
    """The client's first request: a question the model answers with a tool call."""
    body: dict[str, Any] = {
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "Read a.txt"}],
    }
    if tools:
        body["tools"] = [READ_FILE]
    return orjson.dumps(body)


def _event(delta: dict[str, Any], finish: str | None = None, created: int = 1700000000) -> bytes:
    event = {
        "id": "chatcmpl-thinking",
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(event) + b"\n\n"


def create_thinking_upstream(state: ThinkingUpstream) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        payload = orjson.loads(body)
        state.received.append(payload)
        rejected = rejection(body, state.profile)
        if rejected is not None:
            state.rejected += 1
            return rejected
        messages = payload["messages"]
        if messages[-1].get("role") != "user":
            answer = {"role": "assistant", "content": "a.txt says hello."}
            return web.json_response(_completion(answer, "stop"))
        number = len(state.reasonings) + 1
        text = state.reasoning(number)
        cid = f"call_{number:02d}_x{len(state.received)}"
        state.reasonings.append(text)
        state.call_ids.append(cid)
        arguments = '{"path": "a.txt"}'
        if state.as_text:
            return await _as_text(request, payload, text)
        if not payload.get("stream"):
            message = {
                "role": "assistant",
                "content": "",
                "reasoning_content": text,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            }
            return web.json_response(_completion(message, "tool_calls"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_event({"role": "assistant", "content": None}))
        third = len(text) // 3
        for piece in (text[:third], text[third : 2 * third], text[2 * third :]):
            await response.write(_event({"reasoning_content": piece, "content": None}))
        first = {"index": 0, "id": cid, "type": "function"}
        call = {**first, "function": {"name": "read_file", "arguments": ""}}
        await response.write(_event({"tool_calls": [call]}))
        for piece in (arguments[:7], arguments[7:]):
            more = {"index": 0, "function": {"arguments": piece}}
            await response.write(_event({"tool_calls": [more]}))
        await response.write(_event({}, "tool_calls"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def _as_text(request: web.Request, payload: dict[str, Any], text: str) -> web.StreamResponse:
    """Turn 1 answered with reasoning, then the call written as DSML in ``content``, ``stop``."""
    call = WRITERS["deepseek-dsml"]("read_file", {"path": "a.txt"}, "")
    if not payload.get("stream"):
        message = {"role": "assistant", "content": call, "reasoning_content": text}
        return web.json_response(_completion(message, "stop"))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(_event({"role": "assistant", "content": None}))
    await response.write(_event({"reasoning_content": text, "content": None}))
    for at in range(0, len(call), 6):
        await response.write(_event({"content": call[at : at + 6]}))
    await response.write(_event({}, "stop"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-thinking",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
