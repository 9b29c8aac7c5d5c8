"""Small read-only helpers over Responses API ``input`` items, shared by the Responses rules.

An item is a dict with a ``type`` (``message``, ``function_call``, ``function_call_output``,
``reasoning``, ``compaction``, ...); an "easy" message has a ``role`` and no ``type``. Rules must
tolerate anything here: an item may be a non-dict, a field any JSON type.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from rules.engine.base import Change, Outcome
from rules.engine.pairing import answers

CALL = "function_call"
OUTPUT = "function_call_output"
COMPACTION = "compaction"


def item_type(item: Any) -> str | None:
    """The item's type: its ``type``, ``message`` for an easy message (a ``role`` and no
    ``type``), else ``None``."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    return "message" if "role" in item and kind is None else None


def is_reference(item: Any) -> bool:
    """Whether ``item`` is an item reference: ``type: item_reference``, or an object of an
    ``id`` alone, which the SDKs send for one (its ``type`` is optional): its id is all it is."""
    if not isinstance(item, dict):
        return False
    return item.get("type") == "item_reference" or set(item) == {"id"}


def is_message(item: Any) -> bool:
    return item_type(item) == "message"


def is_call(item: Any) -> bool:
    return item_type(item) == CALL


def is_output(item: Any) -> bool:
    return item_type(item) == OUTPUT


def call_id(item: Any) -> str | None:
    """The usable (non-empty string) ``call_id`` of a call or an output, else ``None``."""
    if isinstance(item, dict) and item.get("type") in (CALL, OUTPUT):
        value = item.get("call_id")
        if isinstance(value, str) and value:
            return value
    return None


def item_id(item: Any) -> str | None:
    """The item's usable ``id`` (``fc_...``, ``msg_...``, ``rs_...``), else ``None``."""
    if isinstance(item, dict):
        value = item.get("id")
        if isinstance(value, str) and value:
            return value
    return None


def output_length(item: dict[str, Any]) -> int:
    """The length of an output's ``output`` (a string's characters, a list's entries)."""
    output = item.get("output")
    return len(output) if isinstance(output, str | list) else 0


def pair_calls(items: list[Any]) -> tuple[set[int], list[int]]:
    """The call/output pairing, as the Responses API reads it: each output answers the first
    earlier call of its ``call_id`` not yet answered. Returns the indices of the calls that are
    answered and, in order, of those that are not."""
    waiting: dict[str, deque[int]] = {}
    answered: set[int] = set()
    calls: list[int] = []
    for index, item in enumerate(items):
        cid = call_id(item)
        if cid is None:
            continue
        if is_call(item):
            waiting.setdefault(cid, deque()).append(index)
            calls.append(index)
        elif is_output(item) and waiting.get(cid):
            answered.add(waiting[cid].popleft())
    return answered, [index for index in calls if index not in answered]


def answer_map(items: list[Any]) -> dict[int, int | None]:
    """The pairing law (``rules.engine.pairing``) over ``input``: for each output (by index) the
    index of the call it answers, whatever their positions (the k-th output naming call_id X
    answers the k-th call naming X), or ``None`` when it answers none (no usable call_id, no call
    naming it, or a further answer beyond the calls naming it)."""
    positions: list[int] = []
    events: list[tuple[bool, str | None]] = []
    for index, item in enumerate(items):
        if is_call(item):
            positions.append(index)
            events.append((True, call_id(item)))
        elif is_output(item):
            positions.append(index)
            events.append((False, call_id(item)))
    pairs = answers(events)
    return {
        positions[event]: (None if call is None else positions[call])
        for event, call in enumerate(pairs)
        if not events[event][0]
    }


def outputs_in_place(items: list[Any]) -> bool:
    """The clean path's prescan: every output has a usable call_id and answers a call before it
    (it is at most the k-th output naming X after k calls naming X). Then the pairing law pairs
    as the input reads: no output is early, orphaned or a further answer. One walk, one dict."""
    return outputs_in_place_after(items, {}) is not None


def outputs_in_place_after(items: list[Any], open_calls: dict[str, int]) -> dict[str, int] | None:
    """``outputs_in_place`` of the items before, then ``items``: ``open_calls`` (its own copy,
    written) holds, per call_id, the calls before not answered yet; the same after ``items``, or
    ``None`` when an output here is not in place (a request that adds items to one whose outputs
    were in place: rules/engine/resume.py)."""
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == CALL:
            cid = call_id(item)
            if cid is not None:
                open_calls[cid] = open_calls.get(cid, 0) + 1
        elif kind == OUTPUT:
            cid = call_id(item)
            waiting = open_calls.get(cid, 0) if cid is not None else 0
            if not waiting:
                return None
            if waiting == 1:
                del open_calls[cid]  # type: ignore[arg-type]
            else:
                open_calls[cid] = waiting - 1  # type: ignore[index]
    return open_calls


def resume_in_place(
    items: list[Any], apply: Callable[[list[Any]], Outcome], before: dict[str, int] | bool | None
) -> tuple[Outcome, dict[str, int] | bool] | None:
    """The resume of a rule that changes nothing where every output is in place
    (``outputs_in_place``) and reads the whole list otherwise: ``apply`` from the start; after
    items whose outputs were in place (``before``: their calls not answered yet), ``items``
    unchanged while theirs are too; ``None`` otherwise (``Horizon``, rules/engine/resume.py).
    The state is ``False`` after items whose outputs were not all in place."""
    if before is None:
        opened = outputs_in_place_after(items, {})
        if opened is None:
            return apply(items), False
        return Outcome(items), opened
    if before is False or before is True:
        return None
    after = outputs_in_place_after(items, dict(before))
    return None if after is None else (Outcome(items), after)


def move_after_calls(items: list[Any], after: dict[int, int], rule: str) -> Outcome:
    """``items`` with each output ``after[call]`` moved right after that call (one pass; the
    rest keep their order), a ``moved_item`` Change per output (its old index, its call_id,
    where it went)."""
    moved = set(after.values())
    out: list[Any] = []
    changes: list[Change] = []
    for index, item in enumerate(items):
        if index in moved:
            continue
        out.append(item)
        output = after.get(index)
        if output is not None:
            detail = {"call_id": item.get("call_id"), "to": len(out), "after": index}
            changes.append(Change(rule, output, "moved_item", detail))
            out.append(items[output])
    return Outcome(out, tuple(changes))
