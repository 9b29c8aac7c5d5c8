"""The horizon of the rules that decide by ids and blocks: a new turn apart from the history
resumes.

The id and pairing rules of chat (``codex-call-ids``, ``blank-tool-call-ids``,
``duplicate-tool-call-ids``, ``displaced-tool-results``, ``missing-tool-call-ids``,
``orphan-tool-results``, ``unanswered-tool-calls``) and of Messages
(``messages-blank-tool-use-ids``, ``messages-tool-use-id-charset``,
``messages-duplicate-tool-use-ids``, ``messages-tool-result-pairing``) decide each call and
result by its id (who else names it, anywhere in the list) and by its block: an assistant turn
and the messages that answer it right after it (chat's tool messages; Messages' user messages,
where the results stand). Once a session carries one of their defects (a split turn that repeats
a call), the walk wakes them on every later request, though the new turn is as clean as the rest.

A new turn ``B`` after a history ``A`` cannot change what the rule decided over ``A``, and the
rule over ``A + B`` decides ``B`` as it decides ``B`` alone, when:

- ``B`` names no id that ``A`` named or that the rule's run over ``A`` wrote (a call, a result,
  a fresh id it made): no result in ``B`` answers a call in ``A`` (or the other way), no id is
  reused across them, and no fresh id made for ``A`` would have had to avoid one in ``B``;
- ``B`` does not start with an answering message: ``A``'s last block ends where ``A`` ends, as
  it did;
- the rule's run over ``A`` left ``A``'s last assistant turn and the answering messages after it
  as they were (the same objects): nothing it dropped, moved or inserted there would have put
  ``A``'s last assistant beside ``B``'s first (the pairing rules join two assistants a removal
  leaves adjacent, and an answer a rule inserts after a trailing call would land in ``B``);
- the rule over ``B`` alone changes nothing (anything else, rarer, runs whole).

The state carried is the set of ids held so far (the rule's input's and output's) and whether
the last condition holds at the end of the list. ``ApartResume`` declines (``None``: the
pipeline runs the rule whole) where any condition fails. Each API says how its list reads
(``Turns``: rules/chat/apart.py, rules/messages/apart.py). tests/rules/test_horizons.py and
tests/rules/test_horizons_items.py hold the rules to it over generated histories split anywhere,
duplicated, displaced, blank and malformed ids included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from rules.engine.base import Apply, Outcome, RuleContext
from rules.engine.memo import per_run

#: What a rule carried: the ids held so far, and whether the list's end is settled.
State = tuple[frozenset[Any], bool]


class Turns(NamedTuple):
    """How an API's list reads for ``ApartResume`` (a module-level function and a string: a
    rule's horizon goes to worker processes, pickled)."""

    #: Every id the messages name, as set members (``key``), wherever the rules read one.
    ids_of: Callable[[list[Any]], set[Any]]
    #: The role of the messages that answer the turn before them (they belong to its block:
    #: chat's ``tool`` messages, Messages' ``user`` messages, where ``tool_result`` stands).
    answering: str

    def answers(self, message: Any) -> bool:
        """Whether ``message`` answers the turn before it."""
        return type(message) is dict and message.get("role") == self.answering

    def apart(self, apply: Apply) -> ApartResume:
        """The resume of one of this API's id or pairing rules."""
        return ApartResume(apply, self)


def key(value: Any) -> Any:
    """An id as a set member: a string as it is, anything else by its ``repr`` (never equal to
    a string: the rules compare ids by value and type)."""
    return value if type(value) is str else ("~", repr(value))


def settled(given: list[Any], made: list[Any], answers: Callable[[Any], bool]) -> bool:
    """Whether ``made`` (a rule's output over ``given``) ends with ``given``'s last turn that
    answers nothing and the answering messages after it, the same objects."""
    start = len(given) - 1
    while start >= 0 and answers(given[start]):
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

    __slots__ = ("apply", "turns")

    def __init__(self, apply: Apply, turns: Turns) -> None:
        self.apply = apply
        self.turns = turns

    def __reduce__(self) -> tuple[Any, ...]:
        return (ApartResume, (self.apply, self.turns))

    def __call__(
        self, messages: list[Any], ctx: RuleContext, state: State | None
    ) -> tuple[Outcome, State] | None:
        ids_of, answers = self.turns.ids_of, self.turns.answers
        if state is None:  # from the start: the rule's own run
            outcome = self.apply(messages, ctx)
            if outcome.messages is messages:
                return outcome, (_held(ids_of, messages), True)
            held = frozenset(ids_of(messages) | ids_of(outcome.messages))
            return outcome, (held, settled(messages, outcome.messages, answers))
        if not messages:
            return Outcome(messages), state
        held, end_settled = state
        if not end_settled or answers(messages[0]):
            return None
        new = ids_of(messages)
        if not held.isdisjoint(new):
            return None
        outcome = self.apply(messages, ctx)
        if outcome.messages is not messages or outcome.changes or outcome.request is not None:
            return None
        return outcome, (_grown(held, messages, new), True)


@per_run  # the rules that left a list alone hold one set of its ids
def _helds(messages: list[Any]) -> dict[Any, frozenset[Any]]:
    """The ids a list names, frozen, by the API's reader, for the current run."""
    return {}


def _held(ids_of: Callable[[list[Any]], set[Any]], messages: list[Any]) -> frozenset[Any]:
    made = _helds(messages)
    held = made.get(ids_of)
    if held is None:
        held = made[ids_of] = frozenset(ids_of(messages))
    return held


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
