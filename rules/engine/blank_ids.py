"""Ids are ids: a call whose id is empty or blank (``""``, ``" "``) and the results that name the
same string are a pair, renamed together, in every API.

An empty string is as much an id as any other: the k-th result naming it answers the k-th call
naming it (``rules.engine.pairing.answers``, the one law). Left as they are, strict providers
refuse the empty id ("string too short") and every pairing rule after takes the result for an
orphan and drops it, leaving its call unanswered. Here each such call gets a fresh id of its
API's shape, derived from its place (``call_<message>_<position>``: a session's history keeps
its places, so a later request gives the same call the same id), and each result that answers
it by the law gets the same id. A result naming a blank id that no call names keeps it (the
orphan rules' business).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rules.engine.ids import Minter
from rules.engine.pairing import answers


def is_blank(value: Any) -> bool:
    """An id that is a string with nothing visible in it."""
    return isinstance(value, str) and not value.strip()


Event = tuple[bool, str | None]


def blank_renames(events: Iterable[tuple[bool, Any, str]], taken: set[str]) -> dict[int, str]:
    """For events ``(is_call, id, base)`` in document order, the new id of each event (by its
    index) that is a blank-id call or a result answering one: the call's fresh id (``base``, or
    ``base_d<n>`` where that is taken), its results the same."""
    listed = list(events)
    law: list[Event] = [(is_call, key if is_blank(key) else None) for is_call, key, _ in listed]
    pairs = answers(law)
    minter = Minter(taken)
    fresh: dict[int, str] = {}
    for index, (is_call, key, base) in enumerate(listed):
        if is_call and is_blank(key):
            fresh[index] = minter.mint(base)
    for index, call in enumerate(pairs):
        if call is not None and call in fresh:
            fresh[index] = fresh[call]
    return fresh


def string_ids(values: Iterable[Any]) -> set[str]:
    return {value for value in values if isinstance(value, str) and value.strip()}


Rename = Callable[[dict[str, Any], str], dict[str, Any]]
