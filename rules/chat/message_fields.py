"""What a chat-completions message holds: its content, its tool calls and their ids, the tool
message's answer id, and the roles an option lists. Read-only helpers the chat rules share."""

from __future__ import annotations

from typing import Any

from rules.vocabulary import CHAT_ROLES as ROLES

__all__ = ["ROLES", "call_id", "function_name", "has_calls", "has_content", "result_id", "role_set"]


def has_content(message: dict[str, Any]) -> bool:
    """True if the message carries any content a provider counts as "set".

    Empty means: absent, ``None``, ``""``, ``[]``, or a part list whose parts are all text
    parts with empty text. Whitespace is content: it was sent, so it is kept.
    """
    content = message.get("content")
    if content is None or content == "":
        return False
    if isinstance(content, list):
        return any(not _is_empty_text_part(part) for part in content)
    return True


def _is_empty_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and part.get("text") in ("", None)


def call_id(call: Any) -> str | None:
    """The id of a tool call, or ``None`` if it has no usable (non-empty string) id."""
    if isinstance(call, dict):
        value = call.get("id")
        if isinstance(value, str) and value:
            return value
    return None


def function_name(call: Any) -> str | None:
    """The function name of a tool call, or ``None`` if it has no string name."""
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def result_id(message: Any) -> str | None:
    """The ``tool_call_id`` of a tool message, or ``None`` if it has no usable one."""
    if isinstance(message, dict) and message.get("role") == "tool":
        value = message.get("tool_call_id")
        if isinstance(value, str) and value:
            return value
    return None


def has_calls(message: dict[str, Any]) -> bool:
    """True if an assistant's ``tool_calls`` is a list holding at least one object: the calls
    empty-tool-calls keeps. Shared by null-content and the content contract checks."""
    calls = message.get("tool_calls")
    if type(calls) is not list:
        return False
    for call in calls:  # noqa: SIM110 - a plain loop: no generator per message on the hot path
        if type(call) is dict:
            return True
    return False


def role_set(value: Any) -> frozenset[str]:
    """The string roles of a ``roles`` option (anything else in it is ignored)."""
    if not isinstance(value, list | tuple):
        return frozenset()
    return frozenset(role for role in value if type(role) is str)


def chat_tool_name(tool: Any) -> str | None:
    """The name of a chat-completions tool definition (``function.name``), if a string."""
    function = tool.get("function") if type(tool) is dict else None
    name = function.get("name") if type(function) is dict else None
    return name if type(name) is str else None
