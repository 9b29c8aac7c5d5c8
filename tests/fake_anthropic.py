"""A fake *strict* Anthropic Messages endpoint for end-to-end tests, on loopback:
``chatmend emulate``'s Messages contract, envelope, answers and SSE events
(tools/emulate/messages.py), plus recording, a required key and the hooks the tests need.

It refuses what a profile's Messages contract refuses (rules/providers/contract/messages.py,
each check citing its public source), in Anthropic's envelope or, for DeepSeek's endpoint,
OpenAI's; ``/v1/messages/count_tokens`` answers a fixed count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from proxy.relay.upstream import anthropic_betas
from rules.providers.contract.messages import MESSAGES_CORE, Contract
from tests.fake_upstream import Received
from tools.emulate import messages as emulate_messages

TEXT = "Hello from the strict fake Anthropic."


@dataclass
class FakeAnthropic:
    """State shared between the fake's handlers and the test."""

    received: list[Received] = field(default_factory=list)
    #: The contract it applies (a profile's ``messages_contract``).
    contract: Contract = field(default_factory=lambda: dict(MESSAGES_CORE))
    #: ``anthropic`` or ``openai`` (DeepSeek's Anthropic endpoint answers in OpenAI's shape).
    envelope: str = "anthropic"
    #: The key it requires in ``x-api-key`` (or ``Authorization: Bearer``), if any.
    api_key: str | None = None
    calls: int = 0


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

    async def messages(request: web.Request) -> web.StreamResponse:
        body = await record(request)
        if not authorized(request):
            return emulate_messages.error_response(
                "invalid x-api-key", state.envelope, 401, "authentication_error"
            )
        betas = anthropic_betas(request.headers)
        refused = emulate_messages.rejection(body, state.contract, state.envelope, betas)
        if refused is not None:
            return refused
        state.calls += 1
        return await emulate_messages.answer(request, body, state.calls, TEXT)

    async def count_tokens(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response({"input_tokens": 42})

    app = web.Application()
    app.router.add_post("/{prefix:.*}v1/messages/count_tokens", count_tokens)
    app.router.add_post("/{prefix:.*}v1/messages", messages)
    return app
