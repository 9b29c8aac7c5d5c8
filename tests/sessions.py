"""Growing sessions: an agent re-sends its whole history, one turn more each request.

A session is the transcript of ``tests.payloads`` cut at every turn boundary (before each
assistant message that follows a user or tool message): request ``k`` is request ``k - 1`` plus a
turn, so a session of T turns is T bodies, 3 KB up to the whole transcript. Workloads
(``WORKLOADS``):

- ``clean`` (tool-call turns with ``null`` content or a short thought), ``clean-empty``
  (``"content": ""``) and ``clean-kimi`` (``""`` and Kimi's ``functions.<name>:<n>`` ids): what a
  strict provider accepts, nothing to repair;
- ``stuck``: the ``clean`` session with one early defect (the second tool turn's arguments end
  with a trailing comma), carried by every later request, as a stuck agent re-sends it;
- ``broken``: the ``clean`` session with that defect in every fourth tool turn;
- ``stuck-split`` (``SPLIT``, not in ``WORKLOADS``): the ``clean`` session whose second tool
  turn is split in two, a text turn with the first call, then the whole turn again: the first
  call repeated with its id, as issue 39's stuck agent re-sends it;
- ``<workload>-spaced`` (``SPACED``): the same bodies written as ``json.dumps`` writes them
  (``", "``, ``": "``, ASCII escapes: Python ``requests``, aiohttp's ``json=``), where the others
  are written as ``JSON.stringify`` and httpx write them (orjson's compact bytes);
- ``<workload>-go`` (``ESCAPED``): written as Go's ``encoding/json`` writes them (compact, ``<``,
  ``>`` and ``&`` as ``\u003c``, ``\u003e``, ``\u0026``: ``tests.writings.go``).

The tests of the prefix cache (tests/proxy/test_prefix.py) and the benchmarks
(``bench.sessions``, ``bench.http_sessions``) read the same sessions.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import orjson

from tests.payloads import build_messages
from tests.writings import go

WORKLOADS: tuple[str, ...] = ("clean", "clean-empty", "clean-kimi", "stuck", "broken")
#: Issue 39's stuck session: a split turn that repeats a call (``bench.sessions --workload``).
SPLIT: tuple[str, ...] = ("stuck-split",)
#: The sessions of a client that writes ``json.dumps``' default spacing.
SPACED: tuple[str, ...] = ("clean-spaced", "stuck-spaced", "broken-spaced")
#: The sessions of a Go client (``bench.sessions --workload``).
ESCAPED: tuple[str, ...] = ("clean-go", "stuck-go")
#: The tools of ``tests.payloads.build`` (the request's other fields, as the OpenAI SDK sends
#: them: ``messages`` first).
_TOOLS = ("bash", "read_file", "write_file", "grep", "list_dir")


def _trailing_comma(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` (an assistant tool-call turn) with its last call's arguments ending ``,}``."""
    calls = [dict(call) for call in message["tool_calls"]]
    function = dict(calls[-1]["function"])
    function["arguments"] = function["arguments"][:-1] + ",}"
    calls[-1] = {**calls[-1], "function": function}
    return {**message, "tool_calls": calls}


def _split_repeat(message: dict[str, Any]) -> list[dict[str, Any]]:
    """``message`` (an assistant tool-call turn) split in two: a text turn with its first call,
    then the whole turn again (the first call repeated, same id)."""
    first = {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": message["tool_calls"][:1],
    }
    return [first, {**message, "content": None}]


def _defects(messages: list[dict[str, Any]], workload: str) -> list[dict[str, Any]]:
    if workload not in ("stuck", "broken", "stuck-split"):
        return messages
    out: list[dict[str, Any]] = []
    turn = 0
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            turn += 1
            if workload == "stuck-split" and turn == 2:
                out.extend(_split_repeat(message))
                continue
            if (workload == "stuck" and turn == 2) or (workload == "broken" and turn % 4 == 0):
                out.append(_trailing_comma(message))
                continue
        out.append(message)
    return out


def session(messages_count: int, workload: str, *, seed: int) -> list[bytes]:
    """The bodies of one growing session over a transcript of ``messages_count`` messages."""
    if workload in SPACED:
        compact = session(messages_count, workload.removesuffix("-spaced"), seed=seed)
        return [json.dumps(orjson.loads(body)).encode() for body in compact]
    if workload in ESCAPED:
        compact = session(messages_count, workload.removesuffix("-go"), seed=seed)
        return [go(orjson.loads(body)) for body in compact]
    if workload not in WORKLOADS and workload not in SPLIT:
        raise ValueError(f"unknown workload {workload!r}")
    shape = workload if workload.startswith("clean") else "clean"
    messages = _defects(build_messages(messages_count, seed=seed, shape=shape), workload)
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"The {name} tool.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for name in _TOOLS
    ]
    cuts = [
        k
        for k in range(2, len(messages) + 1)
        if k == len(messages)
        or (messages[k]["role"] == "assistant" and messages[k - 1]["role"] in ("user", "tool"))
    ]
    return [
        orjson.dumps(
            {
                "messages": messages[:k],
                "model": "deepseek-chat",
                "tools": tools,
                "temperature": 0.2,
                "stream": False,
            }
        )
        for k in cuts
    ]


