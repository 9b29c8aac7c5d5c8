"""thinking-sampling: a thinking model gets the sampling values it accepts.

What: in thinking mode (``rules.engine.thinking``: an explicit switch, else a model matching
option ``models``), each sampling parameter named in option ``fixed`` that the request sets to
another value is set to the one the model accepts (``{"temperature": 1.0}`` under ``kimi``).
A parameter the request does not set is not added; a non-number is left alone.
Why: Kimi's thinking models (K2.5/K2.6 unless thinking is disabled, K2-thinking, K3, which
always thinks) answer "invalid temperature: only 1 is allowed for this model"
(docs/providers.md#kimi-request, lsdefine/GenericAgent#30, countbot-ai/CountBot#61,
Narcooo/inkos#174; K3: ExplosiveCoderflome/AI-Novel-Writing-Assistant#155,
RakuenSoftware/aimee#2200).
Safety: unsafe, more than a history repair: sampling changes what the model writes, not only how
the history reads. The provider would refuse any other value, so the request the client meant
cannot run as sent; the log names each parameter with its old and new value (numbers, never
text), and the rule is on only where the refusal is on record.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import with_fields
from rules.engine.thinking import THINKING_MODELS, thinking_enabled
from rules.engine.wake import FieldsOf

NAME = "thinking-sampling"

FIXED = Option(
    "fixed",
    {"temperature": 1.0},
    "Sampling parameter -> the one value a model in thinking mode accepts.",
)
MODELS = Option(
    "models",
    list(THINKING_MODELS),
    "Model-name patterns that think unless the request switches thinking off.",
)


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    fixed = FIXED.of(ctx)
    if type(fixed) is not dict:
        return Outcome(messages)
    wrong = {
        key: value
        for key, value in fixed.items()
        if _number(value) and _number(request.get(key)) and request[key] != value
    }
    if not wrong or not thinking_enabled(request, MODELS.of(ctx)):
        return Outcome(messages)
    changes = tuple(
        Change(NAME, -1, "replaced_sampling", {"field": key, "was": request[key], "now": value})
        for key, value in wrong.items()
    )
    return Outcome(messages, changes, request=with_fields(request, wrong))


RULE = Rule(
    name=NAME,
    summary="In thinking mode, set a sampling parameter to the one value the model accepts.",
    defect="request level, in thinking mode: a `temperature` (or another parameter of option "
    '`fixed`) the thinking model refuses: Kimi "invalid temperature: only 1 is allowed for this '
    'model" (lsdefine/GenericAgent#30, countbot-ai/CountBot#61; docs/providers.md#kimi-request)',
    repair="the parameter takes the value option `fixed` gives (`temperature: 1.0` under `kimi`). "
    "Unsafe, more than a history repair: it changes how the model samples, not how the history "
    "reads; the log names each parameter with its old and new value",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(FIXED, MODELS),
    reads_request=True,
    woken_by=FieldsOf(FIXED.name),
)
