"""Small read-only helpers over client messages, shared by the rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from rules.engine.base import RuleContext


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
