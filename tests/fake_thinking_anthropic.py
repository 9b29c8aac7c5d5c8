"""A fake thinking-mode Anthropic-format upstream (DeepSeek's ``/anthropic`` endpoint) for the
thinking-continuity end-to-end tests.

Turn 1 (a request whose last user message answers no tool) is answered with a thinking block
(its text unique to the turn, its signature too), a text block and a ``tool_use``, as DeepSeek's
thinking mode answers; streamed as Anthropic SSE when ``stream: true``, the thinking in many
``thinking_delta`` events, then a ``signature_delta``, the input in ``input_json_delta`` pieces.
Every request is first judged by ``chatmend emulate``'s deepseek Messages contract, so a later
turn whose ``tool_use`` turn lacks thinking gets DeepSeek's 400 ("The `content[].thinking` in
the thinking mode must be passed back to the API.", docs/providers.md#anthropic-messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from rules.providers.profiles import PROFILES
from tools.emulate import messages as emulate_messages

MODEL = "deepseek-v4-pro"
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


@dataclass
class ThinkingAnthropic:
    received: list[dict[str, Any]] = field(default_factory=list)
    #: Every thinking block answered so far, in order (text and signature).
    thinking: list[dict[str, str]] = field(default_factory=list)
    rejected: int = 0
    #: The profile whose Messages contract judges every request.
    profile: str = "deepseek"

    def block(self, number: int) -> dict[str, str]:
        text = f"PRIVATE-THOUGHT-{number}: the user wants a.txt — «so» I call read_file.\n"
        return {"type": "thinking", "thinking": text * 3, "signature": f"EqQB{number}sig/+=="}


def create_thinking_anthropic(state: ThinkingAnthropic) -> web.Application:
    async def messages(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        payload = orjson.loads(body)
        state.received.append(payload)
        profile = PROFILES[state.profile]
        refused = emulate_messages.rejection(
            body, profile.messages_contract, profile.messages_envelope
        )
        if refused is not None:
            state.rejected += 1
            return refused
        last = payload["messages"][-1].get("content")
        answered = isinstance(last, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last
        )
        number = len(state.received)
        if answered:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": "a.txt says hello."}]
            stop = "end_turn"
        else:
            thinking = state.block(number)
            state.thinking.append(thinking)
            tool = {
                "type": "tool_use",
                "id": f"toolu_{number:02d}",
                "name": "read_file",
                "input": {"path": "a.txt", "options": {"lines": [1, 20], "raw": True}},
            }
            blocks = [thinking, {"type": "text", "text": "Reading it."}, tool]
            stop = "tool_use"
        n = number
        if not payload.get("stream"):
            return web.json_response(emulate_messages.message(payload, blocks, stop, n))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in _events(payload, blocks, stop, n):
            await response.write(event)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/{prefix:.*}v1/messages", messages)
    return app


def _pieces(kind: str, text: str) -> list[str]:
    """The thinking in many deltas (nine characters each), the input in pieces of five."""
    size = {"thinking": 9, "tool_use": 5}.get(kind)
    return [text] if size is None else [text[i : i + size] for i in range(0, len(text), size)]


def _events(
    payload: dict[str, Any], blocks: list[dict[str, Any]], stop: str, n: int
) -> list[bytes]:
    """Anthropic's event order, with the thinking in many deltas and the input in pieces."""
    return emulate_messages.events(payload, blocks, stop, n, split=_pieces, ping=True)
