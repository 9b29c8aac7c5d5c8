"""empty-tools: no request leaves with ``tools: []``.

What: a request whose ``tools`` is an empty list or ``null`` loses the key, with the
``tool_choice`` and ``parallel_tool_calls`` that only make sense with tools.
Why: DeepSeek "Invalid 'tools': empty array. Expected an array with minimum length 1, but got
an empty array instead." and Mistral 422 ``extra_forbidden`` at ["body","tools"]
(docs/providers.md#mistral-pairing, marimo-team/marimo#6108, partITech/php-mistral#76); agents send
an empty list when every tool is disabled. OpenAI refuses ``tool_choice`` and
``parallel_tool_calls`` without tools.
Safety: safe. No tool was offered either way.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext

NAME = "empty-tools"
#: Fields that only mean something next to a non-empty ``tools``.
TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    if "tools" not in request or request["tools"] not in ([], None):
        return Outcome(messages)
    dropped = [key for key in TOOL_FIELDS if key in request]
    fields = {key: value for key, value in request.items() if key not in TOOL_FIELDS}
    was = "null" if request["tools"] is None else "empty_list"
    change = Change(NAME, -1, "dropped_fields", {"fields": dropped, "tools": was})
    return Outcome(messages, (change,), request=fields)


RULE = Rule(
    name=NAME,
    summary="Drop `tools: []` (or null) with its tool_choice and parallel_tool_calls.",
    defect="request level: `tools: []` or `tools: null`: DeepSeek \"Invalid 'tools': empty array. "
    'Expected an array with minimum length 1" (marimo-team/marimo#6108), Mistral 422 '
    "`extra_forbidden` (partITech/php-mistral#76; docs/providers.md#deepseek-pairing)",
    repair="drop `tools`, with the `tool_choice` and `parallel_tool_calls` that ride on it. No "
    "tool was offered either way",
    safety="safe",
    default=False,
    apply=apply,
    reads_request=True,
)
