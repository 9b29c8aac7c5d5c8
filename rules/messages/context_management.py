"""messages-context-management: ``context_management`` only with its beta header.

What: request level. A request with a top-level ``context_management`` field (Anthropic's
context editing: clearing old tool results or thinking) and no ``anthropic-beta`` value that
starts with ``context-management-`` (``context-management-2025-06-27``) gets the field removed.
The header's values come from the proxy (``RuleContext.given.betas``); a request that sent the
beta keeps the field, byte for byte. Messages are never touched.
Why: without the beta, Anthropic answers 400 "context_management: Extra inputs are not
permitted" (ericc-ch/copilot-api#217, lifemate-ai/familiar-ai#45;
docs/providers.md#anthropic-request, "Request fields", and "Strip `context_management` unless
the beta header is present"): a client or relay that sets the field but drops or never sends
the header is refused on every request.
Safety: unsafe: the request runs without context editing, so a long tool loop keeps its old tool
results in context (as it would have without the field); logged with the number of edits.
"""

from __future__ import annotations

from typing import Any, Final

from rules import vocabulary
from rules.engine.base import Change, Outcome, Rule, RuleContext, fields_only
from rules.engine.wake import fields

NAME = "messages-context-management"
#: The field, and the prefix of the ``anthropic-beta`` values that allow it.
FIELD: Final = "context_management"
BETA_PREFIX: Final = vocabulary.CONTEXT_MANAGEMENT_BETA_PREFIX


def allowed(betas: frozenset[str]) -> bool:
    """The request's ``anthropic-beta`` values allow ``context_management``."""
    return any(beta.startswith(BETA_PREFIX) for beta in betas)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    if FIELD not in request or allowed(ctx.given.betas):
        return Outcome(messages)
    value = request[FIELD]
    edits = value.get("edits") if type(value) is dict else None
    fields = {key: item for key, item in request.items() if key != FIELD}
    detail = {"field": FIELD, "edits": len(edits) if type(edits) is list else 0}
    return Outcome(messages, (Change(NAME, -1, "dropped_field", detail),), request=fields)


RULE = Rule(
    name=NAME,
    summary="Remove `context_management` from a request without its `anthropic-beta` header.",
    defect="`context_management` without a `context-management-*` value in `anthropic-beta`: "
    'Anthropic "context_management: Extra inputs are not permitted"',
    repair="remove the field (this request runs without context editing); with the beta it is kept",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    reads_request=True,
    woken_by=fields(FIELD),
    reads_facts=True,
)
