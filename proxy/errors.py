"""Errors chatmend answers itself, in the OpenAI error shape clients already parse."""

from __future__ import annotations

import orjson
from aiohttp import web


def error_response(status: int, message: str, code: str, kind: str) -> web.Response:
    """An OpenAI-style error body: ``{"error": {"message", "type", "code"}}``."""
    body = orjson.dumps({"error": {"message": message, "type": kind, "code": code}})
    return web.Response(status=status, body=body, content_type="application/json")
