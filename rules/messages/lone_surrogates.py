"""messages-lone-surrogates: no string of a Messages ``messages`` list leaves with a lone surrogate.

What: every unpaired UTF-16 surrogate in any string of any message (keys, block texts, tool
inputs, tool results) becomes U+FFFD, with the repair the chat rule uses
(``rules/engine/text.py``). The proxy repairs the request's other fields (``system``,
``tools``) the same way, and reads bodies orjson refuses for this reason with the standard
library.
Why: Anthropic answers "The request body is not valid JSON: no low surrogate in string: line 1
column 265728 (char 265727)" (docs/providers.md, Anthropic Messages;
anthropics/claude-code#5934, #2155, #56064: a session poisoned by a truncated emoji).
Safety: safe, as the chat rule: the lone half encodes no character. A signed block (a
``thinking`` block with a signature, a ``redacted_thinking`` block) is never rewritten under its
signature: one holding a lone surrogate is removed whole (``dropped_signed_thinking``,
its position in the message's content), since a changed text no longer matches its signature
and Anthropic would refuse it; ``messages-missing-thinking`` may then restore the turn's thinking
exactly as the model produced it, from the reasoning stash.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_each
from rules.engine.text import any_surrogate, repair_value

NAME = "messages-lone-surrogates"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not any_surrogate(messages):
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        message, dropped = _without_broken_signed(message)
        if dropped:
            detail = {"count": len(dropped), "blocks": dropped}
            changes.append(Change(NAME, index, "dropped_signed_thinking", detail))
        fixed, paths = repair_value(message)
        if paths:
            changes.append(Change(NAME, index, "replaced", {"count": len(paths), "paths": paths}))
        return fixed

    return Outcome(rewrite_each(messages, fix), tuple(changes))


def _signed(block: Any) -> bool:
    """A block whose content a signature covers: never rewritten, only kept or removed."""
    if type(block) is not dict:
        return False
    kind = block.get("type")
    if kind == "redacted_thinking":
        return True
    signature = block.get("signature")
    return kind == "thinking" and type(signature) is str and bool(signature)


def _without_broken_signed(message: Any) -> tuple[Any, list[int]]:
    """``message`` without its signed blocks that hold a lone surrogate, and their positions."""
    content = message.get("content") if type(message) is dict else None
    if type(content) is not list:
        return message, []
    dropped = [i for i, block in enumerate(content) if _signed(block) and repair_value(block)[1]]
    if not dropped:
        return message, []
    kept = [block for i, block in enumerate(content) if i not in dropped]
    return {**message, "content": kept}, dropped


RULE = Rule(
    name=NAME,
    summary="Replace unpaired UTF-16 surrogates with U+FFFD in every string of `messages`.",
    defect='a lone surrogate (half of a cut emoji): Anthropic "no low surrogate in string"',
    repair="replace it with U+FFFD (the chat rule's repair); a signed thinking or redacted "
    "thinking block holding one is removed whole, never rewritten under its signature",
    safety={
        "replaced": "safe",
        "dropped_signed_thinking": "lossy",
    },
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
)
