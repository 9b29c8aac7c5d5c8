"""A prescan several rules share, computed once per pipeline run.

The pairing rules all start with the same question ("is every call answered in its block?"). On
a clean request every rule gets the very same list object, so the answer for that object is
remembered and reused. The memo holds one entry per function, keyed by the list's identity
(the list itself is held, so its id cannot be reused while the entry exists), and is valid
because rules never mutate a list they are given. ``run_rules`` clears every memo when a run
ends, so no payload outlives its request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_MEMOS: list[dict[str, tuple[list[Any], Any]]] = []


def per_run(function: Callable[[list[Any]], T]) -> Callable[[list[Any]], T]:
    """Remember ``function``'s answer for the last list it was given, until ``clear()``."""
    memo: dict[str, tuple[list[Any], Any]] = {}
    _MEMOS.append(memo)

    @functools.wraps(function)
    def remembered(messages: list[Any]) -> T:
        last = memo.get("last")
        if last is not None and last[0] is messages:
            result: T = last[1]
            return result
        result = function(messages)
        memo["last"] = (messages, result)
        return result

    return remembered


def clear() -> None:
    """Forget every remembered answer (and the lists they were for)."""
    for memo in _MEMOS:
        memo.clear()