def interleaved(workload: str, sessions: int, messages: int) -> list[bytes]:
    """Step 1 of every session, then step 2 of every session, ...: one body per line."""
    each = [session(messages, workload, seed=101 + n) for n in range(sessions)]
    steps = max(len(one) for one in each)
    return [one[k] for k in range(steps) for one in each if k < len(one)]


#: The APIs a session can be written for (``api_session``).
APIS: tuple[str, ...] = ("chat", "messages", "responses")


def api_session(
    api: str, messages_count: int, workload: str, *, seed: int, thinking: bool = False
) -> list[bytes]:
    """``session``'s growing session written for ``api``: ``chat`` as it is; ``messages`` as
    Claude Code sends it (the system prompt in ``system``, each turn's tool results and the
    next prompt in one user message, ``tool_use`` inputs as objects: the defect's arguments,
    which read as no object, go as the string they are; ``thinking``: each assistant turn
    opens with a signed thinking block, as with extended thinking on); ``responses`` as Codex
    sends it (``instructions``, ``function_call`` and ``function_call_output`` items). A
    request ends where the chat session's does: before each assistant turn."""
    if api == "chat":
        return session(messages_count, workload, seed=seed)
    if api not in APIS or (workload not in WORKLOADS and workload not in SPLIT):
        raise ValueError(f"unknown api {api!r} or workload {workload!r}")
    bodies = session(messages_count, workload, seed=seed)
    last = orjson.loads(bodies[-1])["messages"]
    lengths = {len(orjson.loads(body)["messages"]) for body in bodies}
    system = "\n".join(m["content"] for m in last if m["role"] == "system")
    turns = [m for m in last if m["role"] != "system"]
    cuts = sorted(k - (len(last) - len(turns)) for k in lengths)
    if api == "messages":
        return [orjson.dumps(_messages_body(turns[:k], system, thinking)) for k in cuts]
    return [orjson.dumps(_responses_body(turns[:k], system)) for k in cuts]


def _signature(turn: int) -> str:
    """A signature as long as Anthropic's usually are (base64, a few hundred characters)."""
    return base64.b64encode(hashlib.sha512(str(turn).encode()).digest() * 4).decode()


def _messages_body(turns: list[dict[str, Any]], system: str, thinking: bool) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for number, message in enumerate(turns):
        role = message["role"]
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if thinking:
                thought = f"Turn {number}: what the user asked, and which tool answers it next."
                blocks.append(
                    {"type": "thinking", "thinking": thought, "signature": _signature(number)}
                )
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or ():
                raw = call["function"]["arguments"]
                try:
                    value: Any = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    value = raw  # the defect: arguments that read as no object
                name = call["function"]["name"]
                blocks.append({"type": "tool_use", "id": call["id"], "name": name, "input": value})
            out.append({"role": "assistant", "content": blocks})
            continue
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
            block["content"] = message["content"]
        else:
            block = {"type": "text", "text": message["content"]}
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    tools = [
        {"name": name, "description": f"The {name} tool.", "input_schema": {"type": "object"}}
        for name in _TOOLS
    ]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": system,
        "messages": out,
        "tools": tools,
        "stream": True,
    }
    if thinking:  # as Claude Code asks for it
        body.update(max_tokens=32000, thinking={"type": "enabled", "budget_tokens": 16000})
    return body


def _responses_body(turns: list[dict[str, Any]], system: str) -> dict[str, Any]:
    """Each call followed by its output, as a strict provider takes them (DeepSeek's Responses
    input: docs/providers.md#deepseek-responses)."""
    items: list[dict[str, Any]] = []
    outputs = {m["tool_call_id"]: m["content"] for m in turns if m["role"] == "tool"}
    for message in turns:
        role = message["role"]
        if role == "user":
            part = {"type": "input_text", "text": message["content"]}
            items.append({"type": "message", "role": "user", "content": [part]})
        elif role == "assistant":
            if message.get("content"):
                part = {"type": "output_text", "text": message["content"]}
                items.append({"type": "message", "role": "assistant", "content": [part]})
            for call in message.get("tool_calls") or ():
                function = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": function["name"],
                        "arguments": function["arguments"],
                    }
                )
                if call["id"] in outputs:
                    output = outputs[call["id"]]
                    items.append(
                        {"type": "function_call_output", "call_id": call["id"], "output": output}
                    )
    tools = [
        {"type": "function", "name": name, "parameters": {"type": "object"}} for name in _TOOLS
    ]
    return {
        "model": "gpt-5-codex",
        "instructions": system,
        "input": items,
        "tools": tools,
        "store": False,
        "stream": True,
    }
