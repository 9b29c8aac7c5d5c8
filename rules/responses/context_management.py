"""responses-context-management: ``context_management`` reaches only routes that understand it.

What: request level. The ``context_management`` field (OpenAI's server-side compaction switch) is
removed unless the upstream is a direct OpenAI route (option ``direct_openai``, which the planner
fills from ``upstream.url``: true when its host is ``api.openai.com``; an operator may set it for
a relay that forwards to OpenAI unchanged) and the model matches an eligible family (option
``models``, shell-style globs, case-insensitive; default ``gpt-5.6*``).
Why: elsewhere the field is answered with a 400 ("context_management: Extra inputs are not
permitted", Anthropic native and Copilot, docs/providers.md#anthropic-request,
ericc-ch/copilot-api#217), a 500 or a stalled stream; LiteLLM strips it for Azure
(BerriAI/litellm#36391, docs/providers.md#question-16).
Safety: safe: the upstream could not honour the field; the request is served without
server-side compaction (logged with the reason).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.wake import fields
from rules.vocabulary import COMPACTION_MODELS

NAME = "responses-context-management"

FIELD = "context_management"
ELIGIBLE_MODELS = COMPACTION_MODELS


#: The rule's options (the record below lists them; read them through these).
DIRECT_OPENAI = Option(
    "direct_openai",
    False,
    "The upstream is a direct OpenAI route; filled from upstream.url (host "
    "api.openai.com) unless set here.",
)
MODELS = Option(
    "models",
    list(ELIGIBLE_MODELS),
    "Model-name patterns (globs) eligible for server-side compaction.",
)


def eligible(model: Any, direct_openai: Any, models: Any) -> str | None:
    """``None`` if a request for ``model`` may keep the field, else why not."""
    if direct_openai is not True:
        return "not_direct_openai"
    patterns = models if isinstance(models, list | tuple) else []
    if isinstance(model, str) and any(
        isinstance(p, str) and fnmatchcase(model.lower(), p.lower()) for p in patterns
    ):
        return None
    return "model_not_eligible"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    if FIELD not in request:
        return Outcome(items)
    options = ctx.options
    reason = eligible(
        request.get("model"),
        DIRECT_OPENAI.of(options),
        MODELS.of(options),
    )
    if reason is None:
        return Outcome(items)
    fields = {key: value for key, value in request.items() if key != FIELD}
    change = Change(NAME, -1, "dropped_fields", {"fields": [FIELD], "reason": reason})
    return Outcome(items, (change,), request=fields)


RULE = Rule(
    name=NAME,
    summary="Drop `context_management` unless the route is direct OpenAI and the model eligible.",
    defect="request level: `context_management` on a route that does not understand it: "
    '"context_management: Extra inputs are not permitted" (ericc-ch/copilot-api#217), a 500 or a '
    "stalled stream; LiteLLM strips it for Azure (BerriAI/litellm#36391; "
    "docs/providers.md#anthropic-request)",
    repair="drop it unless option `direct_openai` is true (filled from the configuration: the "
    "route's `upstream.url` host is api.openai.com) and the model matches option `models`. The "
    "upstream could not honour the field; the request is served without server-side compaction",
    safety="unsafe",
    default=True,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no item
    options=(
        DIRECT_OPENAI,
        MODELS,
    ),
    reads_request=True,
    woken_by=fields(FIELD),
)
