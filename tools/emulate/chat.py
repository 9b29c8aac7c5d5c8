"""``chatmend emulate`` for chat completions: a strict provider's answers (tools/emulate/app.py
routes to them): its rejection of a body its contract refuses, else a canned completion, streamed
as SSE when asked."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from proxy.observe.log import get_logger
from rules.providers.contract import violations
from rules.providers.profiles import DEFAULT_PROFILE, PROFILES
from tools.emulate.errors import provider_error
from tools.emulate.text_calls import as_text

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


def tool_call(payload: Any, n: int) -> dict[str, Any] | None:
    """The call the emulator answers with: of the request's first function tool, when its last
    message is not a tool result (``None``: answer with text). ``arguments`` is ``{}``."""
    if not isinstance(payload, dict):
        return None
    tools = [
        t["function"]["name"]
        for t in payload.get("tools") or ()
        if isinstance(t, dict)
        and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str)
    ]
    messages = payload.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not tools or (isinstance(last, dict) and last.get("role") == "tool"):
        return None
    call_id = f"call_emulated_{n}"
    return {"id": call_id, "type": "function", "function": {"name": tools[0], "arguments": "{}"}}


def completion(
    call: dict[str, Any] | None, text_calls: str | None = None, payload: Any = None
) -> dict[str, Any]:
    """The canned completion: text, or the tool call (written as text in ``text_calls``'s
    format, with ``stop``, when given: tools/emulate/text_calls.py)."""
    if call is None:
        return COMPLETION
    message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
    finish = "tool_calls"
    if text_calls is not None:
        message = {"role": "assistant", "content": as_text(text_calls, call, payload)}
        finish = "stop"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {**COMPLETION, "choices": [choice]}


def sse_chunk(
    content: str | None, finish: str | None = None, call: dict[str, Any] | None = None
) -> bytes:
    """One ``chat.completion.chunk`` event (``call``: a whole tool call in one delta)."""
    delta: dict[str, Any] = {} if content is None else {"content": content}
    if call is not None:
        delta = {"tool_calls": [{"index": 0, **call}]}
    event = {
        "id": COMPLETION["id"],
        "object": "chat.completion.chunk",
        "created": COMPLETION["created"],
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(event) + b"\n\n"


def rejection(body: bytes, profile: str = DEFAULT_PROFILE) -> web.Response | None:
    """The error ``profile``'s provider gives this request body, or ``None`` if it accepts it."""
    envelope = PROFILES[profile].envelope
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = "Failed to deserialize the JSON body into the target type"
        return provider_error(400, text, envelope)
    found = violations(payload, PROFILES[profile].contract)
    if not found:
        return None
    first = found[0]
    log.info("emulate_rejected", code=first.code, index=first.index, rejections=len(found))
    return provider_error(first.status, first.message, envelope)


#: How many characters of a call written as text go in one streamed chunk (a token or two).
TEXT_CALL_CHUNK = 7


async def stream_completion(
    request: web.Request,
    *,
    chunks: int = 5,
    delay: float = 0.0,
    call: dict[str, Any] | None = None,
    text_calls: str | None = None,
    payload: Any = None,
) -> web.StreamResponse:
    """The canned completion as SSE: a role chunk, ``chunks`` text chunks, stop, ``[DONE]``
    (or, with ``call``, the tool call in one chunk and ``tool_calls``; with ``text_calls`` too,
    the call written as text, a few characters per chunk, then ``stop``)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(sse_chunk(""))
    if call is not None and text_calls is not None:
        text = as_text(text_calls, call, payload)
        for at in range(0, len(text), TEXT_CALL_CHUNK):
            await response.write(sse_chunk(text[at : at + TEXT_CALL_CHUNK]))
        await response.write(sse_chunk(None, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
    if call is not None:
        await response.write(sse_chunk(None, call=call))
        await response.write(sse_chunk(None, "tool_calls"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
    for number in range(chunks):
        if delay:
            await asyncio.sleep(delay)
        await response.write(sse_chunk(f"part{number} "))
    await response.write(sse_chunk(None, "stop"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response
