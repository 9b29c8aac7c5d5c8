"""What is known of a string across requests: answers of pure functions, kept in a bounded memo.

An agent re-sends its history on every request, and a stuck session re-sends the same broken
``arguments`` strings each time. Whether a string holds a JSON object, and what repairing it
gives, depend on the string alone: each is worked out once per process and looked up after. A
string keeps its own hash, so a re-sent one (the very object the prefix cache kept, see
proxy/relay/prefix.py) costs one dict lookup. The memo is bounded by the characters it holds, the
oldest entries out first: it never changes an answer, only what the answer costs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

import orjson

from rules.engine.json_repair_passes import Repaired, parse_strict_object, repair_object

T = TypeVar("T")

#: Characters each memo may hold (keys and answers), and what an entry costs beyond them.
MAX_CHARS: Final = 8 * 1024 * 1024
ENTRY_COST: Final = 96


class Memo(Generic[T]):
    """Answers by key, bounded by ``max_chars`` (the weight each answer is put with)."""

    __slots__ = ("_answers", "held", "max_chars")

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self._answers: dict[Hashable, tuple[T, int]] = {}
        self.held = 0
        self.max_chars = max_chars

    def get(self, key: Hashable, weight: int, compute: Callable[[], T]) -> T:
        known = self._answers.get(key)
        if known is not None:
            return known[0]
        answer = compute()
        weight += ENTRY_COST
        if weight <= self.max_chars:
            self._answers[key] = (answer, weight)
            self.held += weight
            while self.held > self.max_chars:
                oldest = next(iter(self._answers))
                self.held -= self._answers.pop(oldest)[1]
        return answer

    def __len__(self) -> int:
        return len(self._answers)

    def clear(self) -> None:
        self._answers.clear()
        self.held = 0


_OBJECTS: Memo[bool] = Memo()
_STRICT: Memo[bool] = Memo()
_REPAIRS: Memo[Repaired] = Memo()


def forget() -> None:
    """Drop every answer (the tests that count work do, to count it once more)."""
    _OBJECTS.clear()
    _STRICT.clear()
    _REPAIRS.clear()


def object_text(raw: str) -> bool:
    """Whether orjson reads ``raw`` as a JSON object."""
    return _OBJECTS.get(raw, len(raw), lambda: _is_object(raw))


def _is_object(raw: str) -> bool:
    try:
        return type(orjson.loads(raw)) is dict
    except orjson.JSONDecodeError:
        return False


def strict_object(raw: str) -> bool:
    """``parse_strict_object(raw)``: orjson's reading (remembered), then the stdlib's for what
    orjson refuses."""
    return object_text(raw) or _STRICT.get(raw, len(raw), lambda: parse_strict_object(raw))


def repaired(raw: str, *, close_strings: bool, max_tokens: int) -> Repaired:
    """``repair_object(raw, ...)``, once per distinct string and settings."""
    return _REPAIRS.get(
        (raw, close_strings, max_tokens),
        2 * len(raw),
        lambda: repair_object(raw, close_strings=close_strings, max_tokens=max_tokens),
    )
