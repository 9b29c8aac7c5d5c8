"""empty-tools: no request leaves with ``tools: []``, nor (where refused) a choice without tools.

What: a request whose ``tools`` is an empty list or ``null`` loses the key, with the
``tool_choice`` and ``parallel_tool_calls`` that only make sense with tools. With option
``refused: tool_choice`` (under ``xai``) the refusal is the choice, not the list: a
``tool_choice`` sent with no non-empty ``tools`` (absent, ``[]`` or ``null``) is removed, and
nothing else.
Why: DeepSeek "Invalid 'tools': empty array. Expected an array with minimum length 1, but got
an empty array instead." and Mistral 422 ``extra_forbidden`` at ["body","tools"]
(docs/providers.md#mistral-pairing, marimo-team/marimo#6108, partITech/php-mistral#76); agents send
an empty list when every tool is disabled. OpenAI refuses ``tool_choice`` and
``parallel_tool_calls`` without tools. xAI "Invalid request content: A tool_choice was set on the
request but no tools were specified." whether ``tools`` is empty or absent
(docs/providers.md#xai-request, router-for-me/CLIProxyAPI#3704, #4491: Codex's compaction request).
Safety: safe. No tool was offered either way.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import DROP, with_fields
from rules.engine.wake import fields

NAME = "empty-tools"
#: Stands for a ``tools`` key the request does not have.
ABSENT: Any = object()
#: Fields that only mean something next to a non-empty ``tools``.
TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")

REFUSED = Option(
    "refused",
    "empty_tools",
    "What the provider refuses: `empty_tools` (an empty or null `tools`: it goes, with its "
    "tool_choice and parallel_tool_calls) or `tool_choice` (a tool_choice without a non-empty "
    "`tools`, absent included: only the choice goes; xAI).",
    choices=("empty_tools", "tool_choice"),
)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    tools = request.get("tools", ABSENT)
    if REFUSED.of(ctx) == "tool_choice":
        if "tool_choice" not in request or tools not in ([], None, ABSENT):
            return Outcome(messages)
        was = "absent" if tools is ABSENT else "null" if tools is None else "empty_list"
        detail = {"fields": ["tool_choice"], "tools": was}
        change = Change(NAME, -1, "dropped_fields", detail)
        return Outcome(messages, (change,), request=with_fields(request, {"tool_choice": DROP}))
    if "tools" not in request or request["tools"] not in ([], None):
        return Outcome(messages)
    dropped = [key for key in TOOL_FIELDS if key in request]
    was = "null" if request["tools"] is None else "empty_list"
    change = Change(NAME, -1, "dropped_fields", {"fields": dropped, "tools": was})
    return Outcome(messages, (change,), request=with_fields(request, dict.fromkeys(dropped, DROP)))


RULE = Rule(
    name=NAME,
    summary="Drop `tools: []` (or null) with its tool_choice and parallel_tool_calls.",
    defect="request level: `tools: []` or `tools: null`: DeepSeek \"Invalid 'tools': empty array. "
    'Expected an array with minimum length 1" (marimo-team/marimo#6108), Mistral 422 '
    "`extra_forbidden` (partITech/php-mistral#76; docs/providers.md#deepseek-pairing); with "
    "option `refused: tool_choice`, a `tool_choice` and no non-empty `tools`, absent included: "
    'xAI "A tool_choice was set on the '
    'request but no tools were specified." (router-for-me/CLIProxyAPI#3704; '
    "docs/providers.md#xai-request)",
    repair="drop `tools`, with the `tool_choice` and `parallel_tool_calls` that ride on it (with "
    "`refused: tool_choice`, only the `tool_choice` sent without tools). No tool was offered "
    "either way",
    safety="safe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads `tools` and `tool_choice`, no message
    options=(REFUSED,),
    reads_request=True,
    woken_by=fields("tools", "tool_choice"),
)
