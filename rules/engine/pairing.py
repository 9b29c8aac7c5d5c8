"""The pairing law, written once: the k-th result naming id X answers the k-th call naming X.

Every API chatmend repairs pairs tool calls with their results by id: Responses
``function_call`` / ``function_call_output`` by ``call_id``, Messages ``tool_use`` /
``tool_result`` by ``tool_use_id``, chat ``tool_calls`` / ``tool`` messages by ``tool_call_id``.
When ids are unique the law is plain matching; when a client reuses an id (Kimi's per-turn
counters, merged histories, parallel calls numbered ``call_1`` twice) the results naming X are
taken to answer the calls naming X in order, whatever their position: a result placed before its
call still answers it (it is moved, not dropped), and only a result beyond the number of calls
naming X (a second answer) or naming no call at all answers none.

``answers`` reads a request's calls and results as (is_call, id) events in document order and
says which call each result answers. Linear: one pass, one dict of lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def answers(events: Iterable[tuple[bool, str | None]]) -> list[int | None]:
    """For each event (``(True, id)`` a call, ``(False, id)`` a result, in document order): for a
    result, the event index of the call it answers (the k-th result naming X answers the k-th
    call naming X), ``None`` if none; for a call, ``None``. An event whose id is ``None`` (no
    usable id) pairs with nothing."""
    listed = list(events)
    calls: dict[str, list[int]] = {}
    for index, (is_call, key) in enumerate(listed):
        if is_call and key is not None:
            calls.setdefault(key, []).append(index)
    seen: dict[str, int] = {}
    out: list[int | None] = []
    for is_call, key in listed:
        if is_call or key is None:
            out.append(None)
            continue
        nth = seen.get(key, 0)
        seen[key] = nth + 1
        named = calls.get(key)
        out.append(named[nth] if named is not None and nth < len(named) else None)
    return out


def answered_by(pairs: Sequence[int | None]) -> dict[int, int]:
    """``answers``' result read the other way: call event index -> the result that answers it."""
    return {call: result for result, call in enumerate(pairs) if call is not None}
