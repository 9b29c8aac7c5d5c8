"""messages-thinking-disabled: no thinking in the final assistant message when thinking is off.

What: request level and messages. When the request does not turn thinking on (no ``thinking``,
or ``thinking.type: disabled``) and the final assistant message (the last message, a prefill;
or, in a tool loop in progress, the assistant turn right before the last user message's
``tool_result`` blocks, which Anthropic counts as final too: "a final `assistant` message ...
preceeding the lastmost set of `tool_use` and `tool_result` blocks") holds ``thinking`` or
``redacted_thinking`` blocks, those blocks are removed; if nothing is left the message is
removed. Earlier assistant messages are left alone (Anthropic ignores their thinking then).
Why: Anthropic answers 400 "messages.1.content.0: When thinking is disabled, an `assistant`
message in the final position cannot contain `thinking`. To use thinking blocks, enable
`thinking` in your request." (tailcallhq/forgecode#1853, #1195; docs/providers.md, Anthropic).
Safety: unsafe in principle: the removed thinking no longer reaches the model, which was not
going to think with it; the count and length are logged.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.messages.blocks import (
    THINKING_TYPES,
    block_type,
    content_list,
    final_assistant,
    thinking_on,
)

NAME = "messages-thinking-disabled"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not messages or thinking_on(ctx.request):
        return Outcome(messages)
    out: list[Any] = messages
    changes: list[Change] = []
    # Removing a thinking-only final message makes the assistant turn before it final (a tool
    # loop's last turn, say): that one is judged in turn, until a final turn keeps no thinking.
    while (index := final_assistant(out)) is not None:
        last = out[index]
        blocks = content_list(last)
        if blocks is None or not any(block_type(b) in THINKING_TYPES for b in blocks):
            break
        if out is messages:
            out = list(messages)  # one copy, whatever is removed after
        kept = [b for b in blocks if block_type(b) not in THINKING_TYPES]
        detail = {"count": len(blocks) - len(kept)}
        if not kept:  # a thinking-only message (a tool-loop turn always keeps its tool_use)
            del out[index]
            changes.append(Change(NAME, index, "dropped_message", detail))
            continue
        out[index] = {**last, "content": kept}
        changes.append(Change(NAME, index, "dropped_thinking", detail))
        break
    return Outcome(out, tuple(changes))


def resume(
    messages: list[Any], ctx: RuleContext, acted: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after others, ``acted`` if it changed those (``None``: the
    list's start); and the same after them. It reads the end of the list: a list that goes on is
    decided anew where the end it judges (the final assistant, after what it removed) lies in the
    new messages; ``None`` when the end before was changed or the new end reaches back
    (``Horizon``, rules/engine/resume.py)."""
    if acted is None:
        outcome = apply(messages, ctx)
        return outcome, bool(outcome.changes)
    if acted:
        return None if messages else (Outcome(messages), True)
    if not messages or thinking_on(ctx.request):
        return Outcome(messages), False
    outcome = apply(messages, ctx)
    if len(outcome.messages) < 2:  # the final assistant may be one before them
        return None
    return outcome, bool(outcome.changes)


RULE = Rule(
    name=NAME,
    summary="With thinking off, remove thinking blocks from the final assistant message (a "
    "tool loop's last assistant turn too).",
    defect='thinking off and a final assistant message with thinking blocks: Anthropic "When '
    "thinking is disabled, an `assistant` message in the final position cannot contain "
    '`thinking`"',
    repair="remove its thinking blocks (the message too if nothing is left); the final "
    "assistant is the last message, or the turn whose tool results end the conversation",
    safety="lossy",
    default=False,
    apply=apply,
    horizon=carried(resume),  # reads the end of the list only
    reads_request=True,
)
