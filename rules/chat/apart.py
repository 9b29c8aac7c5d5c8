"""The horizon of the id and pairing rules: a new turn apart from the history resumes.

``codex-call-ids``, ``blank-tool-call-ids``, ``duplicate-tool-call-ids``,
``displaced-tool-results``, ``missing-tool-call-ids``, ``orphan-tool-results`` and
``unanswered-tool-calls`` decide each call and result by its id (who else names it, anywhere
in the list) and by its block (the assistant's calls and the tool messages right after them).
Once a session carries one of their defects (a split turn that repeats a call), the walk wakes
them on every later request, though the new turn is as clean as the rest.

A new turn ``B`` after a history ``A`` cannot change what the rule decided over ``A``, and the
rule over ``A + B`` decides ``B`` as it decides ``B`` alone, when:

- ``B`` names no id that ``A`` named or that the rule's run over ``A`` wrote (a call, a result,
  a fresh id it made): no result in ``B`` answers a call in ``A`` (or the other way), no id is
  reused across them, and no fresh id made for ``A`` would have had to avoid one in ``B``;
- ``B`` does not start with a tool message: ``A``'s last block ends where ``A`` ends, as it did;
- the rule's run over ``A`` left ``A``'s last message and the tool messages after it as they
  were (the same objects): nothing it dropped or moved there would have put ``A``'s last
  assistant beside ``B``'s first (the pairing rules merge two assistants a removal joins);
- the rule over ``B`` alone changes nothing (anything else, rarer, runs whole).

The state carried is the set of ids held so far (the rule's input's and output's) and whether
the last condition holds at the end of the list. ``ApartResume`` declines (``None``: the
pipeline runs the rule whole) where any condition fails. tests/rules/test_horizons.py holds the
rules to it over generated histories split anywhere, duplicated, displaced, blank and
codex-style ids included.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Apply, Outcome, RuleContext
from rules.engine.memo import per_run

#: What a rule carried: the ids held so far, and whether the list's end is settled.
State = tuple[frozenset[Any], bool]


def _key(value: Any) -> Any:
    """An id as a set member: a string as it is, anything else by its ``repr`` (never equal to
    a string: a rule compares ids by value and type)."""
    return value if type(value) is str else ("~", repr(value))


@per_run  # the rules woken together ask it of the same new turn
def ids_of(messages: list[Any]) -> set[Any]:
    """Every id ``messages`` name: each entry's ``tool_call_id`` and its ``tool_calls``' ``id``,
    ``call_id`` and ``response_item_id``, whatever the role (the rules read none but these)."""
    found: set[Any] = set()
    for message in messages:
        if type(message) is not dict:
            continue
        if "tool_call_id" in message:
            found.add(_key(message["tool_call_id"]))
        calls = message.get("tool_calls")
        if type(calls) is not list:
            continue
        for call in calls:
            if type(call) is dict:
                if "id" in call:
                    found.add(_key(call["id"]))
                for alias in ("call_id", "response_item_id"):  # Codex's aliases
                    if alias in call:
                        found.add(_key(call[alias]))
    return found


def _is_tool(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "tool"


def settled(given: list[Any], made: list[Any]) -> bool:
    """Whether ``made`` (a rule's output over ``given``) ends with ``given``'s last non-tool
    message and the tool messages after it, the same objects."""
    start = len(given) - 1
    while start >= 0 and _is_tool(given[start]):
        start -= 1
    start = max(start, 0)
    tail = len(given) - start
    if len(made) < tail:
        return False
    offset = len(made) - tail
    return all(made[offset + i] is given[start + i] for i in range(tail))


class ApartResume:
    """``Horizon.resume`` of a rule that decides by ids and blocks (the module's docstring): a
    class, not a closure (rule records go to worker processes, pickled)."""

    __slots__ = ("apply",)

    def __init__(self, apply: Apply) -> None:
        self.apply = apply

    def __reduce__(self) -> tuple[Any, ...]:
        return (ApartResume, (self.apply,))

    def __call__(
        self, messages: list[Any], ctx: RuleContext, state: State | None
    ) -> tuple[Outcome, State] | None:
        if state is None:  # from the start: the rule's own run
            outcome = self.apply(messages, ctx)
            if outcome.messages is messages:
                return outcome, (_held(messages), True)
            held = frozenset(ids_of(messages) | ids_of(outcome.messages))
            return outcome, (held, settled(messages, outcome.messages))
        if not messages:
            return Outcome(messages), state
        held, end_settled = state
        if not end_settled or _is_tool(messages[0]):
            return None
        new = ids_of(messages)
        if not held.isdisjoint(new):
            return None
        outcome = self.apply(messages, ctx)
        if outcome.messages is not messages or outcome.changes or outcome.request is not None:
            return None
        return outcome, (_grown(held, messages, new), True)


@per_run  # the rules that left a list alone hold one set of its ids
def _held(messages: list[Any]) -> frozenset[Any]:
    return frozenset(ids_of(messages))


@per_run
def _unions(messages: list[Any]) -> dict[int, tuple[frozenset[Any], frozenset[Any]]]:
    """The ids held after ``messages`` by the ids held before them (by identity), for the
    current run: the rules that carried one set carry one set on."""
    return {}


def _grown(held: frozenset[Any], messages: list[Any], new: set[Any]) -> frozenset[Any]:
    made = _unions(messages)
    known = made.get(id(held))
    if known is not None and known[0] is held:
        return known[1]
    grown = held | new
    made[id(held)] = (held, grown)
    return grown
