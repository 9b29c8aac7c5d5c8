"""responses-request-values: a request value the endpoint refuses, replaced by the one it takes
nearest in meaning.

What: request level. For each dotted field of option ``replace`` (``{"thinking.type": {"enabled":
"adaptive"}}``) that holds one of the values it maps, the value mapped is sent instead, for a model
matching option ``models`` (globs, case-insensitive; ``["*"]`` by default). Empty by default:
recovery fills it from a refusal that names the field, the value and the values allowed
(rules/providers/named_repairs.py picks the nearest in meaning: a thinking switch stays on), and a
profile sets it where the refusal is on record. Each change names the field and both values (words
only). Why: one field, two spellings across a provider's models: MiniMax-M3 "invalid params, invalid
thinking.type: "enabled" (allowed: adaptive, disabled) (2013)" where M1/M2 take ``enabled``
(CherryHQ/cherry-studio#16247; docs/providers.md#minimax-request). Safety: unsafe: the request asks
for something else (``adaptive`` lets the model decide when to think); the refusal said the value
could not be honoured as sent.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.named import replace_values
from rules.engine.thinking import model_matches
from rules.engine.wake import FieldsNamed

NAME = "responses-request-values"

REPLACE: Option[dict[str, Any]] = Option(
    "replace",
    {},
    "Dotted request fields and, for each, the refused value -> the value sent instead.",
)
MODELS: Option[list[str]] = Option(
    "models", ["*"], "Model-name patterns (globs) the replacement applies to."
)


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    if not model_matches(ctx.request.get("model"), MODELS.of(ctx)):
        return Outcome(items)
    return replace_values(items, ctx.request, rule=NAME, replace=REPLACE.of(ctx))


RULE = Rule(
    name=NAME,
    summary="Replace a request value the endpoint refuses by the allowed one nearest in meaning.",
    defect='request level: a value one model of a provider refuses: MiniMax-M3 "invalid '
    'thinking.type: "enabled" (allowed: adaptive, disabled) (2013)" '
    "(CherryHQ/cherry-studio#16247; docs/providers.md#minimax-request)",
    repair="for a model matching option `models`, send the value option `replace` maps the "
    "refused one to (a dotted field: `thinking.type`); recovery fills it from the refusal. The "
    "request asks for something else; each change names the field and both values",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no item
    options=(REPLACE, MODELS),
    reads_request=True,
    woken_by=FieldsNamed(("replace",)),
)
