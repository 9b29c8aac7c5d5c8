"""responses-unpersisted-items: with ``store: false``, no item that only refers to a stored one.

What: with ``store: false`` (nothing of the earlier turns was kept by the server), an
``item_reference``, and a ``reasoning`` item that has an ``id`` but no ``encrypted_content``
(only a pointer to a stored item), are left out of ``input``: the server could not find what
they point to. A reasoning item whose summary holds text loses that text with it (``lossy``);
one with an empty summary carries nothing (``safe``). With ``encrypted_content`` a reasoning
item is the item itself and stays. Nothing happens with ``store`` true or absent.
Why: OpenAI's Responses API "Item with id 'rs_…' not found. Items are not persisted when
`store` is set to false. Try again with `store` set to true, or remove this item from your
input." for a client that replays reasoning items by id without their encrypted content
(anomalyco/opencode#4445; docs/providers.md#openai-responses).
Safety: by action: a reference with nothing in it is ``safe`` to leave out; a summary's text left
out with its item is ``lossy``.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at
from rules.engine.wake import fields
from rules.responses.items import item_type

NAME = "responses-unpersisted-items"


def _summary_chars(item: dict[str, Any]) -> int:
    summary = item.get("summary")
    parts = summary if isinstance(summary, list) else []
    return sum(
        len(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _reference(item: Any) -> bool:
    kind = item_type(item)
    if kind == "item_reference":
        return True
    return (
        kind == "reasoning"
        and isinstance(item.get("id"), str)
        and bool(item["id"])
        and not item.get("encrypted_content")
    )


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    if ctx.request.get("store") is not False:
        return Outcome(items)
    found = [index for index, item in enumerate(items) if _reference(item)]
    if not found:
        return Outcome(items)
    changes = []
    for index in found:
        chars = _summary_chars(items[index])
        action = "dropped_summary" if chars else "dropped_reference"
        detail = {"type": item_type(items[index]), "summary_length": chars}
        changes.append(Change(NAME, index, action, detail))
    return Outcome(rewrite_at(items, found, lambda _i, _item: None), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="With `store: false`, leave out items that only point to a stored item.",
    defect="with `store: false`, a reasoning item replayed by id without its encrypted content: "
    "\"Item with id 'rs_…' not found. Items are not persisted when `store` is set to false.\" "
    "(anomalyco/opencode#4445; docs/providers.md#openai-responses)",
    repair="leave the reference out (an `item_reference`, a reasoning item with an id and no "
    "`encrypted_content`); one with summary text loses that text (lossy)",
    safety={"dropped_reference": "safe", "dropped_summary": "lossy"},
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each item is decided by itself
    reads_request=True,
    woken_by=fields("store"),
)
