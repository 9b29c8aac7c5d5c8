"""responses-unsupported-item-keys: an ``input`` item key the endpoint refuses by name is not
sent.

What: each key named in option ``keys`` is removed from every ``input`` item that has it. ``type``,
``role``, ``content``, ``call_id``, ``output``, ``arguments``, ``name``, ``summary`` and
``encrypted_content`` are never removed (they are the item). Empty by default: recovery fills it
from the refusal that names the key (rules/providers/named_repairs.py). The change names the keys,
never their values. Why: Responses endpoints other than OpenAI's refuse item keys they do not take,
one at a time, as chat endpoints refuse message keys (Groq "property 'id' is unsupported",
chatboxai/chatbox#2083; docs/providers.md#responses). Safety: unsafe: what the key carried (an item
id, a status) no longer reaches the endpoint; the items' texts are kept.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Option, Outcome, Rule, RuleContext, per_message
from rules.engine.named import names, without_keys

NAME = "responses-unsupported-item-keys"
PROTECTED = frozenset(
    {"type", "role", "content", "call_id", "output", "arguments", "name", "summary",
     "encrypted_content"}
)  # fmt: skip

KEYS: Option[list[str]] = Option("keys", [], "Item keys removed (names).")


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    keys = frozenset(names(KEYS.of(ctx))) - PROTECTED
    if not keys:
        return Outcome(items)
    return without_keys(items, keys, rule=NAME)


RULE = Rule(
    name=NAME,
    summary="Drop the `input` item keys the endpoint refuses by name.",
    defect="an item key the endpoint does not take, named in its refusal (as Groq's \"property "
    "'id' is unsupported\" for messages: chatboxai/chatbox#2083; docs/providers.md#responses)",
    repair="remove each key in option `keys` from every item (never what makes the item); "
    "recovery fills it from the refusal. What the key carried no longer reaches the endpoint",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each item is decided by itself
    options=(KEYS,),
)
