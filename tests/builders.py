"""Transcript builders shared by the tests: one short call per message shape.

    [user(), turn("a", "b"), result("a"), result("b", "2 files"), say("Done.")]

is a user, an assistant calling ``a`` and ``b``, their two results and a closing answer. Every
builder returns a fresh dict, so a test may mutate what it built; keyword arguments override or
add fields (``turn("a", content="")``, ``result("a", name="ls")``).
"""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]

#: The id ``call()`` and ``result()`` use when none is given: nine alphanumerics, a shape every
#: provider accepts (Mistral's is the strictest: ``[a-zA-Z0-9]{9}``).
CALL_ID = "abcDEF123"


def call(cid: Any = CALL_ID, name: Any = "read_file", arguments: Any = "{}") -> Message:
    """One entry of an assistant's ``tool_calls``."""
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def turn(*calls: Any, content: Any = None, **extra: Any) -> Message:
    """An assistant turn calling ``calls``: each a ``call(...)`` entry, or an id for ``call(id)``.
    ``tool_calls=[...]`` sets the list as it is (junk entries included)."""
    entries = [c if isinstance(c, dict) else call(c) for c in calls]
    return {"role": "assistant", "content": content, "tool_calls": entries, **extra}


def result(cid: Any = CALL_ID, content: Any = "ok", **extra: Any) -> Message:
    """A tool message answering ``cid``."""
    return {"role": "tool", "tool_call_id": cid, "content": content, **extra}


def msg(role: Any, content: Any = "x", **extra: Any) -> Message:
    """Any message: ``role`` and ``content`` first, then ``extra``."""
    return {"role": role, "content": content, **extra}


def user(text: Any = "go on", **extra: Any) -> Message:
    return {"role": "user", "content": text, **extra}


def say(text: Any = "Done.", **extra: Any) -> Message:
    """An assistant's text answer (no tool calls)."""
    return {"role": "assistant", "content": text, **extra}


def system(text: Any = "s", **extra: Any) -> Message:
    return {"role": "system", "content": text, **extra}


def result_ids(messages: list[Any]) -> list[Any]:
    """The ``tool_call_id`` of every tool message, in order."""
    return [m.get("tool_call_id") for m in messages if m.get("role") == "tool"]
