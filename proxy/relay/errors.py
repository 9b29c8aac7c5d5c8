"""Errors chatmend answers itself, in the OpenAI error shape clients already parse."""

from __future__ import annotations

import orjson
from aiohttp import web


def error_response(status: int, message: str, code: str, kind: str) -> web.Response:
    """An OpenAI-style error body: ``{"error": {"message", "type", "code"}}``."""
    body = orjson.dumps({"error": {"message": message, "type": kind, "code": code}})
    return web.Response(status=status, body=body, content_type="application/json")


def closing(response: web.Response) -> web.Response:
    """``response``, closing the connection after it: the body it refused may still be on its
    way (aiohttp reads and discards it for at most ``lingering_time``, 10 s, then closes;
    nothing is inflated, nothing kept), and no next request may follow on that connection."""
    response.force_close()
    return response


def bad_path(reason: str) -> web.Response:
    return error_response(
        400, f"Request path refused: {reason}.", "invalid_path", "invalid_request_error"
    )


def route_removed() -> web.Response:
    return error_response(
        404,
        "This chatmend route was removed from the configuration.",
        "route_removed",
        "invalid_request_error",
    )


def method_not_allowed(allowed: str) -> web.Response:
    response = error_response(
        405, "Method not allowed.", "method_not_allowed", "invalid_request_error"
    )
    response.headers["Allow"] = allowed
    return response


def unauthorized(route: str) -> web.Response:
    response = error_response(
        401,
        f"This chatmend route ({route}) needs one of its client tokens as "
        "'Authorization: Bearer <token>' (or 'x-api-key: <token>', 'api-key: <token>'); "
        "the provider key is held by chatmend.",
        "invalid_api_key",
        "invalid_request_error",
    )
    response.headers["WWW-Authenticate"] = 'Bearer realm="chatmend"'
    return response


def too_large(max_body_bytes: int) -> web.Response:
    return error_response(
        413,
        f"Request body exceeds chatmend's max_body_bytes ({max_body_bytes} bytes).",
        "request_too_large",
        "invalid_request_error",
    )


#: Seconds a client refused for load is told to wait (``Retry-After``).
RETRY_AFTER_SECONDS = 2


def overloaded(limit: int) -> web.Response:
    """503: the requests in flight already hold ``inflight_body_bytes`` of bodies."""
    response = error_response(
        503,
        f"chatmend holds its limit of request bodies in flight ({limit} bytes, "
        "inflight_body_bytes); retry shortly.",
        "overloaded",
        "server_error",
    )
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def body_timeout(seconds: float) -> web.Response:
    return closing(
        error_response(
            408,
            f"The request body did not arrive within client_body_timeout ({seconds:g} s).",
            "request_timeout",
            "invalid_request_error",
        )
    )


def too_deep() -> web.Response:
    return error_response(
        400,
        "The request body nests JSON deeper than 1024 levels, chatmend's limit.",
        "json_too_deep",
        "invalid_request_error",
    )


def upstream_timeout() -> web.Response:
    return error_response(
        504, "The upstream did not answer in time.", "upstream_timeout", "upstream_error"
    )


def upstream_unreachable() -> web.Response:
    return error_response(
        502, "The upstream could not be reached.", "upstream_unreachable", "upstream_error"
    )


def internal_error() -> web.Response:
    return error_response(500, "chatmend internal error", "proxy_error", "server_error")
