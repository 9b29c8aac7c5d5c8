"""messages-unsupported-keys: a message or content-block key the endpoint refuses by name is not
sent.

What: each key named in option ``keys`` is removed from every message that has it, and each
named in option ``block_keys`` from every content block of a message's ``content`` list.
``role`` and ``content`` (of a message) and ``type``, ``text``, ``id``, ``tool_use_id``,
``input``, ``name``, ``content``, ``thinking``, ``signature``, ``source`` and ``data`` (of a
block) are never removed. Empty by default: recovery fills them from the refusal that names the
key (rules/providers/named_repairs.py). The change names the keys, never their values.
Why: Anthropic-format endpoints other than Anthropic's refuse keys they do not take: a
``cache_control`` where the endpoint has none (docs/providers.md#anthropic-fields), a client's
own message ``id`` (as Groq refuses it in chat: chatboxai/chatbox#2083).
Safety: unsafe: what the key carried no longer reaches the endpoint; the texts are kept.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Option, Outcome, Rule, RuleContext, per_message
from rules.engine.named import in_list, names, without_keys

NAME = "messages-unsupported-keys"
PROTECTED = frozenset({"role", "content"})
PROTECTED_BLOCK = frozenset(
    {"type", "text", "id", "tool_use_id", "input", "name", "content", "thinking", "signature",
     "source", "data"}
)  # fmt: skip

KEYS: Option[list[str]] = Option("keys", [], "Message keys removed (names).")
BLOCK_KEYS: Option[list[str]] = Option("block_keys", [], "Content-block keys removed (names).")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    keys = frozenset(names(KEYS.of(ctx))) - PROTECTED
    block_keys = frozenset(names(BLOCK_KEYS.of(ctx))) - PROTECTED_BLOCK
    if not keys and not block_keys:
        return Outcome(messages)

    def blocks(message: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return in_list(message, "content", block_keys, "content")

    return without_keys(messages, keys, rule=NAME, nested=blocks if block_keys else None)


RULE = Rule(
    name=NAME,
    summary="Drop the message and content-block keys the endpoint refuses by name.",
    defect="a key the endpoint does not take, named in its refusal (a `cache_control` where it "
    "has none: docs/providers.md#anthropic-fields; a client's own message `id`, as Groq refuses "
    "it in chat: chatboxai/chatbox#2083)",
    repair="remove each key in option `keys` from every message, each in option `block_keys` "
    "from every content block (never what makes the message or block); recovery fills them "
    "from the refusal",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    options=(KEYS, BLOCK_KEYS),
)
