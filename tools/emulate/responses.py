"""``chatmend emulate`` for the Responses API: a strict ``/v1/responses`` endpoint.

A body the profile's Responses contract refuses (the strict pairing of every profile: an output
answering no call before it, a call no output answers, a duplicate item id, a call_id over 64
characters; plus what the profile's provider adds: DeepSeek's strict adjacency, vLLM's argument
JSON) gets the provider's status and text in its error envelope (``Profile.envelope``), its
first rejection only, as providers report one at a time. Anything else gets a Response like
OpenAI's: a ``function_call`` of the first function tool when the request offers tools and its
``input`` does not end with a ``function_call_output`` (so a Responses agent runs one tool round
trip), else a text message; as Server-Sent Events (``response.created`` ...
``response.completed``) when ``stream: true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from rules.providers.contract.responses import violations
from rules.providers.planner import compile_responses_plan
from rules.providers.profiles import PROFILES
from tools.emulate.errors import provider_error

TEXT = "Hello from chatmend emulate."

Contract = Mapping[str, Mapping[str, Any]]


def contract_of(profile: str) -> Contract:
    """The Responses contract of ``profile``'s provider (the plan's, without the operator)."""
    return compile_responses_plan(profile=PROFILES[profile]).contract


def rejection(body: bytes, contract: Contract, envelope: str) -> web.Response | None:
    """The error the provider gives this body (its first rejection), or ``None``."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        # OpenAI's words for a body it cannot read
        return provider_error(400, "We could not parse the JSON body of your request.", envelope)
    found = violations(payload, contract)
    if not found:
        return None
    return provider_error(found[0].status, found[0].message, envelope)


def _tool(request: dict[str, Any]) -> str | None:
    """The name of the request's first function tool, if any."""
    for tool in request.get("tools") or ():
        if isinstance(tool, dict) and tool.get("type") == "function" and tool.get("name"):
            return str(tool["name"])
    return None


def output_items(request: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The ``n``-th answer's output: a function call, or a text message."""
    items = request.get("input")
    last = items[-1] if isinstance(items, list) and items else None
    answered = isinstance(last, dict) and last.get("type") == "function_call_output"
    name = _tool(request)
    if name is not None and not answered:
        return [
            {
                "type": "function_call",
                "id": f"fc_emulated_{n}",
                "call_id": f"call_emulated_{n}",
                "name": name,
                "arguments": "{}",
                "status": "completed",
            }
        ]
    text = {"type": "output_text", "text": TEXT, "annotations": []}
    message = {"type": "message", "role": "assistant", "status": "completed"}
    return [{**message, "id": f"msg_emulated_{n}", "content": [text]}]


def response_object(
    request: dict[str, Any], n: int, output: list[dict[str, Any]], status: str = "completed"
) -> dict[str, Any]:
    return {
        "id": f"resp_emulated_{n}",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "model": str(request.get("model", "emulated")),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }


def sse_event(kind: str, sequence: int, **data: Any) -> bytes:
    """One Responses SSE event (``event:`` and ``data:`` lines)."""
    body = orjson.dumps({"type": kind, "sequence_number": sequence, **data})
    return b"event: " + kind.encode() + b"\ndata: " + body + b"\n\n"


def events(request: dict[str, Any], n: int) -> list[bytes]:
    """The SSE events of a streamed answer, in OpenAI's order."""
    output = output_items(request, n)
    started = response_object(request, n, [], "in_progress")
    out = [sse_event("response.created", 0, response=started)]
    for index, item in enumerate(output):
        pending = {**item, "status": "in_progress"}
        if item["type"] == "message":
            pending["content"] = []
        out.append(
            sse_event("response.output_item.added", len(out), output_index=index, item=pending)
        )
        if item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            common = {"item_id": item["id"], "output_index": index, "content_index": 0}
            out.append(sse_event("response.content_part.added", len(out), **common, part=part))
            out.append(
                sse_event("response.output_text.delta", len(out), **common, delta=TEXT, logprobs=[])
            )
            out.append(sse_event("response.output_text.done", len(out), **common, text=TEXT))
            done_part = item["content"][0]
            out.append(sse_event("response.content_part.done", len(out), **common, part=done_part))
        out.append(sse_event("response.output_item.done", len(out), output_index=index, item=item))
    done = response_object(request, n, output)
    out.append(sse_event("response.completed", len(out), response=done))
    return out


async def answer(request: web.Request, body: bytes, n: int) -> web.StreamResponse:
    """The ``n``-th accepted request's Response (streamed when asked)."""
    payload = orjson.loads(body)
    payload = payload if isinstance(payload, dict) else {}
    if not payload.get("stream"):
        return web.json_response(response_object(payload, n, output_items(payload, n)))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for event in events(payload, n):
        await response.write(event)
    await response.write_eof()
    return response
