"""Request bodies shaped like those real clients send, none of them broken.

Each is what a known client produces for an ordinary agent session (the OpenAI SDK, LangChain,
openai-agents, Kimi's and DeepSeek's own tools, coding agents replaying 100 turns): tool-call
turns with content ``null``, ``""`` or no content key, ``name`` on messages, parallel calls,
Kimi-style ids, part lists, images, ``developer``, SDK-echoed ``refusal``, thinking-mode
``reasoning_content``. A provider's contract accepts some of them as they are; for those, chatmend
under that provider's profile must forward the very bytes it got (tests/rules/test_accepted.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.builders import call
from tests.payloads import build_messages

Message = dict[str, Any]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "bash", "grep")
]


#: What every call in these sessions asks.
ARGS = '{"path": "a.py"}'


def _answered_turn(
    ids: list[str], content: Any, *, absent: bool = False, **extra: Any
) -> list[Message]:
    """An assistant calling ``ids`` and the tool messages answering them, in order."""
    assistant: Message = {
        "role": "assistant",
        "tool_calls": [call(i, arguments=ARGS) for i in ids],
        **extra,
    }
    if not absent:
        assistant["content"] = content
    return [assistant, *({"role": "tool", "tool_call_id": i, "content": f"out {i}"} for i in ids)]


def _session(content: Any, *, absent: bool = False, ids: str = "call_{}") -> list[Message]:
    """system, user, a call, a parallel turn of three, an answer, a user, a call, an answer."""
    n = iter(range(100))
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
        *_answered_turn([ids.format(next(n))], content, absent=absent),
        *_answered_turn([ids.format(next(n)) for _ in range(3)], content, absent=absent),
        {"role": "assistant", "content": "The fixture returns None; patched."},
        {"role": "user", "content": "Run the tests again."},
        *_answered_turn([ids.format(next(n))], content, absent=absent),
        {"role": "assistant", "content": "All green."},
        {"role": "user", "content": "Thanks."},
    ]


def _long(n: int, content: Any) -> list[Message]:
    """The benchmark's clean coding-agent transcript, tool-call content set to ``content``."""
    messages = build_messages(n)
    for message in messages:
        if message.get("tool_calls"):
            message["content"] = content
    return messages


def _with(messages: list[Message], at: int, **extra: Any) -> list[Message]:
    out = [dict(m) for m in messages]
    out[at] = {**out[at], **extra}
    return out


_TEXT = [{"type": "text", "text": "Fix the failing test."}]
_TWO_TEXTS = [{"type": "text", "text": "Fix the failing test."}, {"type": "text", "text": "Now."}]
_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}

#: name -> messages, each an unbroken session as one client sends it.
SESSIONS: dict[str, list[Message]] = {
    # openai-python / openai-agents: null content next to tool calls
    "openai_sdk_null": _session(None),
    # langchain-openai and many agents: "" next to tool calls
    "langchain_empty_string": _session(""),
    # clients that omit content on a tool-call turn (kimi-cli's own fix, #2035)
    "content_absent": _session(None, absent=True),
    # text beside the calls
    "text_and_calls": _session("Let me look."),
    # Kimi numbers its calls functions.<name>:<n>
    "kimi_ids": _session(None, ids="functions.read_file:{}"),
    "kimi_ids_empty_string": _session("", ids="functions.read_file:{}"),
    # 9-character ids, as Mistral issues them, with both empty shapes
    "nine_char_ids_null": _session(None, ids="call{:05d}"),
    "nine_char_ids_empty_string": _session("", ids="call{:05d}"),
    # OpenAI's `name` on user and assistant messages, and on tool messages
    "names": [
        {"role": "system", "content": "Be brief.", "name": "policy"},
        {"role": "user", "content": "Hi", "name": "alice"},
        *_answered_turn(["call_1"], None),
        {"role": "assistant", "content": "Done.", "name": "bot"},
        {"role": "user", "content": "Next.", "name": "alice"},
    ],
    "tool_names": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1", arguments=ARGS)]},
        {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "x"},
        {"role": "user", "content": "Next."},
    ],
    # LangChain's ToolMessage carries the function's name
    "named_results": [
        {**m, "name": "read_file"} if m["role"] == "tool" else m for m in _session("")
    ],
    # the OpenAI SDK echoing a response message back (refusal, annotations)
    "sdk_echo": _with(_session(None), 2, refusal=None, annotations=[]),
    # developer instructions (OpenAI's reasoning models)
    "developer": [{"role": "developer", "content": "Be brief."}, *_session(None)[1:]],
    # part lists: one text part, two, a system part list, a tool result part list, an image
    "user_text_part": [{"role": "user", "content": _TEXT}],
    "user_text_parts": [{"role": "user", "content": _TWO_TEXTS}],
    "system_text_part": [{"role": "system", "content": _TEXT}, {"role": "user", "content": "Hi"}],
    "tool_text_part": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1", arguments=ARGS)]},
        {"role": "tool", "tool_call_id": "call_1", "content": _TEXT},
        {"role": "user", "content": "Next."},
    ],
    "user_image": [{"role": "user", "content": [*_TEXT, _IMAGE]}],
    # thinking mode: the reasoning replayed on every tool-call turn
    "thinking_replay": [
        {**m, "reasoning_content": "I should read it."} if m.get("tool_calls") else m
        for m in _session("")
    ],
    # coding agents' long sessions, both empty shapes
    "agent_100_null": _long(100, None),
    "agent_100_empty_string": _long(100, ""),
}

#: Request-level fields real clients send beside the messages.
EXTRA: dict[str, dict[str, Any]] = {
    "plain": {},
    "tools": {"tools": TOOLS, "tool_choice": "auto"},
    "stream": {"tools": TOOLS, "stream": True, "stream_options": {"include_usage": True}},
}


def bodies(model: str = "deepseek-chat") -> dict[str, bytes]:
    """Every session with every set of request fields, as orjson writes them (the bytes)."""
    return {
        f"{name}/{extra}": orjson.dumps({"model": model, "messages": messages, **fields})
        for name, messages in SESSIONS.items()
        for extra, fields in EXTRA.items()
    }
