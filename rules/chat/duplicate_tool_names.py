"""duplicate-tool-names: no two tools the request defines share a name.

What: a ``tools[]`` entry whose ``function.name`` an earlier entry already has is removed; the
first definition of each name stays, as the client ordered them. A ``tool_choice`` naming the
function still names the one kept.
Why: DeepSeek "Tool names must be unique." on every endpoint, ``/chat/completions`` and its
Anthropic-format ``/anthropic/v1/messages`` alike (docs/providers.md#deepseek-request,
decolua/9router PR#3333, xinnan-tech/xiaozhi-esp32-server#3180; agents that register one MCP
server twice send the same tools twice, liliMozi/openhanako#789).
Safety: unsafe when the definitions differ: the later one's description and schema are not
sent (the model calls the name with the first one's arguments). The log says how many
removed definitions differed from the one kept (``differing``), with their names and positions.
"""

from __future__ import annotations

from typing import Any

from rules.chat.message_fields import chat_tool_name
from rules.engine.base import Outcome, Rule, RuleContext, fields_only
from rules.engine.request import drop_repeated_tools
from rules.engine.wake import fields

NAME = "duplicate-tool-names"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return drop_repeated_tools(messages, ctx.request, chat_tool_name, NAME)


RULE = Rule(
    name=NAME,
    summary="Keep only the first tool definition of each name.",
    defect='request level: two tools with the same `function.name`: DeepSeek "Tool names must be '
    'unique." (decolua/9router PR#3333, xinnan-tech/xiaozhi-esp32-server#3180; '
    "docs/providers.md#deepseek-request)",
    repair="each later definition of a name is removed, the first kept. Unsafe when they "
    "differ: the later description and schema are not sent (logged: names, positions, "
    "`differing`)",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads `tools`, no message
    reads_request=True,
    woken_by=fields("tools"),
)
