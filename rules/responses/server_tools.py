"""responses-server-tools: ``tools`` holds only the function tools the endpoint takes.

What: request level. An entry of ``tools`` that is no object, or whose ``type`` is a string other
than ``function`` (OpenAI's built-in tools: ``web_search``, ``file_search``, ``code_interpreter``,
``computer_use_preview``, ``mcp``, ``image_generation``, ``local_shell``; a freeform ``custom``
tool) and not in option ``keep``, is removed, logged with its position, its type and its name (a
tool's name, never its description or schema). A ``tool_choice`` that names a removed tool or
type becomes ``"auto"``; an ``allowed_tools`` choice keeps the entries that still stand (none
left: ``"auto"``); if no tool is left, ``tools`` and ``tool_choice`` go. The Messages twin is
``messages-server-tools``.
Why: Command Code's Responses endpoint answers Codex "Only `type:"function"` tools are supported
on this endpoint. Built-in tools (web_search, file_search, code_interpreter, computer_use, mcp)
are not executed here." (param ``tools.8.type``) at the first non-function tool, Codex's freeform
``apply_patch`` (CommandCodeAI/command-code#885; docs/providers.md#others-responses): the request
is refused before any output, and the reporter asks the endpoint to ignore those declarations.
Safety: unsafe, as ``messages-server-tools``: no message, item, text or argument the client sent
is touched, but the request no longer offers the model those tools (it could not use them through
this upstream). Off by default: recovery runs it when a refusal names a tool's type.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import CLIENT_TOOL_TYPES, DROP, foreign_tool, with_fields
from rules.engine.wake import fields

NAME = "responses-server-tools"

#: The rule's options (the record below lists them; read them through these).
KEEP: Option[list[str]] = Option(
    "keep", [], "Tool types to keep beside `function` (e.g. `custom`, `web_search`)."
)


def _foreign(tool: Any, keep: Any) -> bool:
    return foreign_tool(tool, CLIENT_TOOL_TYPES["responses"], keep)


def _choice(choice: Any, types: set[str], names: set[str]) -> Any:
    """``choice`` with the removed tools out of it: the same object when it names none of
    them, ``"auto"`` when it names one (or every tool an ``allowed_tools`` choice allows)."""
    if type(choice) is not dict:
        return choice
    allowed = choice.get("tools") if choice.get("type") == "allowed_tools" else None
    if type(allowed) is list:
        left = [entry for entry in allowed if not _removed(entry, types, names)]
        if len(left) == len(allowed):
            return choice
        return {**choice, "tools": left} if left else "auto"
    return "auto" if _removed(choice, types, names) else choice


def _removed(entry: Any, types: set[str], names: set[str]) -> bool:
    """Whether a choice (or an ``allowed_tools`` entry) names a removed tool: never a function
    (a function tool is never removed, whatever a removed tool shares its name)."""
    if type(entry) is not dict or entry.get("type") == "function":
        return False
    name = entry.get("name")
    return entry.get("type") in types or (type(name) is str and name in names)


def _strings(tools: list[Any], key: str) -> set[str]:
    """The string values of ``key`` among ``tools``."""
    return {v for tool in tools if type(tool) is dict and type(v := tool.get(key)) is str}


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    tools = ctx.request.get("tools")
    keep = KEEP.of(ctx)
    if type(tools) is not list or not any(_foreign(t, keep) for t in tools):
        return Outcome(items)
    kept = [tool for tool in tools if not _foreign(tool, keep)]
    gone = [tool for tool in tools if _foreign(tool, keep)]
    removed = [
        {
            "position": position,
            "type": tool.get("type") if type(tool) is dict else type(tool).__name__,
            **(
                {"name": tool["name"]}
                if type(tool) is dict and type(tool.get("name")) is str
                else {}
            ),
        }
        for position, tool in enumerate(tools)
        if _foreign(tool, keep)
    ]
    # a type still declared by a kept tool is no removed type (a choice naming it stays)
    types = _strings(gone, "type") - _strings(kept, "type")
    detail: dict[str, Any] = {"tools": removed}
    changes: dict[str, Any] = {"tools": kept}
    choice = ctx.request.get("tool_choice")
    if not kept:
        changes = {"tools": DROP, "tool_choice": DROP}
    elif (new := _choice(choice, types, _strings(gone, "name"))) is not choice:
        changes["tool_choice"] = new
        detail["tool_choice"] = new if type(new) is str else "allowed_tools"
    change = Change(NAME, -1, "dropped_tools", detail)
    return Outcome(items, (change,), request=with_fields(ctx.request, changes))


RULE = Rule(
    name=NAME,
    summary="Remove the tools that are not function tools (built-in, custom) from `tools`.",
    defect='a `tools` entry other than a function tool: "Only `type:"function"` tools are '
    "supported on this endpoint. Built-in tools (web_search, file_search, code_interpreter, "
    'computer_use, mcp) are not executed here." (CommandCodeAI/command-code#885; '
    "docs/providers.md#others-responses)",
    repair="remove it (option `keep: []` lists types to keep); a `tool_choice` naming it "
    "becomes `auto`, an `allowed_tools` choice loses it; no tool left: `tools` and `tool_choice` "
    "go. Unsafe: the model is no longer offered those tools; no item or text changes",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no item
    options=(KEEP,),
    reads_request=True,
    woken_by=fields("tools"),
)
