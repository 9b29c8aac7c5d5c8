"""A fake *strict* Responses API upstream for end-to-end tests.

It rejects a broken ``/v1/responses`` body the way OpenAI's Responses endpoint does, with the
texts of docs/providers.md#openai-responses (and docs/providers.md#openai-request for
``context_management``: this fake is no direct OpenAI route) through the product's own Responses
contract, and otherwise answers a canned Response (SSE events when ``stream: true``). It records
every body it receives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from rules.providers.contract.responses import violations
from tools.emulate.errors import provider_error
from tools.emulate.responses import response_object as emulated_response
from tools.emulate.responses import sse_event

TEXT = "Hello from the strict Responses fake."


@dataclass
class FakeResponses:
    received: list[bytes] = field(default_factory=list)
    #: Deltas a streamed response sends.
    deltas: tuple[str, ...] = ("Hello ", "from ", "the ", "stream.")


def response_object(model: str, text: str = TEXT) -> dict[str, Any]:
    """The canned Response: chatmend emulate's shape, holding one assistant message."""
    message = {
        "type": "message",
        "id": "msg_fake",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {**emulated_response({"model": model}, 0, [message]), "id": "resp_fake"}


def create_fake_responses(state: FakeResponses) -> web.Application:
    async def responses(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        state.received.append(body)
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return provider_error(400, "We could not parse the JSON body of your request.")
        errors = violations(payload)
        if errors:
            return provider_error(errors[0].status, errors[0].message)
        model = str(payload.get("model"))
        if not payload.get("stream"):
            return web.json_response(response_object(model))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        text = "".join(state.deltas)
        started = {**response_object(model, ""), "status": "in_progress", "output": []}
        await response.write(sse_event("response.created", 0, response=started))
        for n, delta in enumerate(state.deltas, start=1):
            await response.write(
                sse_event(
                    "response.output_text.delta",
                    n,
                    item_id="msg_fake",
                    output_index=0,
                    content_index=0,
                    delta=delta,
                    logprobs=[],
                )
            )
        done = response_object(model, text)
        await response.write(sse_event("response.completed", len(state.deltas) + 1, response=done))
        await response.write_eof()
        return response

    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/responses", responses)
    return app
