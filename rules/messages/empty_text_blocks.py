"""messages-empty-text-blocks: no text block without visible text.

What: in every message whose content is a block list, a ``text`` block whose ``text`` is empty
or only whitespace is removed; every other block stays, in order. A message left with no block
is ``messages-empty-messages``' to handle (it runs next).
Why: Anthropic answers 400 "messages: text content blocks must be non-empty" (docs/providers.md,
Anthropic; anthropics/claude-code#59812, NousResearch/hermes-agent#11929: proxies turn
``content: ""`` into an empty text block) and "text content blocks must contain non-whitespace
text"; Bedrock "The text field in the ContentBlock object at messages.15.content.0 is blank".
Safety: safe: the block carried no visible text (a ``cache_control`` mark on it goes with it,
logged as ``had_cache_control``).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.blocks import content_list, is_blank_text

NAME = "messages-empty-text-blocks"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if scan.BLANK_TEXT not in scan.signals(messages):
        return Outcome(messages)  # the common case: the one shared walk found none
    suspects = [
        index
        for index, message in enumerate(messages)
        if (blocks := content_list(message)) is not None and any(map(is_blank_text, blocks))
    ]
    if not suspects:
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> Any:
        blocks: list[Any] = message["content"]
        positions = [p for p, block in enumerate(blocks) if is_blank_text(block)]
        detail: dict[str, Any] = {"positions": positions}
        if any("cache_control" in blocks[p] for p in positions):
            detail["had_cache_control"] = True
        changes.append(Change(NAME, index, "dropped_blocks", detail))
        kept = [block for block in blocks if not is_blank_text(block)]
        return {**message, "content": kept}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Remove text blocks that hold no visible text.",
    defect='a text block with empty or whitespace-only text: Anthropic "messages: text content '
    'blocks must be non-empty"',
    repair="remove the block; the others keep their order",
    safety="safe",
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.signals,
    woken_by=on(scan.BLANK_TEXT),
)
