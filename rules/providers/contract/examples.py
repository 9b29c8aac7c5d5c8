"""The pieces the checks' examples are built from (``Check.examples``): a request each check
refuses, in as few words as it takes. Chat messages (a user, a tool-call turn and its result, a
thanks), Responses items and Anthropic Messages blocks. Each builder returns a fresh dict; the
examples are read by the catalogue rows (tests/proxy/test_catalogue_rows.py), the repair tests
(tests/rules/test_repairs.py) and ``chatmend probe`` (tools/probe.py)."""

from __future__ import annotations

from typing import Any, Final

Message = dict[str, Any]

# --- chat completions --------------------------------------------------------------------------

#: The id ``tool_call`` and ``tool_result`` use: nine alphanumerics, what every provider accepts
#: (Mistral's ``[a-zA-Z0-9]{9}`` is the strictest).
CALL_ID: Final = "abcDEF123"
USER: Final[Message] = {"role": "user", "content": "Read the file."}
AFTER: Final[Message] = {"role": "user", "content": "Thanks."}
SYSTEM: Final[Message] = {"role": "system", "content": "You are a coding agent."}
IMAGE: Final[Message] = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
TOOLS: Final[list[Message]] = [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
]


def tool_call(cid: Any = CALL_ID, name: Any = "read_file", arguments: Any = "{}") -> Message:
    """One entry of an assistant's ``tool_calls``."""
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls_turn(*calls: Any, content: Any = None) -> Message:
    """An assistant turn calling ``calls`` (each a ``tool_call(...)`` entry)."""
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tool_result(cid: Any = CALL_ID, content: Any = "ok") -> Message:
    """A tool message answering ``cid``."""
    return {"role": "tool", "tool_call_id": cid, "content": content}


# --- Responses ---------------------------------------------------------------------------------

ITEM_CALL: Final[Message] = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "f",
    "arguments": "{}",
}
ITEM_OUTPUT: Final[Message] = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
ITEM_USER: Final[Message] = {"type": "message", "role": "user", "content": "Go on."}

# --- Anthropic Messages ------------------------------------------------------------------------

GO: Final[Message] = {"type": "text", "text": "go"}
TOOL_USE: Final[Message] = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
TOOL_RESULT: Final[Message] = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
THINKING: Final[Message] = {"type": "thinking", "thinking": "t", "signature": "s"}
#: The request fields that turn thinking on.
THINKING_ON: Final[Message] = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


def user_turn(*blocks: Any) -> Message:
    """A Messages ``user`` turn of ``blocks``."""
    return {"role": "user", "content": list(blocks)}


def assistant_turn(*blocks: Any) -> Message:
    """A Messages ``assistant`` turn of ``blocks``."""
    return {"role": "assistant", "content": list(blocks)}
