"""One walk over the messages that tells which rules may have work: the clean path's only pass.

Every rule's own prescan answers "is there anything for me here?" with a walk of the whole list,
so a clean 500-message request used to be walked some fifteen times. ``scan`` walks it once and
returns the *signals* it saw: a set of short names for the shapes some rule acts on (a
``developer`` role, a tool-call id used twice, arguments that are not a JSON object, a list
content, ...). A rule declares the signals that can wake it (``Rule.woken_by``, from its options);
the pipeline skips a rule none of whose signals is set, and runs the rest as before. A clean body
sets none, so it costs one walk and one set intersection per rule.

Soundness is the contract: whenever a rule would change a list, ``scan`` sets one of the signals
that rule declares. ``scan`` may over-report (a rule it wakes then finds nothing in its own
prescan), never under-report; anything it does not model (a non-object message or call, a
non-string role, an odd content type) makes it return ``None``, and then every rule runs in full.
The property tests hold every rule of every profile to it (tests/rules/test_scan.py). The
signals describe the list as the client sent it. Once a rule has changed the list, the pipeline
keeps them, with the signals that rule says its change may set (``Rule.introduces``), for the
later rules; after a rule that does not say, every later rule runs its own prescan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rules.chat.message_fields import has_content
from rules.engine import memo
from rules.engine.known import object_text
from rules.engine.wake import Signals, on

__all__ = ["Signals", "WalkState", "on", "scan", "walk"]

#: A role outside system/user/assistant/tool: ``role:<name>`` is set too.
ODD_ROLE: Final = "odd_role"
#: A message key outside ``PLAIN_KEYS``; a call key outside ``PLAIN_CALL_KEYS``.
KEYS: Final = "keys"
CALL_KEYS: Final = "call_keys"
#: Two assistant messages in a row.
ADJACENT_ASSISTANTS: Final = "adjacent_assistants"
#: A call whose ``arguments`` is not a string holding a JSON object.
BAD_ARGUMENTS: Final = "bad_arguments"
#: A tool-call id used by two calls.
DUP_CALL_ID: Final = "dup_call_id"
#: Not every call answered in order right after its assistant, or a tool message outside a block.
UNPAIRED: Final = "unpaired"
#: A call without ``type`` (or ``type: null``), or of another type than ``function``.
CALL_TYPE: Final = "call_type"
#: A content that is a list, or a bare object.
LIST_CONTENT: Final = "list_content"
DICT_CONTENT: Final = "dict_content"
#: ``tool_calls`` null or ``[]``.
EMPTY_TOOL_CALLS: Final = "empty_tool_calls"
#: An assistant without calls and without content.
EMPTY_ASSISTANT: Final = "empty_assistant"
#: ``null:<role>``: a message of that role (not an assistant with calls) with null or no content.
NULL: Final = "null:"
#: ``call_empty:<kind>``: an assistant with calls whose content is empty in that kind
#: (``rules.chat.tool_call_content.KINDS``).
CALL_EMPTY: Final = "call_empty:"
#: ``role:<name>`` for each role outside the four chat roles.
ROLE: Final = "role:"

ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
#: Keys no rule that reads ``KEYS`` acts on by themselves.
PLAIN_KEYS: Final = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content"}
)
PLAIN_CALL_KEYS: Final = frozenset({"id", "type", "function"})

_ABSENT: Final = object()


class _Unmodelled(Exception):
    """A shape the walk does not model: every rule runs in full."""


class _Walk:
    """One walk's state, read by one small method per signal family: message keys, roles and
    adjacency, content, calls, and the pairing of calls with results."""

    def __init__(self, state: WalkState | None = None) -> None:
        self.found: set[str] = set()
        self.ids: set[str] = set()  # call ids seen so far (DUP_CALL_ID)
        # string arguments and their message's index, parsed once at the end
        self.arguments: list[tuple[int, str]] = []
        self.bad: set[int] = set()  # the assistants with arguments that hold no JSON object
        self.calls: list[Any] = []  # the calls of the block being read
        self.k = self.n = 0  # results read in call order so far, calls in the block
        self.after_assistant = False
        self.count = 0  # messages read (the one being read is ``count - 1``)
        if state is not None:  # go on where an earlier walk stopped (``walk``)
            self.found, self.ids = set(state.found), set(state.ids)
            self.calls, self.k, self.n = state.calls, state.k, state.n
            self.after_assistant, self.count = state.after_assistant, state.count
            self.bad = set(state.bad)

    def message(self, message: Any) -> None:
        self.count += 1
        if type(message) is not dict:
            raise _Unmodelled
        role = message.get("role")
        content = message.get("content", _ABSENT)
        self.keys(message, role)
        if role == "tool":
            self.after_assistant = False
            self.result(message)
            self.content(content, "tool")
            return
        self.block_ends()
        if role == "assistant":
            self.assistant(message, content)
        else:
            self.after_assistant = False
            self.content(content, self.role(role))

    def keys(self, message: dict[str, Any], role: Any) -> None:
        """KEYS: a key outside ``PLAIN_KEYS``, or calls where no role has them (the key rules
        read them anyway)."""
        if not message.keys() <= PLAIN_KEYS or (role != "assistant" and "tool_calls" in message):
            self.found.add(KEYS)

    def role(self, role: Any) -> str:
        """ODD_ROLE and ``role:<name>``; the role, a string."""
        if type(role) is not str:
            raise _Unmodelled
        if role not in ROLES:
            self.found.add(ODD_ROLE)
            self.found.add(ROLE + role)
        return role

    def content(self, content: Any, role: str) -> None:
        """The non-string content of a message that is no assistant with calls."""
        if type(content) is not str and _content(self.found, content, role) is None:
            raise _Unmodelled

    def result(self, message: dict[str, Any]) -> None:
        """UNPAIRED: a tool message that does not answer the next call of its block."""
        rid = message.get("tool_call_id")
        if self.k < self.n and type(rid) is str and rid and self.calls[self.k].get("id") == rid:
            self.k += 1
        else:
            self.found.add(UNPAIRED)

    def block_ends(self) -> None:
        """UNPAIRED: a block left with calls unanswered."""
        if self.k != self.n:
            self.found.add(UNPAIRED)
        self.k = self.n = 0

    def assistant(self, message: dict[str, Any], content: Any) -> None:
        """ADJACENT_ASSISTANTS, then an assistant without calls or with them."""
        if self.after_assistant:
            self.found.add(ADJACENT_ASSISTANTS)
        self.after_assistant = True
        listed = message.get("tool_calls", _ABSENT)
        if listed is _ABSENT or listed is None or listed == []:
            self.without_calls(message, content, listed)
            return
        if type(listed) is not list:
            raise _Unmodelled
        for call in listed:
            self.call(call)
        self.calls, self.n = listed, len(listed)
        if (type(content) is not str or not content) and not _call_content(
            self.found, message, content
        ):
            raise _Unmodelled

    def without_calls(self, message: dict[str, Any], content: Any, listed: Any) -> None:
        """EMPTY_TOOL_CALLS (``tool_calls`` null or []: then the message reads as one without
        calls to every content rule) and EMPTY_ASSISTANT."""
        if listed is not _ABSENT:
            self.found.add(EMPTY_TOOL_CALLS)
        if type(listed) is list:
            self.calls, self.n = listed, 0  # a block of no call: a tool message after it is stray
        if not (type(content) is str and content) and not (
            content is not _ABSENT and has_content(message)
        ):
            self.found.add(EMPTY_ASSISTANT)
        self.content(content, "assistant")

    def call(self, call: Any) -> None:
        """CALL_KEYS, CALL_TYPE, UNPAIRED (no usable id), DUP_CALL_ID, BAD_ARGUMENTS."""
        if type(call) is not dict:
            raise _Unmodelled
        if not call.keys() <= PLAIN_CALL_KEYS:
            self.found.add(CALL_KEYS)
        if call.get("type") != "function":
            self.found.add(CALL_TYPE)
        cid = call.get("id")
        if type(cid) is not str or not cid.strip():  # a blank id is no usable one either
            self.found.add(UNPAIRED)
        elif cid in self.ids:
            self.found.add(DUP_CALL_ID)
        else:
            self.ids.add(cid)
        function = call.get("function")
        if type(function) is not dict:
            raise _Unmodelled
        raw = function.get("arguments")
        if type(raw) is str:
            self.arguments.append((self.count - 1, raw))
        else:
            self.found.add(BAD_ARGUMENTS)
            self.bad.add(self.count - 1)

    def settle(self) -> None:
        """BAD_ARGUMENTS, and where: each string read so far that does not hold a JSON object
        (``rules.engine.known`` remembers the answer for a string sent again); the strings are
        then done with."""
        for index, raw in self.arguments:
            if not object_text(raw):
                self.found.add(BAD_ARGUMENTS)
                self.bad.add(index)
        self.arguments = []

    def state(self) -> WalkState:
        """Where the walk stands: a later walk of more messages can go on from here."""
        self.settle()
        return WalkState(
            frozenset(self.found),
            frozenset(self.ids),
            self.calls,
            self.k,
            self.n,
            self.after_assistant,
            self.count,
            frozenset(self.bad),
        )

    def finish(self) -> frozenset[str]:
        """The signals of the list read: the last block's pairing, and the arguments'."""
        self.settle()
        if self.k != self.n:
            return frozenset((*self.found, UNPAIRED))
        return frozenset(self.found)


@dataclass(frozen=True, slots=True)
class WalkState:
    """A walk's state after some messages: enough to read more messages as if the walk had
    never stopped (the signals found, the call ids seen, the block being answered)."""

    found: frozenset[str]
    ids: frozenset[str]
    #: The calls of the open block (the caller's list: read, never written).
    calls: list[Any]
    k: int
    n: int
    after_assistant: bool
    #: Messages read, and the assistants among them with arguments holding no JSON object.
    count: int = 0
    bad: frozenset[int] = frozenset()


def scan(messages: list[Any]) -> frozenset[str] | None:
    """The signals ``messages`` sets, or ``None`` for a shape the walk does not model. Within a
    pipeline run, what the walk learnt of where the arguments are bad is remembered for
    ``bad_arguments_at`` (the rule that repairs them does not walk again)."""
    reading = _Walk()
    try:
        for message in messages:
            reading.message(message)
    except _Unmodelled:
        return None
    signals = reading.finish()
    memo.prime(bad_arguments_at, messages, sorted(reading.bad))
    return signals


def primed(state: WalkState) -> dict[Callable[[list[Any]], Any], Any]:
    """What a walk that ended in ``state`` knows for the pipeline run over the list it read
    (``run_rules(primed=...)``): where the arguments are bad."""
    return {bad_arguments_at: sorted(state.bad)}


@memo.per_run
def bad_arguments_at(messages: list[Any]) -> list[int]:
    """The indices of the assistants with a call whose ``arguments`` is not a string holding a
    JSON object (as orjson reads it). A walk gives the answer (``scan``, ``primed``): this
    reads the list only when the list is not the one walked (a rule changed it)."""
    found: list[int] = []
    for index, message in enumerate(messages):
        if type(message) is not dict or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if type(calls) is not list:
            continue
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            if type(function) is not dict:
                continue
            raw = function.get("arguments")
            if type(raw) is not str or not object_text(raw):
                found.append(index)
                break
    return found


def walk(
    messages: list[Any], state: WalkState | None = None
) -> tuple[frozenset[str] | None, WalkState | None]:
    """``scan`` of the messages an earlier walk read (up to ``state``) followed by ``messages``,
    and the state after them, to go on from with the messages a later request adds
    (proxy/relay/prefix.py). ``walk(b, walk(a)[1])`` gives the signals of ``scan(a + b)``, exactly:
    a state holds all the walk carries from one message to the next. ``(None, None)`` for a
    shape the walk does not model."""
    reading = _Walk(state)
    try:
        for message in messages:
            reading.message(message)
    except _Unmodelled:
        return None, None
    after = reading.state()
    return reading.finish(), after


def _content(found: set[str], content: Any, role: str) -> bool | None:
    """Record a non-string content of a message that is no assistant with calls (``None``: a
    content type the walk does not model)."""
    if content is None or content is _ABSENT:
        found.add(NULL + role)
    elif type(content) is list:
        found.add(LIST_CONTENT)
    elif type(content) is dict:
        found.add(DICT_CONTENT)
    else:
        return None
    return True


def _call_content(found: set[str], message: dict[str, Any], content: Any) -> bool:
    """Record the empty or list content of an assistant with calls (``False``: a content type
    the walk does not model)."""
    if content is _ABSENT:
        found.add(CALL_EMPTY + "absent")
    elif content is None:
        found.add(CALL_EMPTY + "null")
    elif content == "":
        found.add(CALL_EMPTY + "empty_string")
    elif type(content) is list:
        found.add(LIST_CONTENT)
        if not has_content(message):
            found.add(CALL_EMPTY + ("empty_list" if content == [] else "empty_parts"))
    elif type(content) is dict:
        found.add(DICT_CONTENT)
    else:
        return False
    return True
