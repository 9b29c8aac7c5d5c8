"""responses-displaced-messages: nothing said sits between a function call and its output.

What: a message item (a user, developer, system or assistant message) that stands between a
``function_call`` and that call's output is moved to right after the output; with parallel
calls, after the last output of the calls it interrupted. Calls, outputs and reasoning items stay
where they are, and moved messages keep their order.
Why: DeepSeek's Responses endpoint pairs a call with its output only when no message comes
between them: a developer message placed there gives "No tool call found for tool output with
call_id" (docs/providers.md#deepseek-responses, deepseek-ai/DeepSeek-V3#1588, #1611); the repair
column asks to "move any message items out from between a call and its output".
With option ``adjacency: strict`` (the DeepSeek profiles), every output is moved to right after
its call instead: whatever stood between them (a message, a ``reasoning`` item, another call of a
parallel batch or its output) keeps its order and now follows the output, so a parallel batch
``call A, call B, out A, out B`` becomes ``call A, out A, call B, out B`` and a reasoning item
emitted between two calls still comes right before the call it preceded.
Why (strict): DeepSeek's ``/v1/responses`` "rejects a request whose ``input`` array contains a
``function_call`` and its matching ``function_call_output`` that are not strictly adjacent. Any
item in between, an extra ``message`` (role ``developer``/``user``) or a ``reasoning`` item"
answers "No tool output found for tool call call_..." (docs/providers.md#deepseek-responses,
deepseek-ai/awesome-deepseek-integration#740).
Safety: safe: nothing is dropped; a message moves past the output of a call made before it, an
output moves next to its call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.responses.items import (
    answer_map,
    call_id,
    is_call,
    is_message,
    is_output,
    move_after_calls,
    pair_calls,
)

NAME = "responses-displaced-messages"

#: The rule's options (the record below lists them; read them through these).
ADJACENCY = Option(
    "adjacency",
    "messages",
    "`messages`: move message items out from between a call and its output (parallel calls keep "
    "their batch); `strict`: every output right after its call, whatever stood between "
    "(DeepSeek's /v1/responses).",
    choices=("messages", "strict"),
)


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    if not any(is_output(item) for item in items):
        return Outcome(items)
    if ADJACENCY.of(ctx) == "strict":
        return _strict(items)
    answered, _ = pair_calls(items)
    pending: dict[str, int] = {}  # call_id -> calls answered later, not yet
    held: list[tuple[int, Any]] = []
    out: list[Any] = []
    changes: list[Change] = []
    for index, item in enumerate(items):
        if is_call(item) and index in answered:
            cid = call_id(item)
            assert cid is not None
            pending[cid] = pending.get(cid, 0) + 1
        elif is_output(item) and pending.get(call_id(item) or "", 0) > 0:
            cid = call_id(item)
            assert cid is not None
            pending[cid] -= 1
            if not pending[cid]:
                del pending[cid]
            out.append(item)
            if not pending and held:
                for origin, message in held:
                    changes.append(
                        Change(NAME, origin, "moved_item", {"to": len(out), "after": cid})
                    )
                    out.append(message)
                held = []
            continue
        elif pending and is_message(item):
            held.append((index, item))
            continue
        out.append(item)
    if not changes:
        return Outcome(items)
    return Outcome(out, tuple(changes))


def _strict(items: list[Any]) -> Outcome:
    """Every output right after the call it answers (a call before it); the rest keeps its
    order."""
    if all(
        index > 0 and is_call(items[index - 1]) and call_id(items[index - 1]) == call_id(item)
        for index, item in enumerate(items)
        if is_output(item)
    ):
        return Outcome(items)  # the clean path: every output already follows its call
    after = _law_moves(items)
    if not after:
        return Outcome(items)
    return move_after_calls(items, after, NAME)


def resume(
    items: list[Any], ctx: RuleContext, before: tuple[Any, ...] | None
) -> tuple[Outcome, tuple[Any, ...]] | None:
    """The rule over ``items`` after others; ``before`` says what of those the rule reads on:
    under ``messages`` adjacency, their count when each of their calls was answered among them
    (outputs answer earlier calls only: nothing here is then held for a call before); under
    ``strict``, the last of them (an output here must follow its call), when every output
    followed its call. ``None`` otherwise (``Horizon``, rules/engine/resume.py)."""
    if ADJACENCY.of(ctx) == "strict":
        return _resume_strict(items, ctx, before)
    if before is None:
        outcome = apply(items, ctx)
        return outcome, (len(items) if not pair_calls(items)[1] else -1,)
    if before[0] < 0:
        return None
    outcome = apply(items, ctx)
    changes = tuple(  # where the message went, in the whole list
        replace(c, detail={**c.detail, "to": before[0] + c.detail["to"]}) for c in outcome.changes
    )
    count = before[0] + len(items) if not pair_calls(items)[1] else -1
    return Outcome(outcome.messages, changes), (count,)


def _resume_strict(
    items: list[Any], ctx: RuleContext, before: tuple[Any, ...] | None
) -> tuple[Outcome, tuple[Any, ...]] | None:
    """``resume`` under ``strict`` adjacency. The items before are closed (as many outputs as
    calls name each call_id: by the pairing law the ones here then pair among themselves), and
    the state is ``(count, last, in_place, moved)``: how many they were, the last of them, whether
    every output followed a call of its call_id (the clean path), whether the law moved any;
    ``()`` when they were not closed. ``None`` when the clean path breaks here after one that
    held over items the law would have moved (the whole run moves them)."""
    if before is None:
        outcome = apply(items, ctx)
        moved = bool(_law_moves(items))
        state = (len(items), items[-1] if items else None, _follow(items, None), moved)
        return outcome, state if _closed(items) else ()
    if not before:
        return None
    count, last, in_place, moved = before
    here = _follow(items, last if count else None)
    after = _law_moves(items)
    if in_place and not here and moved:
        return None
    if (in_place and here) or not after:
        outcome = Outcome(items)
    else:
        made = move_after_calls(items, after, NAME)
        changes = tuple(
            replace(
                c,
                detail={
                    **c.detail,
                    "to": count + c.detail["to"],
                    "after": count + c.detail["after"],
                },
            )
            for c in made.changes
        )
        outcome = Outcome(made.messages, changes)
    if not _closed(items):
        return outcome, ()
    state = (
        count + len(items),
        items[-1] if items else last,
        in_place and here,
        moved or bool(after),
    )
    return outcome, state


def _law_moves(items: list[Any]) -> dict[int, int]:
    """Call index -> the output that answers it, by the pairing law, where that output is not
    right after it (and after it)."""
    return {
        call: output
        for output, call in answer_map(items).items()
        if call is not None and output > call + 1
    }


def _closed(items: list[Any]) -> bool:
    """As many outputs as calls name each call_id."""
    balance: dict[str, int] = {}
    for item in items:
        cid = call_id(item)
        if cid is not None:
            balance[cid] = balance.get(cid, 0) + (1 if is_call(item) else -1)
    return not any(balance.values())


def _follow(items: list[Any], last: Any) -> bool:
    """Every output of ``items`` follows a call of its call_id (``last``: the item before them,
    ``None`` at the list's start)."""
    previous = last
    for index, item in enumerate(items):
        if is_output(item) and not (
            (index > 0 or last is not None)
            and is_call(previous)
            and call_id(previous) == call_id(item)
        ):
            return False
        previous = item
    return True


RULE = Rule(
    name=NAME,
    summary="Move message items standing between a function call and its output after it.",
    defect='a message item between a call and its output: DeepSeek "No tool call found for tool '
    'output with call_id" (deepseek-ai/DeepSeek-V3#1588, #1611; '
    "docs/providers.md#deepseek-responses)",
    repair="move it right after the output (after the last output of the parallel calls it "
    "interrupted), order kept; with option `adjacency: strict` (DeepSeek, any item between, a "
    "reasoning item too: deepseek-ai/awesome-deepseek-integration#740) each output moves right "
    "after its call instead. Nothing is dropped: a message moves past the output of a call made "
    "before it",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # an output answers an earlier call
    options=(ADJACENCY,),
)
