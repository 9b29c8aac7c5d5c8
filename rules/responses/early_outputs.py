"""responses-early-outputs: an output placed before its call is moved right after the call.

What: by the pairing law (``rules.engine.pairing``: the k-th output naming call_id X answers the
k-th call naming X, wherever each stands), a ``function_call_output`` that answers a
``function_call`` standing after it is moved to right after that call. Everything else keeps its
place and order.
Why: OpenAI Responses reads ``input`` in order and pairs an output only with a call before it:
"No tool call found for function call output with call_id ..." (docs/providers.md#openai-responses,
continuedev/continue#10092); clients that rebuild a history from events (a result logged before
the call it answers, merged transcripts) send the pair the other way round. Dropping the output as
an orphan would stub the call and lose a real result.
Safety: safe: nothing is dropped or renamed; an output moves next to the call it answers.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext, carried
from rules.responses.items import (
    answer_map,
    move_after_calls,
    outputs_in_place,
    resume_in_place,
)

NAME = "responses-early-outputs"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    if outputs_in_place(items):  # the clean path: one walk
        return Outcome(items)
    early = {
        call: output
        for output, call in answer_map(items).items()
        if call is not None and call > output
    }
    if not early:
        return Outcome(items)
    return move_after_calls(items, early, NAME)


def resume(
    items: list[Any], ctx: RuleContext, before: dict[str, int] | bool | None
) -> tuple[Outcome, dict[str, int] | bool] | None:
    """The rule over ``items`` after others (``resume_in_place``): it changes nothing while
    every output is in place, and reads the whole list otherwise."""
    return resume_in_place(items, lambda given: apply(given, ctx), before)


RULE = Rule(
    name=NAME,
    summary="Move a function_call_output that stands before its function_call to right after it.",
    defect='an output before the call it answers: "No tool call found for function call output '
    'with call_id ..." (continuedev/continue#10092; docs/providers.md#openai-responses)',
    repair="move it right after its call (the k-th output naming X answers the k-th call naming "
    "X). Nothing is dropped or renamed",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # nothing to do while every output is in place
)
