"""unsupported-message-keys: a message key the endpoint refuses by name is not sent.

What: each key named in option ``keys`` is removed from every message that has it, and each named in
option ``call_keys`` from every tool call of an assistant's ``tool_calls``. ``role``, ``content``,
``tool_calls`` and ``tool_call_id`` (of a message) and ``id``, ``type`` and ``function`` (of a call)
are never removed. Both options are empty by default: recovery fills them from the refusal that
names the key, with or without its path (rules/providers/named_repairs.py). Unlike
``unknown-message-fields`` (the per-role allowlist) it drops only what is named. The change names
the keys, never their values. Why: strict endpoints refuse a key they do not take, on every later
turn of the session: Groq "property 'id' is unsupported, did you mean 'role'?" for a client's own
message ids (chatboxai/chatbox#2083; docs/providers.md#groq-fields), Cerebras
"messages.2.assistant.reasoning_content: property 'messages.2.assistant.reasoning_content' is
unsupported" for replayed reasoning (darrenhinde/OpenAgentsControl#317;
docs/providers.md#cerebras-reasoning). Safety: unsafe: what the key carried (an id, replayed
reasoning) no longer reaches the model; the conversation's texts are kept.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Option, Outcome, Rule, RuleContext, per_message
from rules.engine.named import in_list, names, without_keys

NAME = "unsupported-message-keys"
PROTECTED = frozenset({"role", "content", "tool_calls", "tool_call_id"})
PROTECTED_CALL = frozenset({"id", "type", "function"})

KEYS: Option[list[str]] = Option("keys", [], "Message keys removed (names).")
CALL_KEYS: Option[list[str]] = Option("call_keys", [], "Tool-call keys removed (names).")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    keys = frozenset(names(KEYS.of(ctx))) - PROTECTED
    call_keys = frozenset(names(CALL_KEYS.of(ctx))) - PROTECTED_CALL
    if not keys and not call_keys:
        return Outcome(messages)

    def calls(message: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return in_list(message, "tool_calls", call_keys, "tool_calls")

    return without_keys(messages, keys, rule=NAME, nested=calls if call_keys else None)


RULE = Rule(
    name=NAME,
    summary="Drop the message keys (and tool-call keys) the endpoint refuses by name.",
    defect="a message key the endpoint does not take: Groq \"property 'id' is unsupported, did "
    "you mean 'role'?\" (chatboxai/chatbox#2083; docs/providers.md#groq-fields), Cerebras "
    "\"property 'messages.2.assistant.reasoning_content' is unsupported\" "
    "(darrenhinde/OpenAgentsControl#317; docs/providers.md#cerebras-reasoning)",
    repair="remove each key in option `keys` from every message, each in option `call_keys` "
    "from every tool call (never the role, content, calls or ids); recovery fills them from the "
    "refusal. What the key carried no longer reaches the model; the texts are kept",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    options=(KEYS, CALL_KEYS),
)
