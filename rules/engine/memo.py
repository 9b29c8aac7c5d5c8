"""A prescan several rules share, computed once per pipeline run.

The pairing rules all start with the same question ("is every call answered in its block?"). On
a request no earlier rule changed, every rule gets the very same list object, so the answer for
that object is remembered and reused. The memo belongs to one pipeline run (``run()``, entered
by ``run_rules``): one entry per function, keyed by the list's identity (the list itself is
held, so its id cannot be reused while the entry exists), valid because rules never mutate a
list they are given, and dropped when the run ends, so no payload outlives its request. Runs in
other threads or tasks, and a run nested in another (a retry), each have their own; outside a
run nothing is remembered.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

#: The current run's memo: function -> (the list it was last given, its answer).
_RUN: ContextVar[dict[Callable[..., Any], tuple[list[Any], Any]] | None] = ContextVar(
    "rules_memo_run", default=None
)


@contextmanager
def run() -> Iterator[None]:
    """A pipeline run: ``per_run`` functions remember their answers until it ends."""
    token = _RUN.set({})
    try:
        yield
    finally:
        _RUN.reset(token)


def per_run(function: Callable[[list[Any]], T]) -> Callable[[list[Any]], T]:
    """Remember ``function``'s answer for the last list it was given, for the current run."""

    @functools.wraps(function)
    def remembered(messages: list[Any]) -> T:
        memo = _RUN.get()
        if memo is None:
            return function(messages)
        last = memo.get(function)
        if last is not None and last[0] is messages:
            result: T = last[1]
            return result
        result = function(messages)
        memo[function] = (messages, result)
        return result

    return remembered


def prime(function: Callable[[list[Any]], T], messages: list[Any], answer: T) -> None:
    """Give the ``per_run`` ``function`` its answer for ``messages`` in the current run (one
    worked out by a walk that read the list anyway); outside a run, nothing."""
    memo = _RUN.get()
    if memo is not None:
        memo[getattr(function, "__wrapped__", function)] = (messages, answer)
