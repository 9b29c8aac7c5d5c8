"""Plain data tables the rules and the provider contracts share: names and sets, never a
predicate (each side writes its own reading of a shape)."""

from __future__ import annotations

from collections.abc import Mapping

#: The chat roles, in the order of the ``roles`` options that list them.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")

#: How an empty content looks on an assistant with tool calls: absent, ``null``, ``""``, ``[]``,
#: or text parts with no text (the ``kinds`` of tool-call-content and its check).
EMPTY_KINDS = ("absent", "null", "empty_string", "empty_list", "empty_parts")
#: The content part types that carry a model's thinking in chat (Mistral's ``thinking`` parts).
THINKING_PART = "thinking"
REDACTED_THINKING_PART = "redacted_thinking"
#: The keys each known chat role may carry (docs/providers.md#mistral-fields and
#: docs/providers.md#repairs, inferred; Mistral's and DeepSeek's ``prefix`` on assistants).
#: ``developer`` and the legacy ``function`` role are OpenAI's own and have system's and
#: function's shapes.
_BASE_FIELDS = frozenset({"role", "content", "name"})
CHAT_FIELDS: Mapping[str, frozenset[str]] = {
    "system": _BASE_FIELDS,
    "developer": _BASE_FIELDS,
    "user": _BASE_FIELDS,
    "assistant": _BASE_FIELDS | {"tool_calls", "prefix"},
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
    "function": _BASE_FIELDS,
}
#: The keys of a function tool call, and of its ``function``.
CHAT_CALL_FIELDS = frozenset({"id", "type", "function"})
CHAT_FUNCTION_FIELDS = frozenset({"name", "arguments"})
#: An agent's bookkeeping keys on a chat message: by name (hermes-agent's send path,
#: hermes-agent#47868), by prefix (internal ``_…`` markers, UI-only ``display_…`` fields, Codex
#: bridge state), and on a function tool call.
BOOKKEEPING_MESSAGE_KEYS = frozenset(
    {"timestamp", "api_content", "tool_name", "effect_disposition"}
)
BOOKKEEPING_PREFIXES = ("_", "display_", "codex_")
BOOKKEEPING_CALL_KEYS = frozenset({"call_id", "response_item_id", "extra_content"})
#: The content part types an image is sent in (image-parts' default ``types``).
IMAGE_PART_TYPES = ("image_url",)
#: The roles that are not the user's: where a strict provider refuses an image.
NOT_USER_ROLES = frozenset({"system", "developer", "assistant", "tool", "function"})
#: The roles DeepSeek knows (docs/providers.md#roles).
DEEPSEEK_ROLES = ("system", "user", "assistant", "tool")
#: The roles that may come before the first user message.
SYSTEM_ROLES = frozenset({"system", "developer"})
#: The Responses models with server-side compaction (``context_management``).
COMPACTION_MODELS = ("gpt-5.6*",)
#: The Messages block types that carry thinking.
MESSAGES_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
#: What Anthropic accepts as a ``tool_use`` id and a ``metadata.user_id`` (a regex, and the
#: longest ``user_id``).
ANTHROPIC_ID_PATTERN = r"[a-zA-Z0-9_-]+"
METADATA_USER_ID_MAX = 256
#: The shape of an Anthropic thinking signature (base64).
ANTHROPIC_SIGNATURE_PATTERN = r"[A-Za-z0-9+/]+={0,2}"
#: The ``anthropic-beta`` values that allow ``context_management`` start with this.
CONTEXT_MANAGEMENT_BETA_PREFIX = "context-management-"
#: The models that refuse a ``thinking.type`` other than ``enabled`` (globs).
THINKING_TYPE_REFUSING = ("kimi-k2.7-code*",)
#: The Claude models that refuse an assistant prefill (globs).
PREFILL_REFUSED_MODELS = (
    "claude-*-4-6*",
    "claude-*-4-7*",
    "claude-opus-5*",
    "claude-sonnet-5*",
    "claude-haiku-5*",
)
