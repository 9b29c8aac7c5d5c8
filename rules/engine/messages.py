"""Small read-only helpers over client messages, shared by the rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from rules.engine.base import RuleContext


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


def content_length(content: Any) -> int:
    """The length of a content for the logs (never the text itself): a string's characters, or
    the characters of any other JSON value as JSON; 0 for ``None`` or a non-JSON value."""
    if content is None:
        return 0
    if type(content) is str:
        return len(content)
    try:
        return len(orjson.dumps(content).decode())
    except TypeError:  # not JSON (only possible through the library API)
        return 0


def dropped_content(content: Any, ctx: RuleContext) -> dict[str, Any]:
    """What a Change says of a content a rule dropped: its length, and the content itself only
    when the operator opted in (``log_content``), so nothing is lost for good."""
    detail: dict[str, Any] = {"content_length": content_length(content)}
    if ctx.log_content:
        detail["content"] = content
    return detail


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


def rewrite_each(messages: list[Any], fix: Callable[[int, Any], Any]) -> list[Any]:
    """Copy-on-write map over ``messages``: ``fix(index, message)`` returns the message itself,
    a replacement, or ``None`` to remove it. Returns ``messages`` itself if nothing changed."""
    out: list[Any] | None = None  # built only once something changes
    for index, message in enumerate(messages):
        fixed = fix(index, message)
        if fixed is not message and out is None:
            out = list(messages[:index])
        if out is not None and (fixed is not None or message is None):
            out.append(fixed)  # None removes a message; a None entry itself is kept as junk
    return messages if out is None else out


def rewrite_at(
    messages: list[Any], indices: Iterable[int], fix: Callable[[int, Any], Any]
) -> list[Any]:
    """``rewrite_each`` restricted to ``indices`` (increasing), for a rule whose prescan already
    knows which messages it may change: the others are not visited again. Returns ``messages``
    itself if ``fix`` changed nothing."""
    out: list[Any] | None = None
    removed: set[int] = set()
    for index in indices:
        message = messages[index]
        fixed = fix(index, message)
        if fixed is message:
            continue
        if out is None:
            out = list(messages)
        if fixed is None:
            removed.add(index)
        else:
            out[index] = fixed
    if out is None:
        return messages
    if removed:
        return [message for index, message in enumerate(out) if index not in removed]
    return out


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


#: The chat roles, in the order of the ``roles`` options that list them.
ROLES = ("system", "developer", "user", "assistant", "tool")


def role_set(value: Any) -> frozenset[str]:
    """The string roles of a ``roles`` option (anything else in it is ignored)."""
    if not isinstance(value, list | tuple):
        return frozenset()
    return frozenset(role for role in value if type(role) is str)
