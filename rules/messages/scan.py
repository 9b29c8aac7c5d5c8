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


@memo.per_run
def signals(messages: list[Any]) -> frozenset[str]:
    found: set[str] = set()
    seen_ids: set[str] = set()
    expected: list[str] = []  # the usable tool_use ids of the message before
    previous: Any = None
    last = len(messages) - 1
    for index, message in enumerate(messages):
        role = message.get("role") if type(message) is dict else None
        role = role if type(role) is str else None
        if role in _ROLES and role == previous:
            found.add(ADJACENT)
        previous = role
        content = message.get("content") if type(message) is dict else None
        if is_empty(message) and not (index == last and role == "assistant"):
            found.add(EMPTY_MESSAGE)
        blocks = content if type(content) is list else None
        ids: list[str] = []
        results: list[str | None] = []
        head = True  # still in the message's leading tool_result blocks
        results_after_head = False
        thinking = False
        for position, block in enumerate(blocks or ()):
            kind = block.get("type") if type(block) is dict else None
            if kind == "tool_result":
                if head:
                    value = block.get("tool_use_id")
                    results.append(value if type(value) is str else None)
                else:
                    results_after_head = True
                continue
            head = False
            if kind == "text":
                if is_blank_text(block):
                    found.add(BLANK_TEXT)
            elif kind in THINKING_TYPES:
                thinking = True
                if position > 0 and role == "assistant":
                    found.add(MISPLACED_THINKING)
                if role == "assistant" and is_unsigned_thinking(block):
                    found.add(UNSIGNED_THINKING)
            elif kind == "tool_use":
                if type(block.get("input")) is not dict:
                    found.add(BAD_INPUT)
                value = block.get("id")
                if type(value) is str:
                    if ID_PATTERN.fullmatch(value) is None:
                        found.add(BAD_ID)
                    if value in seen_ids:
                        found.add(DUP_ID)
                    seen_ids.add(value)
                    if value and role == "assistant":
                        ids.append(value)
        if ids and not thinking:
            found.add(BARE_TOOL_USE)
        # Pairing: the calls of the message before answered at this one's head, once each,
        # and no result anywhere else.
        if expected and not (role == "user" and _answers(results, expected)):
            found.add(UNPAIRED)
        if results_after_head or (results and not expected):
            found.add(UNPAIRED)
        expected = ids
    if expected:
        found.add(UNPAIRED)
    return frozenset(found)
