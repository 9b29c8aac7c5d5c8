"""One walk over a Messages ``messages`` list that tells which Messages rules may have work.

Each rule's own prescan would walk the list once more (a clean 500-message Claude Code session,
some ten walks). ``signals`` walks it once, every block of every message, and returns the
shapes some rule acts on; a rule whose signal is absent returns its input at once. The answer
is remembered for the list it was given until the pipeline run ends (``rules.engine.memo``): on
a clean request every rule gets that same list, so the walk is done once; once a rule has
changed the list, the next rule's call walks the new one.

Soundness is the contract: whenever a rule would change a list, its signal is set (never
under-reported; tests/rules/test_messages_properties.py checks every rule against it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rules.engine import memo
from rules.messages.blocks import (
    ID_PATTERN,
    THINKING_TYPES,
    is_blank_text,
    is_empty,
    is_unsigned_thinking,
)

#: A text block with no visible text.
BLANK_TEXT: Final = "blank_text"
#: A message with no content that is not the final assistant.
EMPTY_MESSAGE: Final = "empty_message"
#: Two user or two assistant messages in a row.
ADJACENT: Final = "adjacent"
#: A ``tool_use`` whose ``input`` is not an object.
BAD_INPUT: Final = "bad_input"
#: A ``tool_use`` string id outside ``^[a-zA-Z0-9_-]+$``.
BAD_ID: Final = "bad_id"
#: A ``tool_use`` string id used twice.
DUP_ID: Final = "dup_id"
#: Not every call answered at the head of the next message, or a result anywhere else.
UNPAIRED: Final = "unpaired"
#: An assistant message with thinking that does not open with it.
MISPLACED_THINKING: Final = "misplaced_thinking"
#: An assistant message with ``tool_use`` blocks and no thinking block.
BARE_TOOL_USE: Final = "bare_tool_use"
#: An assistant message with a thinking block no signature covers (``is_unsigned_thinking``).
UNSIGNED_THINKING: Final = "unsigned_thinking"

_ROLES: Final = ("user", "assistant")


def _answers(results: list[str | None], expected: list[str]) -> bool:
    """The leading results answer exactly the expected calls (any order)."""
    if len(results) != len(expected):
        return False
    return results == expected or Counter(results) == Counter(expected)


class _Turn:
    """What one message's blocks showed."""

    __slots__ = ("head", "ids", "late_results", "results", "thinking")

    def __init__(self) -> None:
        self.ids: list[str] = []  # its usable tool_use ids (an assistant's)
        self.results: list[str | None] = []  # the ids its leading tool_result blocks answer
        self.head = True  # still in the message's leading tool_result blocks
        self.late_results = False  # a tool_result after another block
        self.thinking = False


@dataclass(frozen=True, slots=True)
class WalkState:
    """A walk's state after some messages: enough to read more messages as if the walk had
    never stopped (``walk``)."""

    found: frozenset[str]
    ids: frozenset[str]
    #: The usable ``tool_use`` ids of the last message read.
    expected: tuple[str, ...]
    previous: str | None
    #: The last message read is an empty assistant: refused once another message follows it.
    open_empty: bool


