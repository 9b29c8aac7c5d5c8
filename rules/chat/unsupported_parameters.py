"""unsupported-parameters: a request parameter the endpoint refuses by name is not sent.

What: request level. Each top-level parameter named in option ``drop`` is removed, and each in
option ``rename`` is sent under its new name (``{"max_tokens": "max_completion_tokens"}``; not over
a parameter the request already has). ``model`` and ``messages`` are never touched. Both options are
empty by default: recovery fills them from the refusal that names the parameter
(rules/providers/named_repairs.py), and an operator may set them for an endpoint whose refusal is
known. Each change names the parameter and its value (a number, a boolean, a short word; else its
type and length, never text). Why: OpenAI-compatible endpoints refuse what they do not implement,
one parameter at a time: "Unrecognized request argument supplied: thinking" (nashsu/llm_wiki#336),
Azure's "Unrecognized request argument supplied: stream_options" (Pythagora-io/gpt-pilot#1022),
OpenAI's reasoning models "Unsupported parameter: 'max_tokens' is not supported with this model. Use
'max_completion_tokens' instead." (teilomillet/gollm#33; docs/providers.md#request). Safety: unsafe:
the request no longer asks for what the parameter asked; the refusal said the endpoint would not
honour it as sent.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.named import drop_parameters, names, renames
from rules.engine.wake import FieldsNamed

NAME = "unsupported-parameters"
#: What a chat request is made of: never dropped.
PROTECTED = frozenset({"model", "messages"})

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
    defect='request level: a parameter the endpoint does not implement: "Unrecognized request '
    "argument supplied: thinking\" (nashsu/llm_wiki#336), \"Unsupported parameter: 'max_tokens' is "
    "not supported with this model. Use 'max_completion_tokens' instead.\" (teilomillet/gollm#33; "
    "docs/providers.md#request)",
    repair="drop each parameter in option `drop`, send each in option `rename` under its new "
    "name; recovery fills both from the refusal. The request no longer asks what the parameter "
    "asked; each change names it and its value",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(DROP, RENAME),
    reads_request=True,
    woken_by=FieldsNamed(("drop", "rename")),
)
