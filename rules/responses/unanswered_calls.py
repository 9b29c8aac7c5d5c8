"""responses-unanswered-calls: every ``function_call`` has an output after it.

What: a ``function_call`` (with a usable ``call_id``) that no later ``function_call_output``
answers gets a stub output right after it: ``{"type": "function_call_output", "call_id": ...,
"output": <option output>}``. Outputs are counted per call, in order, as the orphan rule pairs
them.
Why: OpenAI Responses answers "No tool output found for function call call_XXX." (param input;
docs/providers.md#openai-responses, tjardoo/openai-client#124); the repair column: "Add a synthetic
function_call_output ("[no result]")".
Safety: safe: the stub says no result was recorded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.responses.items import OUTPUT, call_id, pair_calls

NAME = "responses-unanswered-calls"

DEFAULT_OUTPUT = "[chatmend] No result was recorded for this tool call."


#: The rule's options (the record below lists them; read them through these).
OUTPUT_OPTION = Option(
    "output",
    DEFAULT_OUTPUT,
    "The stub's output: fixed text, so the same request always gives the same bytes.",
)


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    _, left = pair_calls(items)
    if not left:
        return Outcome(items)
    unanswered = set(left)
    text = OUTPUT_OPTION.of(ctx)
    out: list[Any] = []
    changes: list[Change] = []
    for index, item in enumerate(items):
        out.append(item)
        if index in unanswered:
            cid = call_id(item)
            out.append({"type": OUTPUT, "call_id": cid, "output": text})
            changes.append(
                Change(NAME, index, "inserted_item", {"call_id": cid, "at": len(out) - 1})
            )
    return Outcome(out, tuple(changes))


def resume(items: list[Any], ctx: RuleContext, before: int | None) -> tuple[Outcome, int] | None:
    """The rule over ``items`` after others, ``before`` their count when each of their calls was
    answered among them (``-1`` otherwise, ``None`` at the list's start); and the same after
    them. Outputs answer earlier calls only: once every call before is answered, nothing here
    answers one of them. ``None`` after a call left unanswered (an output here may answer it:
    ``Horizon``, rules/engine/resume.py)."""
    if before is None:
        outcome = apply(items, ctx)
        return outcome, len(items) if not outcome.changes else -1
    if before < 0:
        return None
    outcome = apply(items, ctx)
    if not outcome.changes:
        return outcome, before + len(items)
    changes = tuple(  # where the output went, in the whole list
        replace(c, detail={**c.detail, "at": before + c.detail["at"]}) for c in outcome.changes
    )
    return Outcome(outcome.messages, changes), -1


RULE = Rule(
    name=NAME,
    summary="Add a stub function_call_output right after each call no output answers.",
    defect='a `function_call` without output: "No tool output found for function call call_XXX." '
    "(tjardoo/openai-client#124; docs/providers.md#openai-responses)",
    repair="a stub `function_call_output` with option `output` right after the call. The stub says "
    "no result was recorded",
    safety="unsafe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # an output answers an earlier call
    options=(OUTPUT_OPTION,),
)