class _Walk:
    """One walk's state, read by one small method per signal family."""

    def __init__(self, state: WalkState | None = None) -> None:
        self.found: set[str] = set()
        self.seen_ids: set[str] = set()
        self.expected: list[str] = []  # the usable tool_use ids of the message before
        self.previous: str | None = None
        self.open_empty = False  # the message before is an empty assistant (fine if last)
        if state is not None:
            self.found = set(state.found)
            self.seen_ids = set(state.ids)
            self.expected = list(state.expected)
            self.previous = state.previous
            self.open_empty = state.open_empty

    def state(self) -> WalkState:
        return WalkState(
            frozenset(self.found),
            frozenset(self.seen_ids),
            tuple(self.expected),
            self.previous,
            self.open_empty,
        )

    def finish(self) -> frozenset[str]:
        """The signals of the list read so far, as the list's end makes them."""
        return frozenset(self.found | {UNPAIRED}) if self.expected else frozenset(self.found)

    def message(self, message: Any) -> None:
        role = message.get("role") if type(message) is dict else None
        role = role if type(role) is str else None
        if role in _ROLES and role == self.previous:
            self.found.add(ADJACENT)
        self.previous = role
        if self.open_empty:  # an empty assistant that is not the final message
            self.found.add(EMPTY_MESSAGE)
        empty = is_empty(message)
        self.open_empty = empty and role == "assistant"
        if empty and role != "assistant":
            self.found.add(EMPTY_MESSAGE)
        content = message.get("content") if type(message) is dict else None
        turn = _Turn()
        for position, block in enumerate(content if type(content) is list else ()):
            self.block(turn, position, block, role)
        if turn.ids and not turn.thinking:
            self.found.add(BARE_TOOL_USE)
        self.pairing(turn, role)

    def block(self, turn: _Turn, position: int, block: Any, role: str | None) -> None:
        kind = block.get("type") if type(block) is dict else None
        if kind == "tool_result":
            if turn.head:
                value = block.get("tool_use_id")
                turn.results.append(value if type(value) is str else None)
            else:
                turn.late_results = True
            return
        turn.head = False
        if kind == "text":
            if is_blank_text(block):
                self.found.add(BLANK_TEXT)
        elif kind in THINKING_TYPES:
            self.thinking(turn, position, block, role)
        elif kind == "tool_use":
            self.tool_use(turn, block, role)

    def thinking(self, turn: _Turn, position: int, block: Any, role: str | None) -> None:
        """MISPLACED_THINKING, UNSIGNED_THINKING."""
        turn.thinking = True
        if position > 0 and role == "assistant":
            self.found.add(MISPLACED_THINKING)
        if role == "assistant" and is_unsigned_thinking(block):
            self.found.add(UNSIGNED_THINKING)

    def tool_use(self, turn: _Turn, block: dict[str, Any], role: str | None) -> None:
        """BAD_INPUT, BAD_ID, DUP_ID."""
        if type(block.get("input")) is not dict:
            self.found.add(BAD_INPUT)
        value = block.get("id")
        if type(value) is not str:
            return
        if ID_PATTERN.fullmatch(value) is None:
            self.found.add(BAD_ID)
        if value in self.seen_ids:
            self.found.add(DUP_ID)
        self.seen_ids.add(value)
        if value and role == "assistant":
            turn.ids.append(value)

    def pairing(self, turn: _Turn, role: str | None) -> None:
        """UNPAIRED: the calls of the message before answered at this one's head, once each,
        and no result anywhere else."""
        if self.expected and not (role == "user" and _answers(turn.results, self.expected)):
            self.found.add(UNPAIRED)
        if turn.late_results or (turn.results and not self.expected):
            self.found.add(UNPAIRED)
        self.expected = turn.ids


@memo.per_run
def signals(messages: list[Any]) -> frozenset[str]:
    """The signals ``messages`` sets (the Messages rules' ``Rule.scan``)."""
    walk = _Walk()
    for message in messages:
        walk.message(message)
    return walk.finish()


def walk(messages: list[Any], state: WalkState | None = None) -> tuple[frozenset[str], WalkState]:
    """``signals`` of the messages an earlier walk read (up to ``state``) followed by
    ``messages``, and the state after them, to go on from with the messages a later request adds
    (proxy/relay/prefix.py): ``walk(b, walk(a)[1])`` gives the signals of ``signals(a + b)``,
    exactly (tests/rules/test_horizons_items.py)."""
    reading = _Walk(state)
    for message in messages:
        reading.message(message)
    return reading.finish(), reading.state()


def primed(state: WalkState) -> dict[Callable[[list[Any]], Any], Any]:
    """What a walk knows for the rules' prescans: nothing (no Messages prescan is primed)."""
    return {}
