"""messages-tool-loop-thinking: with thinking on, a tool loop's last assistant turn opens with
its thinking, or thinking is turned off for the request.

What: request level and messages. When the request turns thinking on (``thinking.type``
``enabled`` or ``adaptive``), the conversation ends with the user's ``tool_result`` blocks (a
tool loop in progress) and the assistant message before them does not start with a
``thinking`` or ``redacted_thinking`` block (a compaction, a model switch or an agent that
stores text only lost it), the request's ``thinking`` field is removed, so this one request runs
without extended thinking. Nothing in ``messages`` changes. A loop whose last assistant turn
kept its thinking is never touched.
Why: Anthropic answers 400 "messages.1.content.0.type: Expected `thinking` or
`redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message
must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result`
blocks). We recommend you include thinking blocks from previous turns. To avoid this
requirement, disable `thinking`." (n8n-io/n8n#22550, anomalyco/opencode#3077,
anthropics/claude-code#20692, kaitranntt/ccs#113; docs/providers.md, Anthropic Messages). The
lost block cannot be rebuilt: a thinking block must carry Anthropic's signature over its exact
bytes (anthropics/anthropic-sdk-python#1598), so the error's own advice, disabling thinking, is
the repair; the next turn, with the model's new thinking kept, runs with thinking again.
Safety: unsafe: the model answers this one turn without extended thinking (logged with the
thinking type).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.wake import fields
from rules.messages.blocks import (
    THINKING_TYPES,
    block_type,
    content_list,
    is_tool_result,
    role,
    thinking_on,
)

NAME = "messages-tool-loop-thinking"


def unthinking_loop(messages: list[Any]) -> int | None:
    """The index of a tool loop's last assistant message that does not open with thinking,
    if the conversation ends in that loop's results; else ``None``."""
    if len(messages) < 2 or role(messages[-1]) != "user" or role(messages[-2]) != "assistant":
        return None
    results = content_list(messages[-1])
    if not results or not is_tool_result(results[0]):
        return None
    blocks = content_list(messages[-2])
    if blocks and block_type(blocks[0]) in THINKING_TYPES:
        return None
    return len(messages) - 2


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    if not thinking_on(request):
        return Outcome(messages)
    index = unthinking_loop(messages)
    if index is None:
        return Outcome(messages)
    fields = {key: value for key, value in request.items() if key != "thinking"}
    detail = {"was": request["thinking"].get("type"), "assistant": index}
    return Outcome(messages, (Change(NAME, -1, "disabled_thinking", detail),), request=fields)


def resume(
    messages: list[Any], ctx: RuleContext, before: tuple[bool, int] | None
) -> tuple[Outcome, tuple[bool, int]] | None:
    """The rule over ``messages`` after others, ``before`` holding whether it turned thinking
    off for those and how many they were (``None``: the list's start); and the same after them.
    It reads the last two messages: a list that goes on by two or more is decided anew; ``None``
    when it acted before (a change of the request's fields, which the next request brings anew)
    or one message is added to a list that may end in a tool loop (``Horizon``,
    rules/engine/resume.py)."""
    acted, offset = (False, 0) if before is None else before
    if acted:
        return None
    after = offset + len(messages)
    if before is None or len(messages) >= 2 or not thinking_on(ctx.request):
        outcome = apply(messages, ctx)
        if outcome.changes and offset:  # the assistant is counted in the whole list
            change = outcome.changes[0]
            detail = {**change.detail, "assistant": offset + change.detail["assistant"]}
            outcome = replace(outcome, changes=(replace(change, detail=detail),))
        return outcome, (bool(outcome.changes), after)
    return None if messages else (Outcome(messages), (False, after))


RULE = Rule(
    name=NAME,
    summary="Thinking on, a tool loop whose last assistant turn lost its thinking: turn "
    "thinking off for the request.",
    defect="thinking on and the tool loop's last assistant message does not open with "
    'thinking: Anthropic "When `thinking` is enabled, a final `assistant` message must start '
    'with a thinking block"',
    repair="remove the request's `thinking` (this turn runs without extended thinking); "
    "messages unchanged",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # reads the last two messages
    reads_request=True,
    woken_by=fields("thinking"),
)
