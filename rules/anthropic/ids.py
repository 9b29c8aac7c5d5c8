"""One walk that renames ``tool_use`` ids and carries each new id to the results that answer it.

Shared by ``messages-tool-use-id-charset`` and ``messages-duplicate-tool-use-ids``: a rule says
what a call's id becomes (``choose``); the walk renames the ``tool_use`` block and every
``tool_result`` that answers it. In the user message right after an assistant turn, the k-th
result carrying id X answers the k-th call of that turn that had id X (so two calls that shared
an id keep one result each); a result anywhere else follows the latest call that had its id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.anthropic.blocks import content_list, role
from rules.engine.base import Change, Outcome
from rules.engine.pairing import Minter

#: ``choose(original_id, ids_kept_so_far)`` -> the id the call leaves with.
Choose = Callable[[str, set[str]], str]

__all__ = ["Choose", "Minter", "all_ids", "remap"]


def all_ids(messages: list[Any]) -> set[str]:
    """Every string ``tool_use`` id and ``tool_use_id`` in the request."""
    ids: set[str] = set()
    for message in messages:
        for block in content_list(message) or ():
            if type(block) is dict:
                kind = block.get("type")
                value = block.get("id") if kind == "tool_use" else block.get("tool_use_id")
                if kind in ("tool_use", "tool_result") and type(value) is str:
                    ids.add(value)
    return ids


def remap(messages: list[Any], choose: Choose, rule: str) -> Outcome:
    """Rename the calls ``choose`` renames, and their results; ``messages`` itself if none."""
    kept: set[str] = set()
    latest: dict[str, str] = {}  # original id -> what its latest call became
    slots: dict[str, list[str]] | None = None  # the previous assistant turn's calls
    answered: dict[str, int] = {}
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, message in enumerate(messages):
        speaker = role(message)
        blocks = content_list(message)
        turn_slots = slots
        slots = None
        if blocks is None or speaker not in ("user", "assistant"):
            if speaker == "assistant":
                slots, answered = {}, {}
            continue
        new_blocks: list[Any] | None = None
        if speaker == "assistant":
            slots, answered = {}, {}
        for position, block in enumerate(blocks):
            if type(block) is not dict:
                continue
            kind = block.get("type")
            if speaker == "assistant" and kind == "tool_use" and type(block.get("id")) is str:
                old: str = block["id"]
                new = choose(old, kept)
                kept.add(new)
                latest[old] = new
                slots.setdefault(old, []).append(new)  # type: ignore[union-attr]
                key = "id"
            elif (
                speaker == "user"
                and kind == "tool_result"
                and type(block.get("tool_use_id")) is str
            ):
                old = block["tool_use_id"]
                finals = turn_slots.get(old) if turn_slots is not None else None
                if finals is not None:
                    nth = answered.get(old, 0)
                    answered[old] = nth + 1
                    new = finals[nth] if nth < len(finals) else old
                else:
                    new = latest.get(old, old)
                key = "tool_use_id"
            else:
                continue
            if new == old:
                continue
            if new_blocks is None:
                new_blocks = list(blocks)
            new_blocks[position] = {**block, key: new}
            action = "renamed_id" if key == "id" else "renamed_result_id"
            changes.append(
                Change(rule, index, action, {"from": old, "to": new, "position": position})
            )
        if new_blocks is not None:
            if out is None:
                out = list(messages)
            out[index] = {**message, "content": new_blocks}
    if out is None:
        return Outcome(messages)
    return Outcome(out, tuple(changes))
