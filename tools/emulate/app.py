"""``chatmend emulate``: a local strict provider, for testing agents and proxies in CI.

It answers chat completions the way the strict provider of a profile (``--profile``, default
``deepseek``) does: a payload that profile's contract rejects gets the provider's status, error
envelope and text (the first rejection, as providers report one at a time); anything else gets a
canned completion, streamed as SSE when ``stream: true``: a call of the first function tool when
the request offers tools and its last message is not a ``tool`` result (so an agent's tool loop
runs end to end, deterministically), else text. A ``POST`` to a path ending in
``/v1/messages`` is answered as that provider's Anthropic-format endpoint would, under the
profile's Messages contract (tools/emulate/messages.py); ``/v1/messages/count_tokens`` gets a
count. A ``POST`` to a path ending in ``/responses`` is answered as that provider's Responses
endpoint would, under the profile's Responses contract (tools/emulate/responses.py).
``GET .../models`` lists one model; every other path is a 404 in the same envelope.
Nothing is forwarded anywhere.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from proxy.observe.log import get_logger
from proxy.relay.upstream import anthropic_betas
from rules.providers.profiles import DEFAULT_PROFILE, PROFILES
from tools.emulate import messages as emulate_messages
from tools.emulate import responses as emulate_responses
from tools.emulate.chat import MODEL, completion, rejection, stream_completion, tool_call
from tools.emulate.errors import provider_error

log = get_logger()


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
