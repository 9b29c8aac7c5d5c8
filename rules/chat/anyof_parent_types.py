"""anyof-parent-types: a tool schema's ``anyOf`` carries its ``type`` in each branch, not beside
it.

What: request level. In each function tool's ``parameters`` schema, at any depth, a schema that
has both ``anyOf`` (a list) and ``type`` loses its ``type``, and each ``anyOf`` branch that is an
object without one of its own gets it (a list of types counts as given only when it names one
type; branches with their own ``type``, ``$ref``, ``anyOf``, ``oneOf``, ``allOf``, ``enum`` or
``const`` keep theirs). The change names the tool and the paths moved (schema keys, no text).
Why: Moonshot/Kimi validates tool schemas with its own rules: "tools.function.parameters is not
a valid moonshot flavored json schema, details: <At path 'properties.questions.items.properties.
options': when using anyOf, type should be defined in anyOf items instead of the parent
schema>" (openJiuwen-ai/jiuwenswarm#3942, openclaw/openclaw#113130, MoonshotAI/kimi-code#2661;
docs/providers.md#kimi-request). The same MCP tools are accepted with the type moved.
Safety: safe: every branch still allows what the parent type allowed, the schema says the same.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import with_fields
from rules.engine.wake import fields

NAME = "anyof-parent-types"
#: How deep a schema is read (a deeper one is left as it is).
MAX_DEPTH = 64
#: Branch keys that already say what the branch is: its type is not given from the parent.
_OWN = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const")


def _moved(schema: Any, path: str, depth: int, found: list[str]) -> Any:
    """``schema`` with each typed ``anyOf`` parent fixed (a copy where anything changed), the
    paths fixed appended to ``found``."""
    if depth > MAX_DEPTH:
        return schema
    if isinstance(schema, list):
        items = [_moved(item, path, depth + 1, found) for item in schema]
        return items if any(a is not b for a, b in zip(items, schema, strict=True)) else schema
    if not isinstance(schema, dict):
        return schema
    out = {key: _moved(value, _join(path, key), depth + 1, found) for key, value in schema.items()}
    changed = any(out[key] is not schema[key] for key in schema)
    branches = out.get("anyOf")
    if isinstance(branches, list) and "type" in out:
        kind = out.pop("type")
        given = (
            kind if isinstance(kind, str) or (isinstance(kind, list) and len(kind) == 1) else None
        )
        out["anyOf"] = [
            {"type": given, **branch}
            if given is not None and isinstance(branch, dict) and not any(k in branch for k in _OWN)
            else branch
            for branch in branches
        ]
        found.append(path or "root")
        return out
    return out if changed else schema


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    tools = ctx.request.get("tools")
    if not isinstance(tools, list):
        return Outcome(messages)
    rebuilt: list[Any] = []
    changes: list[Change] = []
    for position, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        parameters = function.get("parameters") if isinstance(function, dict) else None
        found: list[str] = []
        new = _moved(parameters, "", 0, found) if isinstance(parameters, dict) else parameters
        if not found:
            rebuilt.append(tool)
            continue
        assert isinstance(tool, dict) and isinstance(function, dict)
        rebuilt.append({**tool, "function": {**function, "parameters": new}})
        detail = {"position": position, "name": function.get("name"), "paths": found[:16]}
        changes.append(Change(NAME, -1, "moved_schema_types", detail))
    if not changes:
        return Outcome(messages)
    return Outcome(messages, tuple(changes), request=with_fields(ctx.request, {"tools": rebuilt}))


RULE = Rule(
    name=NAME,
    summary="Move a tool schema's `type` from beside `anyOf` into each branch.",
    defect='request level: a schema with both `anyOf` and `type`: Kimi "tools.function.parameters '
    "is not a valid moonshot flavored json schema, details: <At path '...': when using anyOf, "
    'type should be defined in anyOf items instead of the parent schema>" '
    "(openJiuwen-ai/jiuwenswarm#3942, openclaw/openclaw#113130; docs/providers.md#kimi-request)",
    repair="drop the parent's `type` and give it to each `anyOf` branch that has none. Every "
    "branch still allows what the parent allowed",
    safety="safe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    reads_request=True,
    woken_by=fields("tools"),
)
