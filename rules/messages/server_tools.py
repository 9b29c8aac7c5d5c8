"""messages-server-tools: ``tools`` holds only entries the upstream can read.

What: request level. An entry of ``tools`` that is no object, or whose ``type`` is a string
other than ``custom`` (Anthropic server and schema-less tools: ``web_search_20250305``,
``web_fetch_…``, ``code_execution_…``, ``bash_…``, ``text_editor_…``) and not in option
``keep``, is removed, logged with its position and type. A ``tool_choice`` naming a removed
tool becomes ``{"type": "auto"}``; if no tool is left, ``tools`` and ``tool_choice`` go.
Why: an Anthropic-format relay in front of DeepSeek answered Claude Code 400 "Invalid type for
'tools.23', expected an json object." (QuantumNous/new-api#5380, Claude Code 2.1.168); an
upstream that only implements custom tools cannot run Anthropic's server tools. DeepSeek's own
Anthropic endpoint documents ``web_search`` as supported (esengine/DeepSeek-Reasonix#5166), so
no profile switches this on: enable it for a relay that refuses them.
Safety: unsafe: the model loses those tools (it could not use them through this upstream).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import CLIENT_TOOL_TYPES, foreign_tool
from rules.engine.wake import fields

NAME = "messages-server-tools"

#: The rule's options (the record below lists them; read them through these).
KEEP: Option[list[str]] = Option("keep", [], "Tool types to keep (e.g. `web_search_20250305`).")


def _foreign(tool: Any, keep: Any) -> bool:
    return foreign_tool(tool, CLIENT_TOOL_TYPES["messages"], keep)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    tools = ctx.request.get("tools")
    keep = KEEP.of(ctx)
    if type(tools) is not list or not any(_foreign(t, keep) for t in tools):
        return Outcome(messages)
    kept = [tool for tool in tools if not _foreign(tool, keep)]
    removed = [
        {"position": p, "type": t.get("type") if type(t) is dict else type(t).__name__}
        for p, t in enumerate(tools)
        if _foreign(t, keep)
    ]
    names = {t.get("name") for t in tools if type(t) is dict and _foreign(t, keep)}
    fields = {**ctx.request, "tools": kept}
    choice = fields.get("tool_choice")
    if not kept:
        del fields["tools"]
        fields.pop("tool_choice", None)
    elif type(choice) is dict and choice.get("type") == "tool" and choice.get("name") in names:
        fields["tool_choice"] = {"type": "auto"}
    change = Change(NAME, -1, "dropped_tools", {"tools": removed})
    return Outcome(messages, (change,), request=fields)


RULE = Rule(
    name=NAME,
    summary="Remove server tools and non-object entries from `tools`.",
    defect="a `tools` entry the upstream cannot read (an Anthropic server tool, a non-object): "
    "\"Invalid type for 'tools.23', expected an json object.\"",
    repair="remove it (option `keep: []` lists types to keep); a `tool_choice` naming it "
    "becomes `auto`; no tool left: `tools` and `tool_choice` go",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(KEEP,),
    reads_request=True,
    woken_by=fields("tools"),
)
