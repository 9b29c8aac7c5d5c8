"""responses-unsupported-parameters: a request parameter the endpoint refuses by name is not
sent.

What: request level, as ``unsupported-parameters`` for chat: each top-level parameter named in
option ``drop`` is removed, each in option ``rename`` sent under its new name; ``model``, ``input``,
``previous_response_id`` and ``conversation`` are never touched (without them the request loses its
conversation). ``instructions`` is text the client wrote: named in ``drop``, it is not dropped but
moved into ``input`` as a leading ``system`` message, so the model still reads it (a string
``input`` becomes that message and a user message). Both options are empty by default: recovery
fills them from the refusal (rules/providers/named_repairs.py). Each change names the parameter and
its value (a number, a boolean, a short word; else its type and length). Why: xAI's Responses API
"Argument not supported: instructions and previous_response_id together" (10-X-eng/vibecad#4;
docs/providers.md#xai-request): OpenAI allows both, xAI refuses the pair on every chained turn.
Safety: unsafe: the request no longer asks for what the parameter asked (``instructions`` moved: the
text is kept, as a message of the conversation).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.named import drop_parameters, names, renames
from rules.engine.request import DROP, with_fields
from rules.engine.wake import FieldsNamed

NAME = "responses-unsupported-parameters"
#: What a Responses request's conversation is made of: never dropped.
PROTECTED = frozenset({"model", "input", "previous_response_id", "conversation"})
#: Text the client wrote, moved into ``input`` rather than dropped.
INSTRUCTIONS = "instructions"

DROP_OPTION: Option[list[str]] = Option("drop", [], "The top-level parameters removed (names).")
RENAME: Option[dict[str, str]] = Option(
    "rename", {}, "Parameters sent under another name: `{old: new}`."
)


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    drop = names(DROP_OPTION.of(ctx))
    moved: Outcome | None = None
    if INSTRUCTIONS in drop and isinstance(request.get(INSTRUCTIONS), str):
        drop = [name for name in drop if name != INSTRUCTIONS]
        moved = _move_instructions(items, request)
    base = moved.request if moved is not None and moved.request is not None else request
    messages = moved.messages if moved is not None else items
    rest = drop_parameters(
        messages,
        base,
        rule=NAME,
        drop=drop,
        rename=renames(RENAME.of(ctx)),
        protected=PROTECTED,
        log_content=ctx.log_content,
    )
    if moved is None:
        return rest
    fields = rest.request if rest.request is not None else dict(base)
    return Outcome(rest.messages, (*moved.changes, *rest.changes), request=fields)


def _move_instructions(items: list[Any], request: Any) -> Outcome:
    """The request without ``instructions``, its text the first message of ``input``."""
    text = request[INSTRUCTIONS]
    leading = {"role": "system", "content": text}
    current = request.get("input")
    if isinstance(current, str):
        new_items: list[Any] = [leading, {"role": "user", "content": current}]
    else:
        new_items = [leading, *items]
    detail = {"parameter": INSTRUCTIONS, "type": "string", "length": len(text), "to": "input[0]"}
    change = Change(NAME, 0, "moved_instructions", detail)
    fields = with_fields(request, {INSTRUCTIONS: DROP, "input": new_items})
    return Outcome(new_items, (change,), request=fields)


RULE = Rule(
    name=NAME,
    summary="Drop (or rename) the request parameters the endpoint refuses by name; "
    "`instructions` moves into `input`.",
    defect="request level: a parameter the endpoint does not implement, or not with another: "
    'xAI "Argument not supported: instructions and previous_response_id together" '
    "(10-X-eng/vibecad#4; docs/providers.md#xai-request)",
    repair="drop each parameter in option `drop` (`instructions` moves into `input` as a leading "
    "system message: its text stays), send each in option `rename` under its new name; recovery "
    "fills both from the refusal. Each change names the parameter and its value",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no item
    options=(DROP_OPTION, RENAME),
    reads_request=True,
    woken_by=FieldsNamed(("drop", "rename")),
)
