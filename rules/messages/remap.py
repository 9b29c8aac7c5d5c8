"""One walk that renames ``tool_use`` ids and carries each new id to the results that answer it.

Shared by ``messages-tool-use-id-charset`` and ``messages-duplicate-tool-use-ids``: a rule says
what a call's id becomes (``choose``); the walk renames the ``tool_use`` block and every
``tool_result`` that answers it. In the user message right after an assistant turn, the k-th
result carrying id X answers the k-th call of that turn that had id X (so two calls that shared
an id keep one result each); the results left over (a later turn, before their call) answer the
calls left over by the pairing law, the k-th naming X the k-th naming X (``answer_places``); a
result that answers no call follows the latest call that had its id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.engine.base import Change, Outcome
from rules.engine.pairing import answers
from rules.messages.blocks import content_list, role

#: ``choose(original_id, ids_kept_so_far)`` -> the id the call leaves with.
Choose = Callable[[str, set[str]], str]

__all__ = ["Choose", "Place", "all_ids", "answer_places", "remap"]


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


#: Where a block stands: (message index, block position).
Place = tuple[int, int]


def answer_places(messages: list[Any]) -> dict[Place, Place]:
    """Which call each ``tool_result`` answers, as the Messages API is read: a result in the user
    message(s) right after an assistant turn answers that turn's calls first (the k-th naming X
    there answers the turn's k-th call naming X); the results left over, wherever they stand
    (a later turn, before their call), answer the calls left over by the pairing law
    (``rules.engine.pairing``: the k-th naming X answers the k-th naming X). Result place ->
    call place; a result given no call (an orphan, a second answer) is absent. Ids compare as
    sent (only non-empty string ids pair)."""
    found: dict[Place, Place] = {}
    places: list[Place] = []  # the leftovers, calls and results
    events: list[tuple[bool, str | None]] = []
    turn: dict[str, list[Place]] = {}  # the latest assistant's calls still unanswered
    for index, message in enumerate(messages):
        speaker = role(message)
        if speaker == "assistant":
            for name, calls in turn.items():  # the turn's own results are over
                places.extend(calls)
                events.extend((True, name) for _ in calls)
            turn = {}
            for position, block in enumerate(content_list(message) or ()):
                if type(block) is dict and block.get("type") == "tool_use":
                    value = block.get("id")
                    if type(value) is str and value:
                        turn.setdefault(value, []).append((index, position))
            continue
        if speaker != "user":
            continue
        for position, block in enumerate(content_list(message) or ()):
            if type(block) is not dict or block.get("type") != "tool_result":
                continue
            value = block.get("tool_use_id")
            key = value if type(value) is str and value else None
            waiting = turn.get(key) if key is not None else None
            if waiting:
                found[(index, position)] = waiting.pop(0)
            else:
                places.append((index, position))
                events.append((False, key))
    for name, calls in turn.items():
        places.extend(calls)
        events.extend((True, name) for _ in calls)
    for event, call in enumerate(answers(events)):
        if call is not None:
            found[places[event]] = places[call]
    return found


def _chosen(messages: list[Any], choose: Choose) -> dict[Place, str]:
    """Each assistant ``tool_use`` with a string id, by place: the id ``choose`` gives it, given
    the ids kept so far."""
    kept: set[str] = set()
    renamed: dict[Place, str] = {}
    for index, message in enumerate(messages):
        if role(message) != "assistant":
            continue
        for position, block in enumerate(content_list(message) or ()):
            if type(block) is dict and block.get("type") == "tool_use":
                value = block.get("id")
                if type(value) is str:
                    new = choose(value, kept)
                    kept.add(new)
                    renamed[(index, position)] = new
    return renamed


def remap(messages: list[Any], choose: Choose, rule: str) -> Outcome:
    """Rename the calls ``choose`` renames, and the results that answer them (``answer_places``:
    a result answers its turn's call in place, else a leftover call by the pairing law; a
    result that answers none follows the latest call that had its id); ``messages`` itself if
    none changes."""
    renamed = _chosen(messages, choose)  # a call's place -> the id it leaves with
    answers_at = answer_places(messages)
    latest: dict[str, str] = {}  # original id -> what its latest call became
    out: list[Any] | None = None
    changes: list[Change] = []
    for index, message in enumerate(messages):
        speaker = role(message)
        blocks = content_list(message)
        if blocks is None or speaker not in ("user", "assistant"):
            continue
        new_blocks: list[Any] | None = None
        for position, block in enumerate(blocks):
            if type(block) is not dict:
                continue
            kind = block.get("type")
            if speaker == "assistant" and kind == "tool_use" and type(block.get("id")) is str:
                old: str = block["id"]
                new = renamed[(index, position)]
                latest[old] = new
                key = "id"
            elif (
                speaker == "user"
                and kind == "tool_result"
                and type(block.get("tool_use_id")) is str
            ):
                old = block["tool_use_id"]
                call = answers_at.get((index, position))
                new = renamed[call] if call is not None else latest.get(old, old)
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
