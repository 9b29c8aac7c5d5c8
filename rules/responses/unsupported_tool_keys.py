"""responses-unsupported-tool-keys: a tool definition key the endpoint refuses by name is not sent.

What: request level. Each key named in option ``keys`` is removed from every ``tools[]`` entry. A
tool's ``type``, ``name``, ``description`` and ``parameters`` are never removed. Empty by default:
recovery fills it from the refusal that names the key (rules/providers/named_repairs.py). The change
names the keys and the tools' positions, never their values. Why: routers pass a tool schema's extra
keys to providers that refuse them: Cohere via OpenRouter "unknown field: parameter 'strict' is not
a valid field" (OpenRouterTeam/openrouter-examples#71; docs/providers.md#request). Safety: unsafe:
the request no longer asks what the key asked (``strict``: schema adherence); the tool and its
schema stay.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.named import names, without_tool_keys
from rules.engine.wake import fields

NAME = "responses-unsupported-tool-keys"

KEYS: Option[list[str]] = Option("keys", [], "Tool definition keys removed (names).")


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    return without_tool_keys(items, ctx.request, rule=NAME, keys=names(KEYS.of(ctx)))


RULE = Rule(
    name=NAME,
    summary="Drop the tool definition keys the endpoint refuses by name.",
    defect='request level: a tool key the endpoint does not take: "unknown field: parameter '
    "'strict' is not a valid field\" (OpenRouterTeam/openrouter-examples#71; "
    "docs/providers.md#request)",
    repair="remove each key in option `keys` from every tool; never what makes the tool. "
    "Recovery fills it from the refusal",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no item
    options=(KEYS,),
    reads_request=True,
    woken_by=fields("tools"),
)
