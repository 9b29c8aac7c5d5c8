"""``chatmend emulate`` for Anthropic Messages: a strict ``/v1/messages`` endpoint.

A body the profile's Messages contract (``Profile.messages_contract``) refuses gets the
provider's status and text in its envelope (``Profile.messages_envelope``: Anthropic's
``{"type": "error", "error": {...}}``, or OpenAI's shape for DeepSeek's endpoint); a body that is
not valid JSON (a lone surrogate) gets Anthropic's parse error. Anything else gets an answer
like Anthropic's: a ``tool_use`` of the first tool when the request offers tools and its last
message holds no ``tool_result``, else text; a thinking block first when thinking is on; Server-
Sent Events (``message_start`` ... ``message_stop``) when ``stream: true``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from rules.messages.blocks import content_list, thinking_on
from rules.providers.contract.messages import Contract, violations

TEXT = "Hello from chatmend emulate."


def error_body(message: str, envelope: str, kind: str = "invalid_request_error") -> bytes:
    """An error in the provider's envelope: ``anthropic`` or ``openai``."""
    if envelope == "openai":
        error = {"message": message, "type": kind, "param": None, "code": kind}
        return orjson.dumps({"error": error})
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


def error_response(
    message: str, envelope: str, status: int = 400, kind: str = "invalid_request_error"
) -> web.Response:
    return web.Response(
        status=status, body=error_body(message, envelope, kind), content_type="application/json"
    )


def rejection(
    body: bytes, contract: Contract, envelope: str, betas: frozenset[str] = frozenset()
) -> web.Response | None:
    """The error the provider gives this body (its first rejection), or ``None``; ``betas``:
    the request's ``anthropic-beta`` values (``proxy.relay.upstream.anthropic_betas``)."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        # Anthropic's words for a lone surrogate (anthropics/claude-code#5934)
        text = (
            "The request body is not valid JSON: no low surrogate in string: line 1 column "
            f"{exc.pos + 1} (char {exc.pos})"
        )
        return error_response(text, envelope)
    found = violations(payload, contract, betas=betas)
    if not found:
        return None
    return error_response(found[0].message, envelope, found[0].status)


def reply(request: dict[str, Any], n: int, text: str = TEXT) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason of the ``n``-th answer."""
    blocks: list[dict[str, Any]] = []
    if thinking_on(request):
        blocks.append({"type": "thinking", "thinking": "Thinking.", "signature": f"sig_{n}"})
    messages = request.get("messages") or [{}]
    last = content_list(messages[-1]) or []
    answered = any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)
    tools = [t for t in request.get("tools") or () if isinstance(t, dict) and "name" in t]
    if tools and not answered:
        call = {"type": "tool_use", "id": f"toolu_emulated_{n}", "name": tools[0]["name"]}
        return [*blocks, {**call, "input": {}}], "tool_use"
    return [*blocks, {"type": "text", "text": text}], "end_turn"


def message(
    request: dict[str, Any], blocks: list[dict[str, Any]], stop: str | None, n: int
) -> dict[str, Any]:
    return {
        "id": f"msg_emulated_{n}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "claude-emulated"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


#: How a block's text is cut into its deltas: ``split(block type, text)`` -> the pieces.
Split = Callable[[str, str], list[str]]


def halves(kind: str, text: str) -> list[str]:
    """emulate's cut: a text block in two deltas, a thinking or an input in one."""
    if kind == "text":
        half = len(text) // 2
        return [text[:half], text[half:]]
    return [text]


def events(
    request: dict[str, Any],
    blocks: list[dict[str, Any]],
    stop: str,
    n: int,
    *,
    split: Split = halves,
    ping: bool = False,
) -> list[bytes]:
    """The SSE events of a streamed answer, in Anthropic's order (``ping`` after the start, as
    Anthropic sends it; ``split`` cuts each block's text into its deltas)."""
    out = [
        sse("message_start", {"type": "message_start", "message": message(request, [], None, n)})
    ]
    if ping:
        out.append(sse("ping", {"type": "ping"}))
    for index, block in enumerate(blocks):
        kind = block["type"]
        opened: dict[str, Any]
        deltas: list[dict[str, Any]]
        if kind == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in split(kind, block["text"])]
        elif kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in split(kind, block["thinking"])
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            opened = {**block, "input": {}}
            text = orjson.dumps(block["input"]).decode()
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in split(kind, text)]
        start = {"type": "content_block_start", "index": index, "content_block": opened}
        out.append(sse("content_block_start", start))
        out.extend(
            sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    out.append(sse("message_delta", {**delta, "usage": {"output_tokens": 5}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


async def answer(request: web.Request, body: bytes, n: int, text: str = TEXT) -> web.StreamResponse:
    """The answer to an accepted body: JSON, or SSE when it asks ``stream: true``."""
    payload = orjson.loads(body)
    blocks, stop = reply(payload, n, text)
    if not payload.get("stream"):
        return web.json_response(message(payload, blocks, stop, n))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for event in events(payload, blocks, stop, n):
        await response.write(event)
    await response.write_eof()
    return response


def count_tokens(body: bytes) -> web.Response:
    """``/v1/messages/count_tokens``: a rough count (bytes / 4), never refused."""
    return web.json_response({"input_tokens": max(1, len(body) // 4)})
