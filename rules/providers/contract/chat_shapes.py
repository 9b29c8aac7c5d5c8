"""The contract's own reading of the chat shapes providers refuse, written from their error
texts (docs/providers.md), not borrowed from the rules that repair them: a wrong reading in a
rule then fails its contract's check instead of passing both. Only plain data
(``rules.vocabulary``) is shared with the rules."""

from __future__ import annotations

from typing import Any

from rules.vocabulary import (
    BOOKKEEPING_CALL_KEYS,
    BOOKKEEPING_MESSAGE_KEYS,
    BOOKKEEPING_PREFIXES,
    EMPTY_KINDS,
)

#: The field DeepSeek's thinking mode wants on tool-loop assistant turns.
REASONING_FIELD = "reasoning_content"


def calls_listed(message: dict[str, Any]) -> bool:
    """The assistant lists at least one call object: "Assistant message must have either
    content or tool_calls" (Mistral) counts it as having calls."""
    calls = message.get("tool_calls")
    return type(calls) is list and any(type(call) is dict for call in calls)


def _blank_part(part: Any) -> bool:
    return type(part) is dict and part.get("type") == "text" and part.get("text") in ("", None)


def content_set(message: dict[str, Any]) -> bool:
    """The message carries content a provider counts as set: not absent, ``null``, ``""``,
    ``[]``, nor only text parts with no text (whitespace is content)."""
    content = message.get("content")
    if content is None or content == "":
        return False
    if type(content) is list:
        return not all(_blank_part(part) for part in content)
    return True


def empty_content_kind(message: dict[str, Any]) -> str:
    """How an unset content looks (``EMPTY_KINDS``); only for a message whose content is unset."""
    if "content" not in message:
        return "absent"
    content = message["content"]
    if content is None:
        return "null"
    if content == "":
        return "empty_string"
    return "empty_list" if content == [] else "empty_parts"


def listed_strings(value: Any, default: tuple[str, ...] = ()) -> frozenset[str]:
    """The strings of a list option (a non-list: ``default``)."""
    if not isinstance(value, list | tuple):
        return frozenset(default)
    return frozenset(item for item in value if type(item) is str)


def empty_kinds(value: Any) -> frozenset[str]:
    """The ``kinds`` option: the known empty kinds it lists (a non-list: all of them)."""
    return frozenset(kind for kind in listed_strings(value, EMPTY_KINDS) if kind in EMPTY_KINDS)


def _text(part: Any) -> str | None:
    if type(part) is dict and part.get("type") == "text" and type(part.get("text")) is str:
        return str(part["text"])
    return None


def text_parts_only(content: Any, *, lists: bool = True, min_parts: int = 1) -> bool:
    """The content is text parts and nothing else (a list: ``[]`` or at least ``min_parts`` of
    them, none if not ``lists``; or one bare text part): what "content must be a string"
    refuses and a string could say."""
    if type(content) is list:
        if not lists or 0 < len(content) < min_parts:
            return False
        return all(_text(part) is not None for part in content)
    return type(content) is dict and _text(content) is not None


def bookkeeping_paths(message: Any, keep: frozenset[str] = frozenset()) -> list[str]:
    """The dotted paths of an agent's bookkeeping keys in ``message`` (``keep``: allowed anyway):
    the unknown fields strict providers refuse ("Extra inputs are not permitted")."""
    if type(message) is not dict:
        return []
    found = [
        key
        for key in message
        if type(key) is str
        and (key in BOOKKEEPING_MESSAGE_KEYS or key.startswith(BOOKKEEPING_PREFIXES))
        and key not in keep
    ]
    calls = message.get("tool_calls")
    for position, call in enumerate(calls if type(calls) is list else ()):
        if type(call) is dict:
            found.extend(
                f"tool_calls.{position}.{key}"
                for key in call
                if key in BOOKKEEPING_CALL_KEYS and key not in keep
            )
    return found


def _plain_assistant(message: Any) -> bool:
    if type(message) is not dict or message.get("role") != "assistant":
        return False
    calls = message.get("tool_calls")
    return not (type(calls) is list and calls)


def ends_on_assistant(messages: list[Any], prefix_allowed: bool, end: int | None = None) -> bool:
    """``messages[:end]`` ends on an assistant turn without calls that the provider will not
    continue: no ``"prefix": true``, or a prefix where the provider has no prefix completion or
    where it is the only message ("the last message ... must be a user or tool message")."""
    end = len(messages) if end is None else end
    if end == 0 or not _plain_assistant(messages[end - 1]):
        return False
    return not (prefix_allowed and end > 1 and messages[end - 1].get("prefix") is True)


def calling_turn(message: Any) -> bool:
    """An assistant message with a non-empty ``tool_calls`` list: a turn of a tool loop."""
    if type(message) is not dict or message.get("role") != "assistant":
        return False
    calls = message.get("tool_calls")
    return type(calls) is list and len(calls) > 0


def plain_turns_in_loops(messages: list[Any]) -> list[int]:
    """The assistant turns without calls that share a user-to-user span with a calling turn:
    DeepSeek's thinking mode counts each as part of the tool loop (docs/providers.md)."""
    found: list[int] = []
    plain: list[int] = []
    looping = False
    for index, message in enumerate(messages):
        role = message.get("role") if type(message) is dict else None
        if role == "user":
            found += plain if looping else []
            plain, looping = [], False
        elif role == "assistant":
            if calling_turn(message):
                looping = True
            else:
                plain.append(index)
    found += plain if looping else []
    return sorted(found)
