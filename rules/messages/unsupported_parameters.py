"""messages-unsupported-parameters: a request parameter the endpoint refuses by name is not
sent.

What: request level, as ``unsupported-parameters`` for chat: each top-level parameter named in
option ``drop`` is removed, each in option ``rename`` sent under its new name. ``model``,
``messages``, ``max_tokens`` (required by the API) and ``system`` (text the client wrote, which a
Messages request has nowhere else to put) are never touched. Both options are empty by default:
recovery fills them from the refusal (rules/providers/named_repairs.py). Each change names the
parameter and its value (a number, a boolean, a short word; else its type and length). Why:
Anthropic-format endpoints other than Anthropic's refuse what they do not implement:
"context_management: Extra inputs are not permitted" (ericc-ch/copilot-api#217;
docs/providers.md#anthropic-request), one parameter at a time. Safety: unsafe: the request no longer
asks for what the parameter asked.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.named import drop_parameters, names, renames
from rules.engine.wake import FieldsNamed

NAME = "messages-unsupported-parameters"
PROTECTED = frozenset({"model", "messages", "max_tokens", "system"})

DROP: Option[list[str]] = Option("drop", [], "The top-level parameters removed (names).")
RENAME: Option[dict[str, str]] = Option(
    "rename", {}, "Parameters sent under another name: `{old: new}`."
)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return drop_parameters(
        messages,
        ctx.request,
        rule=NAME,
        drop=names(DROP.of(ctx)),
        rename=renames(RENAME.of(ctx)),
        protected=PROTECTED,
        log_content=ctx.log_content,
    )


RULE = Rule(
    name=NAME,
    summary="Drop (or rename) the request parameters the endpoint refuses by name.",
    defect='request level: a parameter the endpoint does not implement: "context_management: '
    'Extra inputs are not permitted" (ericc-ch/copilot-api#217; '
    "docs/providers.md#anthropic-request)",
    repair="drop each parameter in option `drop`, send each in option `rename` under its new "
    "name (never `system`, `max_tokens`, `messages` or `model`); recovery fills both from the "
    "refusal. Each change names the parameter and its value",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(DROP, RENAME),
    reads_request=True,
    woken_by=FieldsNamed(("drop", "rename")),
)
