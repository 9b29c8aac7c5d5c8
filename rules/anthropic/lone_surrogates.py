"""messages-lone-surrogates: no string of a Messages ``messages`` list leaves with a lone surrogate.

What: every unpaired UTF-16 surrogate in any string of any message (keys, block texts, tool
inputs, tool results) becomes U+FFFD, with the repair the chat rule uses
(``rules/engine/text.py``). The proxy repairs the request's other fields (``system``,
``tools``) the same way, and reads bodies orjson refuses for this reason with the standard
library.
Why: Anthropic answers "The request body is not valid JSON: no low surrogate in string: line 1
column 265728 (char 265727)" (docs/providers.md, Anthropic Messages;
anthropics/claude-code#5934, #2155, #56064: a session poisoned by a truncated emoji).
Safety: safe, as the chat rule: the lone half encodes no character.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext
from rules.engine.text import replace_lone_surrogates

NAME = "messages-lone-surrogates"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    out, changes = replace_lone_surrogates(messages, NAME)
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Replace unpaired UTF-16 surrogates with U+FFFD in every string of `messages`.",
    defect='a lone surrogate (half of a cut emoji): Anthropic "no low surrogate in string"',
    repair="replace it with U+FFFD (the chat rule's repair)",
    safety="safe",
    default=True,
    apply=apply,
)
