"""responses-duplicate-items: no item ``id`` twice in ``input``, and no item lost for it.

What: an item whose ``id`` an earlier item already carries keeps its place and its content and
loses the duplicated ``id`` field (the first keeps it): a function call, its output, an assistant
message and a reasoning item alike, so a second call named ``fc_1`` still reaches the model and
still gets its output. Only an exact copy of the earlier item (every field equal) is dropped,
the same item sent twice, and nothing it says is lost: a message or reasoning item always; a
call only while the calls naming its ``call_id`` outnumber the outputs naming it, an output only
while those outputs outnumber the calls (an exact replayed duplicate, with no output or call
left unpaired by its removal). Otherwise the copy is kept without its ``id`` and paired like any
call (``responses-call-ids``), so no output loses the call it answers.
Why: OpenAI Responses (also OpenRouter and Copilot) answer "Duplicate item found with id
rs_0468... Remove duplicate items from your input and try again."
(docs/providers.md#openai-responses, continuedev/continue#10723, #10200 after a provider switch,
OpenRouterTeam/ai-sdk-provider#254). The ``id`` of an input item is optional: an item without one
is accepted, so removing the duplicated field is enough (dropping the item lost a call
and its output).
Safety: safe: the only item dropped is an exact copy of an earlier one; every other item keeps its
content, and loses an identifier the provider does not need.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.responses.items import call_id, is_call, is_output, item_id, item_type

NAME = "responses-duplicate-items"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    first: dict[str, int] = {}
    repeats: list[int] = []
    for index, item in enumerate(items):
        key = item_id(item)
        if key is None:
            continue
        if key in first:
            repeats.append(index)
        else:
            first[key] = index
    if not repeats:
        return Outcome(items)
    # Calls and outputs per call_id: an exact copy of a call is a replay only while the calls
    # naming its call_id outnumber their outputs (dropping it leaves no output without a call),
    # and of an output only while the outputs outnumber the calls (a surplus answer).
    calls: dict[str, int] = {}
    outputs: dict[str, int] = {}
    for item in items:
        cid = call_id(item)
        if cid is not None:
            counts = calls if is_call(item) else outputs
            counts[cid] = counts.get(cid, 0) + 1
    out: list[Any] = list(items)
    changes: list[Change] = []
    dropped: set[int] = set()
    for index in repeats:
        item = items[index]
        key = item["id"]
        detail = {"id": key, "type": item_type(item), "first": first[key]}
        if item == items[first[key]] and _spare(item, calls, outputs):
            dropped.add(index)
            changes.append(Change(NAME, index, "dropped_item", detail))
        else:
            out[index] = {k: v for k, v in item.items() if k != "id"}
            changes.append(Change(NAME, index, "dropped_id", detail))
    if dropped:
        out = [item for index, item in enumerate(out) if index not in dropped]
    return Outcome(out, tuple(changes))


def _spare(item: Any, calls: dict[str, int], outputs: dict[str, int]) -> bool:
    """True if an exact copy ``item`` can go without leaving a call or an output unpaired (and
    count it gone): always for a message or reasoning item; for a call while its call_id has
    more calls than outputs; for an output while it has more outputs than calls."""
    cid = call_id(item)
    if cid is None:
        return not (is_call(item) or is_output(item))
    mine, theirs = (calls, outputs) if is_call(item) else (outputs, calls)
    if mine[cid] > theirs.get(cid, 0):
        mine[cid] -= 1
        return True
    return False


def resume(
    items: list[Any], ctx: RuleContext, before: frozenset[str] | bool | None
) -> tuple[Outcome, frozenset[str] | bool] | None:
    """The rule over ``items`` after others, ``before`` holding their item ids when none was
    repeated (``False`` when one was, ``None`` at the list's start); and the same after them.
    ``None`` when an id repeats one before or here, or was repeated before: which copy goes
    reads the whole list (``Horizon``, rules/engine/resume.py)."""
    if before is None:
        outcome = apply(items, ctx)
        ids = [key for item in items if (key := item_id(item)) is not None]
        seen = frozenset(ids)
        return outcome, seen if len(seen) == len(ids) else False
    if before is False or before is True:
        return None
    new: set[str] = set()
    for item in items:
        key = item_id(item)
        if key is not None and (key in before or key in new):
            return None
        if key is not None:
            new.add(key)
    return Outcome(items), before | new if new else before


RULE = Rule(
    name=NAME,
    summary="Remove a duplicated item `id` (the item stays); drop only exact copies.",
    defect='an item id twice in `input`: "Duplicate item found with id rs_0468... Remove '
    'duplicate items from your input and try again." (continuedev/continue#10723, '
    "OpenRouterTeam/ai-sdk-provider#254; docs/providers.md#openai-responses)",
    repair="the later item keeps its content and loses the duplicated `id` field (the first "
    "keeps it); an exact copy of the earlier item is dropped, a call or an output only when "
    "that leaves nothing unpaired (a replayed duplicate), so no call loses its output",
    safety={
        "dropped_id": "safe",
        "dropped_item": "lossy",
    },
    default=True,
    apply=apply,
    horizon=carried(resume),  # an id repeats one before or not
)
