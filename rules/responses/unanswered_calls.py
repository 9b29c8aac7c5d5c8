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

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext
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
    options=(OUTPUT_OPTION,),
)
