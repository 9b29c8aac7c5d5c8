"""responses-lone-surrogates: no string of a Responses ``input`` leaves with a lone surrogate.

What: every unpaired UTF-16 surrogate in any string of any ``input`` item (keys included) becomes
U+FFFD, with the repair the chat rule uses (``rules/engine/text.py``). The proxy also
repairs the
request's other fields, and reads bodies orjson refuses for this reason with the standard library.
Why: a cut emoji makes the body invalid JSON for the provider: DeepSeek "messages[N].content:
unexpected end of hex escape", Anthropic "no low surrogate in string"
(docs/providers.md#anthropic-encoding); the Responses endpoints parse the same JSON.
Safety: safe, as the chat rule: the lone half encodes no character.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext, per_message
from rules.engine.text import replace_lone_surrogates

NAME = "responses-lone-surrogates"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    out, changes = replace_lone_surrogates(items, NAME)
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Replace unpaired UTF-16 surrogates with U+FFFD in every string of `input`.",
    defect='a lone surrogate in an input item: "unexpected end of hex escape" '
    '(CherryHQ/cherry-studio#20614), "no low surrogate in string" (anthropics/claude-code#56064; '
    "docs/providers.md#encoding)",
    repair="replace it with U+FFFD, as `lone-surrogates` does. The lone half encodes no character",
    safety="safe",
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each item is decided by itself
)
