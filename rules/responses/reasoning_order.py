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

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext
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
    moves: dict[int, int] = {}
    opened: int | None = None  # the reasoning item opening the current response's items
    waiting: set[Any] = set()  # call_ids of calls seen since, whose output has not come
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
    return moves


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
    options=(ITEMS,),
)
