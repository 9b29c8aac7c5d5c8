"""responses-blank-call-ids: a function call whose ``call_id`` is empty or blank gets one, and
its output with it.

What: a ``function_call`` whose ``call_id`` is a string with nothing visible in it (``""``,
``" "``) gets ``call_<index>`` (``_d<n>`` added if that is taken), and each
``function_call_output`` that answers it (its ``call_id`` is the same string: the k-th output
naming it answers the k-th call naming it, ``rules.engine.pairing``) gets the same one. An output
naming a blank id no call names keeps it. The change names the new id and the outputs renamed.
Why: an empty id is an id: a client converting from chat completions writes ``call_id: ""`` on
a call and its output alike when the other side had none (farion1231/cc-switch#7374: empty ids
from the Responses-to-chat bridge; DeepSeek refuses them, #7156), and
``responses-orphan-outputs`` took the output for one answering no call and dropped it, leaving
the call unanswered (docs/providers.md#openai-responses).
Safety: safe: the call and its output keep each other, under an id both carry.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.blank_ids import blank_renames, is_blank, string_ids
from rules.responses.items import is_call, is_output

NAME = "responses-blank-call-ids"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    events = [
        (is_call(item), item.get("call_id"), f"call_{index}", index)
        for index, item in enumerate(items)
        if (is_call(item) or is_output(item)) and "call_id" in item
    ]
    if not any(call and is_blank(key) for call, key, _, _ in events):
        return Outcome(items)
    taken = string_ids(key for _, key, _, _ in events)
    fresh = blank_renames(((c, k, b) for c, k, b, _ in events), taken)
    out = list(items)
    outputs: dict[str, list[int]] = {}
    for number, new in fresh.items():
        call, _, _, index = events[number]
        out[index] = {**items[index], "call_id": new}
        if not call:
            outputs.setdefault(new, []).append(index)
    changes = [
        Change(NAME, events[n][3], "renamed_blank_id", {"to": new, "outputs": outputs.get(new, [])})
        for n, new in fresh.items()
        if events[n][0]
    ]
    return Outcome(out, tuple(changes))


def resume(items: list[Any], ctx: RuleContext, clean: bool | None) -> tuple[Outcome, bool] | None:
    """The rule over ``items`` after others, ``clean`` if no call of theirs had a blank
    call_id (``None``: the list's start); and the same after them. ``None`` when one has: the
    name it gets and the outputs that follow it read the whole list (``Horizon``,
    rules/engine/resume.py)."""
    if clean is None:
        outcome = apply(items, ctx)
        return outcome, not any(map(_blank_call, items))
    if not clean or any(map(_blank_call, items)):
        return None
    return Outcome(items), True


def _blank_call(item: Any) -> bool:
    return is_call(item) and "call_id" in item and is_blank(item["call_id"])


RULE = Rule(
    name=NAME,
    summary="Give a function call with an empty or blank call_id one, and its output the same.",
    defect='a `function_call` and its output that name the same empty `call_id` (`""`): refused, '
    "and the output dropped as an orphan by the pairing rules (farion1231/cc-switch#7374; "
    "docs/providers.md#openai-responses)",
    repair="the call gets `call_<index>`, each output that answers it (the k-th naming the same "
    "string answers the k-th call naming it) the same id. Nothing is dropped",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # nothing to do while no call_id is blank
)
