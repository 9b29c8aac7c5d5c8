"""lone-surrogates: no string leaves with an unpaired UTF-16 surrogate.

What: every code point U+D800-U+DFFF that is not half of a valid pair becomes U+FFFD, in every
string of every message (keys included) and, in the proxy, of the whole request body. A body
carrying one cannot be read by orjson at all, so the proxy parses it with the standard library
instead, repairs it, and forwards the repaired body.
Why: a truncated emoji (an agent cutting a string between the two halves of a surrogate pair)
poisons the whole session: DeepSeek answers 400 "messages[N].content: unexpected end of hex
escape", Cerebras "Invalid JSON: lone leading surrogate in hex escape", Anthropic "The request
body is not valid JSON: no low surrogate in string" (docs/providers.md#anthropic-encoding; hermes
R26). Safety: safe. The lone half encodes no character on its own; U+FFFD marks where it was, the
way every UTF-8 decoder does, and the rest of the text is kept.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext, per_message
from rules.engine.text import replace_lone_surrogates

NAME = "lone-surrogates"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    out, changes = replace_lone_surrogates(messages, NAME)
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Replace unpaired UTF-16 surrogates with U+FFFD in every string.",
    defect="a lone UTF-16 surrogate (half of a cut emoji) in any string: DeepSeek "
    '"messages[N].content: unexpected end of hex escape" (CherryHQ/cherry-studio#20614), '
    'Anthropic "no low surrogate in string" (anthropics/claude-code#56064), Cerebras "lone '
    'leading surrogate in hex escape" (elizaOS/eliza#18079); the session stays poisoned '
    "(docs/providers.md#encoding)",
    repair="replace each lone surrogate with U+FFFD; a body orjson refuses for this reason is read "
    "with the standard library and repaired whole (every field, not only messages). The lone half "
    "encodes no character, and the rest of the text is kept",
    safety="safe",
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each string repaired by itself
)
