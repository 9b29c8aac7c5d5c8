"""The error envelopes an emulated provider answers in (``Profile.envelope``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web


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
