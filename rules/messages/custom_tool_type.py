"""messages-custom-tool-type: a client tool goes without Anthropic's optional ``type: "custom"``.

What: request level. The ``type`` key of every ``tools[]`` entry whose ``type`` is exactly
``"custom"`` is removed; the tool's name, description, schema and every other key stay, in
order, and no other tool is touched (a server tool's ``type`` is what it is). The change names
the tools' positions and names.
Why: DeepSeek's Anthropic-format endpoint parses a tool with a ``type`` as one of its server tools
and refuses the tag: "Failed to deserialize the JSON body into the target type: tools[0]: unknown
variant `custom`, expected `web_search_20250305` or `web_search_20260209`" (decolua/9router#3905,
#3952: since 9router 0.5.69 every Claude-format tool carries it, and every Claude Code request to
DeepSeek fails; docs/providers.md#deepseek-request).
Safety: safe: Anthropic reads a tool without ``type`` as a custom (client) tool, so the request
means the same; nothing the client wrote is lost.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import with_fields
from rules.engine.wake import fields

NAME = "messages-custom-tool-type"


def _tagged(tool: Any) -> bool:
    return type(tool) is dict and tool.get("type") == "custom"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    tools = ctx.request.get("tools")
    if type(tools) is not list or not any(_tagged(tool) for tool in tools):
        return Outcome(messages)
    untagged = [
        {key: value for key, value in tool.items() if key != "type"} if _tagged(tool) else tool
        for tool in tools
    ]
    positions = [position for position, tool in enumerate(tools) if _tagged(tool)]
    names = [tools[p].get("name") for p in positions if type(tools[p].get("name")) is str]
    detail = {"positions": positions[:64], "names": names[:64], "count": len(positions)}
    change = Change(NAME, -1, "dropped_custom_type", detail)
    return Outcome(messages, (change,), request=with_fields(ctx.request, {"tools": untagged}))


RULE = Rule(
    name=NAME,
    summary='Drop Anthropic\'s optional `type: "custom"` from client tool definitions.',
    defect='request level: a client tool tagged `type: "custom"`: DeepSeek\'s Anthropic endpoint '
    '"Failed to deserialize the JSON body into the target type: tools[0]: unknown variant '
    '`custom`, expected `web_search_20250305` or `web_search_20260209`" (decolua/9router#3905; '
    "docs/providers.md#deepseek-request)",
    repair="remove the `type` key of each tool whose type is `custom`; the tool, its name, "
    "description and schema stay. Safe: Anthropic reads a tool without `type` as a custom tool",
    safety="safe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    reads_request=True,
    woken_by=fields("tools"),
)
