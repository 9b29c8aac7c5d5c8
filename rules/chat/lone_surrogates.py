"""lone-surrogates: no string leaves with an unpaired UTF-16 surrogate.

What: every code point U+D800-U+DFFF that is not half of a valid pair becomes U+FFFD, in every
string of every message (keys included) and, in the proxy, of the whole request body. A body
carrying one cannot be read by orjson at all, so the proxy parses it with the standard library
instead, repairs it, and forwards the repaired body.
Why: a truncated emoji (an agent cutting a string between the two halves of a surrogate pair)
poisons the whole session: DeepSeek answers 400 "messages[N].content: unexpected end of hex
escape", Cerebras "Invalid JSON: lone leading surrogate in hex escape", Anthropic "The request
body is not valid JSON: no low surrogate in string" (provider-errors.md 1.G; hermes R26).
Safety: safe. The lone half encodes no character on its own; U+FFFD marks where it was, the
way every UTF-8 decoder does, and the rest of the text is kept.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext
from rules.engine.text import replace_lone_surrogates

NAME = "lone-surrogates"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    out, changes = replace_lone_surrogates(messages, NAME)
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Replace unpaired UTF-16 surrogates with U+FFFD in every string.",
    defect='a lone surrogate (half of a cut emoji): "unexpected end of hex escape", '
    '"no low surrogate in string"',
    repair="replace each lone surrogate with U+FFFD; the proxy also reads and repairs bodies "
    "orjson refuses for this reason",
    safety="safe",
    default=True,
    apply=apply,
)
