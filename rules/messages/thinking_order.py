"""messages-thinking-order: an assistant message with thinking opens with a thinking block.

What: in an assistant message that holds ``thinking`` or ``redacted_thinking`` blocks but does
not start with one (a compaction or an agent that rebuilt the turn put text or a ``tool_use``
first), the thinking blocks move to the front, in their order; every other block keeps its
order. No block is edited: each stays byte-identical, so its signature still verifies.
Why: Anthropic answers 400 "messages.51.content.0: If an assistant message contains any thinking
blocks, the first block must be `thinking` or `redacted_thinking`. Found `text`."
(anthropics/claude-code#20705; docs/providers.md, Anthropic).
Safety: safe: blocks are only reordered; a signature covers a block's bytes, not its position
(anthropics/anthropic-sdk-python#1598).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.blocks import THINKING_TYPES, block_type, content_list, role


def _misplaced(message: Any) -> bool:
    blocks = content_list(message)
    if role(message) != "assistant" or not blocks or block_type(blocks[0]) in THINKING_TYPES:
        return False
    return any(block_type(block) in THINKING_TYPES for block in blocks)


NAME = "messages-thinking-order"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if scan.MISPLACED_THINKING not in scan.signals(messages):
        return Outcome(messages)
    suspects = [index for index, message in enumerate(messages) if _misplaced(message)]
    if not suspects:
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> Any:
        blocks: list[Any] = message["content"]
        thinking = [b for b in blocks if block_type(b) in THINKING_TYPES]
        others = [b for b in blocks if block_type(b) not in THINKING_TYPES]
        changes.append(Change(NAME, index, "moved_thinking", {"count": len(thinking)}))
        return {**message, "content": thinking + others}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Move thinking blocks to the front of their assistant message, unchanged.",
    defect="an assistant message with thinking blocks that does not start with one: Anthropic "
    '"the first block must be `thinking` or `redacted_thinking`"',
    repair="move the thinking blocks to the front (their order kept, each byte-identical)",
    safety="safe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.signals,
    woken_by=on(scan.MISPLACED_THINKING),
)
