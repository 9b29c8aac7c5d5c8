"""empty-tool-parameters: every function tool the request defines carries a parameter schema.

What: a ``tools[]`` entry of type ``function`` whose ``function.parameters`` is absent, ``null``
or ``{}`` gets the empty object schema ``{"type": "object", "properties": {}}`` (option
``schema``). Tools of other types, and a ``function`` that is not an object, are left alone.
Why: MiniMax "invalid params, function parameters is empty (2013)"
(docs/providers.md#minimax-request, QwenLM/qwen-code#11834, #11905: parameterless tools such as
``cron_list`` are sent without ``parameters``; the same tools with
``{"type": "object", "properties": {}}`` are accepted).
Safety: safe. A tool without parameters takes none; the schema says exactly that.
"""

from __future__ import annotations

from typing import Any

from rules.chat.message_fields import chat_tool_name
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import empty_schema, tool_list, with_fields
from rules.engine.wake import fields

NAME = "empty-tool-parameters"

SCHEMA = Option(
    "schema",
    {"type": "object", "properties": {}},
    "The schema a tool without parameters gets (a JSON object).",
)


def _empty(tool: Any) -> bool:
    if type(tool) is not dict or tool.get("type", "function") != "function":
        return False
    function = tool.get("function")
    if type(function) is not dict:
        return False
    return empty_schema(function.get("parameters"), absent="parameters" not in function)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    tools = tool_list(ctx.request)
    found = [position for position, tool in enumerate(tools) if _empty(tool)]
    if not found:
        return Outcome(messages)
    schema = SCHEMA.of(ctx)
    schema = schema if type(schema) is dict else SCHEMA.default
    fixed = list(tools)
    names = []
    for position in found:
        tool = tools[position]
        fixed[position] = {**tool, "function": {**tool["function"], "parameters": dict(schema)}}
        names.append(chat_tool_name(tool))
    detail = {"positions": found, "names": names, "count": len(found)}
    change = Change(NAME, -1, "added_parameters", detail)
    return Outcome(messages, (change,), request=with_fields(ctx.request, {"tools": fixed}))


RULE = Rule(
    name=NAME,
    summary="Give a function tool without `parameters` the empty object schema.",
    defect="request level: a function tool whose `parameters` is absent, null or `{}`: MiniMax "
    '"invalid params, function parameters is empty (2013)" (QwenLM/qwen-code#11834; '
    "docs/providers.md#minimax-request)",
    repair='`parameters` becomes `{"type": "object", "properties": {}}` (option `schema`): the '
    "tool takes no argument either way; the log names the tools",
    safety="safe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(SCHEMA,),
    reads_request=True,
    woken_by=fields("tools"),
)
