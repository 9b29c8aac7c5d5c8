"""messages-thinking-disabled: no thinking in the final assistant message when thinking is off.

What: request level and messages. When the request does not turn thinking on (no ``thinking``,
or ``thinking.type: disabled``) and the last message is an assistant message (a prefill, or the
turn of a tool loop that an agent replays) holding ``thinking`` or ``redacted_thinking``
blocks, those blocks are removed; if nothing is left the message is removed. Earlier assistant
messages are left alone (Anthropic ignores their thinking then).
Why: Anthropic answers 400 "messages.1.content.0: When thinking is disabled, an `assistant`
message in the final position cannot contain `thinking`. To use thinking blocks, enable
`thinking` in your request." (tailcallhq/forgecode#1853, #1195; docs/providers.md, Anthropic).
Safety: unsafe in principle: the removed thinking no longer reaches the model, which was not
going to think with it; the count and length are logged.
"""

from __future__ import annotations

from typing import Any

from rules.anthropic.blocks import THINKING_TYPES, block_type, content_list, role, thinking_on
from rules.engine.base import Change, Outcome, Rule, RuleContext

NAME = "messages-thinking-disabled"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not messages or thinking_on(ctx.request) or role(messages[-1]) != "assistant":
        return Outcome(messages)
    last = messages[-1]
    blocks = content_list(last)
    if blocks is None or not any(block_type(b) in THINKING_TYPES for b in blocks):
        return Outcome(messages)
    kept = [b for b in blocks if block_type(b) not in THINKING_TYPES]
    index = len(messages) - 1
    detail = {"count": len(blocks) - len(kept)}
    if not kept:
        return Outcome(messages[:-1], (Change(NAME, index, "dropped_message", detail),))
    change = Change(NAME, index, "dropped_thinking", detail)
    return Outcome([*messages[:-1], {**last, "content": kept}], (change,))


RULE = Rule(
    name=NAME,
    summary="With thinking off, remove thinking blocks from a final assistant message.",
    defect='thinking off and a final assistant message with thinking blocks: Anthropic "When '
    "thinking is disabled, an `assistant` message in the final position cannot contain "
    '`thinking`"',
    repair="remove its thinking blocks (the message too if nothing is left)",
    safety="unsafe",
    default=False,
    apply=apply,
    reads_request=True,
)
