"""A registry's order, declared: why each rule stands where it does, as data one test reads.

Each API keeps its rules in one ordered tuple (``RULES``, ``RESPONSES_RULES``,
``MESSAGES_RULES``), and beside it ``ORDER``: the reasons that fix the order. A reason
(``Before``) says which rules must run before which others, and why. tests/rules/test_order.py
holds each registry to every reason, and every rule to at least one (a position nobody justified
is a defect); no rule's own test pins another rule's position. A new rule states its own
reasons where it is registered, and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: ``then`` of a reason that holds for every other rule of the registry (text first).
EVERY = "*"


@dataclass(frozen=True, slots=True)
class Before:
    """Each rule of ``first`` runs before each rule of ``then`` (``EVERY``: every other rule of
    the registry), because ``why``."""

    first: tuple[str, ...]
    then: tuple[str, ...]
    why: str


def before(first: str | Iterable[str], then: str | Iterable[str], why: str) -> Before:
    """A reason: ``first`` (a rule's name, or several) before ``then``, because ``why``."""
    return Before(_names(first), _names(then), why)


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def broken(names: Sequence[str], order: Iterable[Before]) -> list[str]:
    """What the registry ``names`` (its rules' names, in order) breaks of ``order``: a reason
    naming a rule it does not hold, a rule that runs after one it must follow, and a rule no
    reason places. Empty: the registry keeps every reason."""
    at = {name: index for index, name in enumerate(names)}
    found: list[str] = []
    placed: set[str] = set()
    for reason in order:
        every = reason.then == (EVERY,)
        then = tuple(n for n in names if n not in reason.first) if every else reason.then
        placed.update(reason.first, then)
        found += [
            f"{n}: no such rule ({reason.why[:60]}...)"
            for n in (*reason.first, *then)
            if n not in at
        ]
        found += [
            f"{first} must run before {later}: {reason.why}"
            for first in reason.first
            for later in then
            if first in at and later in at and at[first] > at[later]
        ]
    found += [
        f"{name}: no reason places it (add one to ORDER)" for name in names if name not in placed
    ]
    return found
