"""The contract's own reading of the Anthropic Messages shapes Anthropic (and the relays that
speak its format) refuse, written from their error texts (docs/providers.md), not borrowed from
the rules in rules/messages/. Only plain data (``rules.vocabulary``) is shared with the rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from rules.vocabulary import (
    ANTHROPIC_ID_PATTERN,
    ANTHROPIC_SIGNATURE_PATTERN,
    CONTEXT_MANAGEMENT_BETA_PREFIX,
    MESSAGES_THINKING_TYPES,
    METADATA_USER_ID_MAX,
    PREFILL_REFUSED_MODELS,
    THINKING_TYPE_REFUSING,
)

__all__ = ["PREFILL_REFUSED_MODELS", "THINKING_TYPE_REFUSING"]

THINKING_TYPES = MESSAGES_THINKING_TYPES
#: The request field Anthropic refuses without its beta.
CONTEXT_MANAGEMENT = "context_management"
_ID = re.compile(ANTHROPIC_ID_PATTERN)
_SIGNATURE = re.compile(ANTHROPIC_SIGNATURE_PATTERN)
_THINKING_ON = ("enabled", "adaptive")


def _string(value: Any) -> str | None:
    return value if type(value) is str else None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if type(value) is dict else None


def content_list(message: Any) -> list[Any] | None:
    """A message's content when it is a list of blocks."""
    content = _get(message, "content")
    return content if type(content) is list else None


def role(message: Any) -> str | None:
    return _string(_get(message, "role"))


def block_type(block: Any) -> str | None:
    return _string(_get(block, "type"))


def is_tool_result(block: Any) -> bool:
    return block_type(block) == "tool_result"


def tool_result_id(block: Any) -> str | None:
    """What a ``tool_result`` answers (its string ``tool_use_id``)."""
    return _string(_get(block, "tool_use_id")) if is_tool_result(block) else None


def tool_use_ids(message: Any) -> list[str]:
    """The non-empty string ids of an assistant's ``tool_use`` blocks, in order."""
    if role(message) != "assistant":
        return []
    ids = [
        _string(_get(b, "id")) for b in content_list(message) or () if block_type(b) == "tool_use"
    ]
    return [tid for tid in ids if tid]


def valid_id(value: str) -> bool:
    """ "String should match pattern '^[a-zA-Z0-9_-]+$'"."""
    return _ID.fullmatch(value) is not None


def fits_user_id(value: str) -> bool:
    """A ``metadata.user_id`` Anthropic takes: the id pattern, at most 256 characters."""
    return len(value) <= METADATA_USER_ID_MAX and valid_id(value)


def is_blank_text(block: Any) -> bool:
    """ "text content blocks must be non-empty" / "must contain non-whitespace text"."""
    text = _get(block, "text") if block_type(block) == "text" else None
    return type(text) is str and not text.strip()


def is_empty(message: Any) -> bool:
    """A user or assistant message with no content: "all messages must have non-empty
    content"."""
    if role(message) not in ("user", "assistant"):
        return False
    content = _get(message, "content")
    if content is None or content == []:
        return True
    return type(content) is str and not content.strip()


def is_unsigned_thinking(block: Any) -> bool:
    """A ``thinking`` block with no usable ``signature``, or a ``redacted_thinking`` block with
    no usable ``data``: "Invalid `signature` in `thinking` block"."""
    key = {"thinking": "signature", "redacted_thinking": "data"}.get(block_type(block) or "")
    if key is None:
        return False
    value = _get(block, key)
    return type(value) is not str or not value.strip()


def is_foreign_thinking(block: Any) -> bool:
    """A ``thinking`` block signed in a shape that is not Anthropic's: refused the same way."""
    value = _get(block, "signature") if block_type(block) == "thinking" else None
    return type(value) is str and bool(value.strip()) and not _SIGNATURE.fullmatch(value)


def thinking_on(request: Mapping[str, Any]) -> bool:
    """``thinking.type`` is ``enabled`` or ``adaptive``."""
    return _get(request.get("thinking"), "type") in _THINKING_ON


def _matches(model: Any, models: Any) -> bool:
    if type(model) is not str or not isinstance(models, list | tuple):
        return False
    lowered = model.lower()
    return any(type(p) is str and fnmatchcase(lowered, p.lower()) for p in models)


def in_thinking_mode(request: Any, models: Any) -> bool:
    """Thinking is on: a string ``thinking.type`` says so; without one, a model of ``models``
    thinks by default."""
    kind = _get(request.get("thinking"), "type")
    if type(kind) is str:
        return kind in _THINKING_ON
    return _matches(request.get("model"), models)


def _loop_tail(messages: list[Any]) -> bool:
    """The conversation ends in a tool loop: an assistant, then a user opening with results."""
    if len(messages) < 2 or role(messages[-1]) != "user" or role(messages[-2]) != "assistant":
        return False
    results = content_list(messages[-1])
    return bool(results) and is_tool_result(results[0])  # type: ignore[index]


def final_assistant(messages: list[Any]) -> int | None:
    """The assistant Anthropic calls final: the last message, or the one before a last user
    message that opens with ``tool_result`` blocks ("a final `assistant` message ...
    preceeding the lastmost set of `tool_use` and `tool_result` blocks")."""
    if messages and role(messages[-1]) == "assistant":
        return len(messages) - 1
    return len(messages) - 2 if _loop_tail(messages) else None


def unthinking_loop(messages: list[Any]) -> int | None:
    """The last assistant of a tool loop the conversation ends in, when it does not open with
    thinking: "Expected `thinking` or `redacted_thinking`, but found `tool_use`"."""
    if not _loop_tail(messages):
        return None
    blocks = content_list(messages[-2])
    return None if blocks and block_type(blocks[0]) in THINKING_TYPES else len(messages) - 2


def forced_tool_choice(choice: Any) -> bool:
    """A ``tool_choice`` that forces tool use (``any`` or ``tool``): refused with thinking."""
    return _get(choice, "type") in ("any", "tool")


def cached_inside_result(block: Any) -> list[int]:
    """The positions of the blocks with ``cache_control`` inside a ``tool_result``'s content."""
    inner = _get(block, "content") if is_tool_result(block) else None
    if type(inner) is not list:
        return []
    return [n for n, part in enumerate(inner) if type(part) is dict and "cache_control" in part]


def context_management_allowed(betas: Any) -> bool:
    """An ``anthropic-beta`` value allows ``context_management``."""
    return any(beta.startswith(CONTEXT_MANAGEMENT_BETA_PREFIX) for beta in betas)


def refused_thinking_type(request: Any, models: Any) -> str | None:
    """The ``thinking.type`` (not ``enabled``) that a model of ``models`` refuses here."""
    kind = _get(request.get("thinking"), "type")
    if type(kind) is not str or kind == "enabled":
        return None
    return kind if _matches(request.get("model"), models) else None
