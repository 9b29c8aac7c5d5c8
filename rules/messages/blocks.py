"""Read-only helpers over Anthropic Messages content blocks, shared by the Messages rules.

A Messages ``messages`` entry is ``{"role": "user"|"assistant", "content": str | [block]}``; a
block is ``{"type": ..., ...}``. Rules must tolerate anything: a message may be no object, a
content may be neither a string nor a list, a block may be no object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from rules import vocabulary

#: Block types that carry a model's thinking; never edited (a signed block fails its check on
#: any byte difference, anthropics/anthropic-sdk-python#1598).
THINKING_TYPES: Final = vocabulary.MESSAGES_THINKING_TYPES

#: Anthropic's id and ``metadata.user_id`` pattern: "String should match pattern
#: '^[a-zA-Z0-9_-]+$'".
ID_PATTERN: Final = re.compile(vocabulary.ANTHROPIC_ID_PATTERN)
_NOT_ID: Final = re.compile(r"[^a-zA-Z0-9_-]")


def content_list(message: Any) -> list[Any] | None:
    """The message's content if it is a list of blocks, else ``None``."""
    if type(message) is dict:
        content = message.get("content")
        if type(content) is list:
            return content
    return None


def role(message: Any) -> str | None:
    value = message.get("role") if type(message) is dict else None
    return value if type(value) is str else None


def block_type(block: Any) -> str | None:
    value = block.get("type") if type(block) is dict else None
    return value if type(value) is str else None


def tool_use_id(block: Any) -> str | None:
    """The id of a ``tool_use`` block, or ``None`` if the block is none or has no string id."""
    if type(block) is dict and block.get("type") == "tool_use":
        value = block.get("id")
        if type(value) is str:
            return value
    return None


def tool_result_id(block: Any) -> str | None:
    """The ``tool_use_id`` of a ``tool_result`` block, or ``None``."""
    if type(block) is dict and block.get("type") == "tool_result":
        value = block.get("tool_use_id")
        if type(value) is str:
            return value
    return None


def is_tool_result(block: Any) -> bool:
    return type(block) is dict and block.get("type") == "tool_result"


def tool_use_ids(message: Any) -> list[str]:
    """The usable (non-empty) ``tool_use`` ids of an assistant message, in order."""
    if role(message) != "assistant":
        return []
    blocks = content_list(message)
    if blocks is None:
        return []
    return [tid for block in blocks if (tid := tool_use_id(block))]


def valid_id(value: str) -> bool:
    return ID_PATTERN.fullmatch(value) is not None


def sanitized_id(value: str) -> str:
    """``value`` with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``."""
    return _NOT_ID.sub("_", value)


def is_blank_text(block: Any) -> bool:
    """A text block with no visible text: Anthropic "text content blocks must be non-empty"
    (and "must contain non-whitespace text")."""
    if type(block) is not dict or block.get("type") != "text":
        return False
    text = block.get("text")
    return type(text) is str and not text.strip()


def is_unsigned_thinking(block: Any) -> bool:
    """A ``thinking`` block without a signature (absent, not a string, or blank: another
    issuer's, or a placeholder), or a ``redacted_thinking`` block without its ``data``; neither
    can pass Anthropic's signature check (anthropics/anthropic-sdk-python#1598)."""
    if type(block) is not dict:
        return False
    kind = block.get("type")
    if kind == "thinking":
        value = block.get("signature")
    elif kind == "redacted_thinking":
        value = block.get("data")
    else:
        return False
    return type(value) is not str or not value.strip()


def final_assistant(messages: list[Any]) -> int | None:
    """The index of the assistant message Anthropic calls "final": the last message if it is an
    assistant's, or the assistant right before a last user message that opens with its
    ``tool_result`` blocks (a tool loop in progress: "a final `assistant` message ...
    preceeding the lastmost set of `tool_use` and `tool_result` blocks"); else ``None``."""
    if not messages:
        return None
    if role(messages[-1]) == "assistant":
        return len(messages) - 1
    if len(messages) < 2 or role(messages[-1]) != "user" or role(messages[-2]) != "assistant":
        return None
    results = content_list(messages[-1])
    if not results or not is_tool_result(results[0]):
        return None
    return len(messages) - 2


#: The shape of a signature Anthropic issues: standard base64 (its signatures are base64 of an
#: opaque payload, anthropics/anthropic-sdk-python#1598); another issuer's (DeepSeek's UUIDs,
#: ``8f0c...-...``) has characters base64 never holds.
ANTHROPIC_SIGNATURE: Final = re.compile(vocabulary.ANTHROPIC_SIGNATURE_PATTERN)


def is_foreign_thinking(block: Any) -> bool:
    """A ``thinking`` block whose signature is a non-blank string that is not in Anthropic's
    shape (``ANTHROPIC_SIGNATURE``): signed by another issuer, refused by Anthropic."""
    if type(block) is not dict or block.get("type") != "thinking":
        return False
    value = block.get("signature")
    return type(value) is str and bool(value.strip()) and not ANTHROPIC_SIGNATURE.fullmatch(value)


def thinking_on(request: Mapping[str, Any]) -> bool:
    """The request's ``thinking`` asks for thinking (``enabled``, or ``adaptive``)."""
    thinking = request.get("thinking")
    return type(thinking) is dict and thinking.get("type") in ("enabled", "adaptive")


def as_blocks(content: Any) -> list[Any]:
    """A content as a block list (a string with visible text becomes one text block; a blank
    one becomes none, since a blank text block is itself refused)."""
    if type(content) is list:
        return content
    if type(content) is str:
        return [{"type": "text", "text": content}] if content.strip() else []
    return [] if content is None else [content]


def is_empty(message: Any) -> bool:
    """A user or assistant message with no content at all."""
    if type(message) is not dict or message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    if content is None or content == []:
        return True
    return type(content) is str and not content.strip()
