"""``chatmend emulate``: a local strict provider, for testing agents and proxies in CI.

It answers chat completions the way the strict provider of a profile (``--profile``, default
``deepseek``) does: a payload that profile's contract rejects gets the provider's status, error
envelope and text (the first rejection, as providers report one at a time); anything else gets a
canned completion, streamed as SSE when ``stream: true``: a call of the first function tool when
the request offers tools and its last message is not a ``tool`` result (so an agent's tool loop
runs end to end, deterministically), else text. A ``POST`` to a path ending in
``/v1/messages`` is answered as that provider's Anthropic-format endpoint would, under the
profile's Messages contract (proxy/emulate_messages.py); ``/v1/messages/count_tokens`` gets a
count. A ``POST`` to a path ending in ``/responses`` is answered as that provider's Responses
endpoint would, under the profile's Responses contract (proxy/emulate_responses.py).
``GET .../models`` lists one model; every other path is a 404 in the same envelope.
Nothing is forwarded anywhere.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from proxy import emulate_messages, emulate_responses, emulate_text_calls
from proxy.log import get_logger
from proxy.upstream import anthropic_betas
from rules.providers.contract import violations
from rules.providers.profiles import DEFAULT_PROFILE, PROFILES

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


def provider_error(status: int, message: str, envelope: str = "openai") -> web.Response:
    """A rejected request in the provider's envelope: ``openai`` (DeepSeek, OpenAI and most
    compatible providers) or ``mistral`` (an ``object: error`` body,
    docs/providers.md#mistral-roles)."""
    body: dict[str, Any]
    if envelope == "mistral":
        body = {
            "object": "error",
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    else:
        error = {"message": message, "type": "invalid_request_error", "param": None}
        body = {"error": {**error, "code": "invalid_request_error"}}
    return web.json_response(body, status=status)


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
    format, with ``stop``, when given: proxy/emulate_text_calls.py)."""
    if call is None:
        return COMPLETION
    message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
    finish = "tool_calls"
    if text_calls is not None:
        text = emulate_text_calls.as_text(text_calls, call, payload)
        message = {"role": "assistant", "content": text}
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
        text = emulate_text_calls.as_text(text_calls, call, payload)
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


def create_emulator(
    *,
    chunks: int = 5,
    delay: float = 0.0,
    profile: str = DEFAULT_PROFILE,
    text_calls: str | None = None,
) -> web.Application:
    answered = 0
    responses_contract = emulate_responses.contract_of(profile)

    async def handle(request: web.Request) -> web.StreamResponse:
        nonlocal answered
        path = request.path.rstrip("/")
        if request.method == "POST" and path.endswith("/v1/messages/count_tokens"):
            return emulate_messages.count_tokens(await request.read())
        if request.method == "POST" and path.endswith("/v1/messages"):
            body = await request.read()
            chosen = PROFILES[profile]
            refused = emulate_messages.rejection(
                body,
                chosen.messages_contract,
                chosen.messages_envelope,
                anthropic_betas(request.headers),
            )
            if refused is not None:
                log.info("emulate_rejected", api="messages", status=refused.status)
                return refused
            answered += 1
            return await emulate_messages.answer(request, body, answered)
        if request.method == "POST" and path.endswith("/responses"):
            body = await request.read()
            refused = emulate_responses.rejection(
                body, responses_contract, PROFILES[profile].envelope
            )
            if refused is not None:
                log.info("emulate_rejected", api="responses", status=refused.status)
                return refused
            answered += 1
            return await emulate_responses.answer(request, body, answered)
        if request.method == "POST" and path.endswith("/chat/completions"):
            body = await request.read()
            rejected = rejection(body, profile)
            if rejected is not None:
                return rejected
            payload = orjson.loads(body)
            answered += 1
            call = tool_call(payload, answered)
            if payload.get("stream"):
                return await stream_completion(
                    request,
                    chunks=chunks,
                    delay=delay,
                    call=call,
                    text_calls=text_calls,
                    payload=payload,
                )
            return web.json_response(completion(call, text_calls, payload))
        if request.method == "GET" and path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        text = f"Unknown request URL: {request.method} {request.path}."
        return provider_error(404, text, PROFILES[profile].envelope)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
