"""responses-reasoning-order: an assistant message item follows the reasoning item of its turn.

What: a response that reasoned gives its items in one order (reasoning, then its message, then
its calls), and OpenAI checks that order when they come back. An assistant ``message`` item with
an ``id`` that stands between a ``function_call`` and that call's output (so it came from the
response that made the call) goes back right after the ``reasoning`` item that opened that
response's items (the last one before the call, with only calls and messages between them);
several such messages keep their order. With option ``items`` (``{"msg_…": "rs_…"}``, which
recovery fills from the refusal that names both) the item named goes right after the reasoning
item named, wherever it stood. Nothing is dropped.
Why: OpenAI's Responses API "Item 'msg_68a1f0c3d2e4b5a6' was provided without its required
'reasoning' item: 'rs_68a1f0b9e7c2d3f4'." when a client replays a turn as reasoning, call,
message (continuedev/continue#11994; docs/providers.md#openai-responses).
Safety: safe: a move; every item is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.named import renames
from rules.responses.items import is_call, is_message, is_output

NAME = "responses-reasoning-order"

ITEMS: Option[dict[str, str]] = Option(
    "items",
    {},
    "Item ids moved right after a reasoning item: `{item_id: reasoning_id}`.",
)


def _reasoning(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "reasoning"


def _assistant_with_id(item: Any) -> bool:
    return (
        is_message(item)
        and item.get("role") == "assistant"
        and isinstance(item.get("id"), str)
        and bool(item["id"])
    )


def _displaced(items: list[Any]) -> dict[int, int]:
    """Message index -> the reasoning index it belongs right after: a message with an id
    between a call and that call's output, in a run of calls and messages opened by a
    reasoning item."""
    return _walk(items, None, set())[0]


def _walk(
    items: list[Any], opened: int | None, waiting: set[Any]
) -> tuple[dict[int, int], int | None, set[Any]]:
    """``_displaced`` going on from ``opened`` (the reasoning item opening the current
    response's items, ``-1``: one before these) and ``waiting`` (its own copy, written); the
    same after ``items``."""
    moves: dict[int, int] = {}
    for index, item in enumerate(items):
        if _reasoning(item):
            opened, waiting = index, set()
        elif is_call(item):
            waiting.add(item.get("call_id"))
        elif is_output(item):
            waiting.discard(item.get("call_id"))
            if not waiting:
                opened = None
        elif _assistant_with_id(item):
            if opened is not None and waiting:
                moves[index] = opened
        else:
            opened, waiting = None, set()
    return moves, opened, waiting


def _named(items: list[Any], wanted: dict[str, str]) -> dict[int, int]:
    """Message index -> reasoning index, for the pairs option ``items`` names."""
    at = {
        item["id"]: index
        for index, item in enumerate(items)
        if isinstance(item, dict) and isinstance(item.get("id"), str)
    }
    moves: dict[int, int] = {}
    for item_id, reasoning_id in wanted.items():
        item, reasoning = at.get(item_id), at.get(reasoning_id)
        placed = item is not None and reasoning is not None and item == reasoning + 1
        if (
            item is not None
            and reasoning is not None
            and _reasoning(items[reasoning])
            and not placed
        ):
            moves[item] = reasoning
    return moves


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    wanted = renames(ITEMS.of(ctx))
    moves = _named(items, wanted) if wanted else _displaced(items)
    if not moves:
        return Outcome(items)
    following: dict[int, list[int]] = {}
    for index, reasoning in sorted(moves.items()):
        following.setdefault(reasoning, []).append(index)
    out: list[Any] = []
    for index, item in enumerate(items):
        if index in moves:
            continue
        out.append(item)
        out.extend(items[moved] for moved in following.get(index, ()))
    changes = tuple(
        Change(NAME, index, "moved_item", {"id": items[index]["id"], "after": reasoning})
        for index, reasoning in sorted(moves.items())
    )
    return Outcome(out, changes)


def resume(
    items: list[Any], ctx: RuleContext, before: tuple[bool, frozenset[Any]] | bool | None
) -> tuple[Outcome, tuple[bool, frozenset[Any]] | bool] | None:
    """The rule over ``items`` after others (the option ``items`` unset: ``Horizon.holds``),
    ``before`` holding whether a reasoning item before opened the current response and the
    call_ids it waits for, when nothing before moved (``False`` otherwise, ``None`` at the
    list's start); and the same after them. ``None`` when a message moves, here or before
    (``Horizon``, rules/engine/resume.py)."""
    if before is None:
        outcome = apply(items, ctx)
        if outcome.changes:
            return outcome, False
        _, opened, waiting = _walk(items, None, set())
        return outcome, (opened is not None, frozenset(waiting))
    if before is False or before is True:
        return None
    moves, opened, waiting = _walk(items, -1 if before[0] else None, set(before[1]))
    if moves:
        return None
    return Outcome(items), (opened is not None, frozenset(waiting))


def _unnamed(options: Mapping[str, Any]) -> bool:
    """The moves are found by the walk (no ids named): the horizon holds."""
    return not options.get(ITEMS.name)


RULE = Rule(
    name=NAME,
    summary="Put an assistant message item back right after its turn's reasoning item.",
    defect="a message item replayed after a call instead of right after its reasoning item: "
    "\"Item 'msg_…' was provided without its required 'reasoning' item: 'rs_…'.\" "
    "(continuedev/continue#11994; docs/providers.md#openai-responses)",
    repair="move a message item with an id that stands between a call and its output right after "
    "the reasoning item that opened that response's items (or, with option `items`, the item "
    "named right after the reasoning item named). Every item is kept",
    safety="safe",
    default=False,
    apply=apply,
    horizon=carried(resume, holds=_unnamed),  # a move reads back to its reasoning item
    options=(ITEMS,),
)
