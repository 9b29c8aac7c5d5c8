"""messages-duplicate-tool-names: no two tools the request defines share a name.

What: request level. A ``tools[]`` entry whose ``name`` an earlier entry already has is removed;
the first definition of each name stays, as the client ordered them. A ``tool_choice`` naming
the tool still names the one kept.
Why: DeepSeek's Anthropic-format endpoint answers "Tool names must be unique." when Claude Code
sends two ``Bash`` tools (decolua/9router PR#3333's live matrix: refused on every DeepSeek
endpoint; docs/providers.md#deepseek-request); agents that register one MCP server twice send
the same tools twice (liliMozi/openhanako#789).
Safety: unsafe when the definitions differ: the later one's description and schema are not sent.
The log says how many removed definitions differed from the one kept (``differing``), with
their names and positions.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext, fields_only
from rules.engine.request import drop_repeated_tools
from rules.engine.wake import fields

NAME = "messages-duplicate-tool-names"


def _name(tool: Any) -> str | None:
    """A Messages tool's name (``tools[].name``), if a string."""
    name = tool.get("name") if type(tool) is dict else None
    return name if type(name) is str else None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return drop_repeated_tools(messages, ctx.request, _name, NAME)


RULE = Rule(
    name=NAME,
    summary="Keep only the first tool definition of each name.",
    defect="request level: two tools with the same `name`: DeepSeek's Anthropic endpoint \"Tool "
    'names must be unique." (decolua/9router PR#3333; docs/providers.md#deepseek-request)',
    repair="each later definition of a name is removed, the first kept. Unsafe when they "
    "differ: the later description and schema are not sent (logged: names, positions, "
    "`differing`)",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    reads_request=True,
    woken_by=fields("tools"),
)
