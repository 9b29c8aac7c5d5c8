"""One walk over the messages that tells which rules may have work: the clean path's only pass.

Every rule's own prescan answers "is there anything for me here?" with a walk of the whole list,
so a clean 500-message request used to be walked some fifteen times. ``scan`` walks it once and
returns the *signals* it saw: a set of short names for the shapes some rule acts on (a
``developer`` role, a tool-call id used twice, arguments that are not a JSON object, a list
content, ...). A rule declares the signals that can wake it (``Rule.wakes``, from its options);
the pipeline skips a rule none of whose signals is set, and runs the rest as before. A clean body
sets none, so it costs one walk and one set intersection per rule.

Soundness is the contract: whenever a rule would change a list, ``scan`` sets one of the signals
that rule declares. ``scan`` may over-report (a rule it wakes then finds nothing in its own
prescan), never under-report; anything it does not model (a non-object message or call, a
non-string role, an odd content type) makes it return ``None``, and then every rule runs in full.
The property tests hold every rule of every profile to it (tests/rules/test_scan.py). The
signals describe the list as the client sent it: once a rule has changed the list, the pipeline
stops trusting them and every later rule runs its own prescan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from rules.chat.message_fields import has_content

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


@dataclass(frozen=True, slots=True)
class Signals:
    """A rule's ``wakes`` that does not depend on its options: a plain object, so a plan can be
    pickled for the worker processes big bodies are repaired in (a lambda cannot)."""

    names: frozenset[str]

    def __call__(self, options: Mapping[str, Any]) -> frozenset[str]:
        return self.names


def on(*names: str) -> Signals:
    """The ``wakes`` of a rule that may act whenever one of ``names`` is set."""
    return Signals(frozenset(names))


def scan(messages: list[Any]) -> frozenset[str] | None:
    """The signals ``messages`` sets, or ``None`` for a shape the walk does not model."""
    found: set[str] = set()
    ids: set[str] = set()
    arguments: list[str] = []
    calls: list[Any] = []  # the calls of the block being read
    k = n = 0  # results read in call order so far, calls in the block
    after_assistant = False
    for message in messages:
        if type(message) is not dict:
            return None
        role = message.get("role")
        if not message.keys() <= PLAIN_KEYS:
            found.add(KEYS)
        content = message.get("content", _ABSENT)
        if role != "assistant" and "tool_calls" in message:
            found.add(KEYS)  # calls where no role has them: the key rules read them anyway
        if role == "tool":
            after_assistant = False
            rid = message.get("tool_call_id")
            if k < n and type(rid) is str and rid and calls[k].get("id") == rid:
                k += 1
            else:
                found.add(UNPAIRED)
            if type(content) is not str and _content(found, content, "tool") is None:
                return None
            continue
        if k != n:
            found.add(UNPAIRED)
        k = n = 0
        if role == "assistant":
            if after_assistant:
                found.add(ADJACENT_ASSISTANTS)
            after_assistant = True
            listed = message.get("tool_calls", _ABSENT)
            if listed is _ABSENT or listed is None or listed == []:
                # no calls (`tool_calls` null or [] is a defect of its own, and then the
                # message reads as one without calls to every content rule)
                if listed is not _ABSENT:
                    found.add(EMPTY_TOOL_CALLS)
                if type(listed) is list:
                    calls, n = listed, 0  # a block of no call: a tool message after it is stray
                if not (type(content) is str and content) and not (
                    content is not _ABSENT and has_content(message)
                ):
                    found.add(EMPTY_ASSISTANT)
                if type(content) is not str and _content(found, content, role) is None:
                    return None
                continue
            if type(listed) is not list:
                return None
            for call in listed:
                if type(call) is not dict:
                    return None
                if not call.keys() <= PLAIN_CALL_KEYS:
                    found.add(CALL_KEYS)
                if call.get("type") != "function":
                    found.add(CALL_TYPE)
                cid = call.get("id")
                if type(cid) is not str or not cid:
                    found.add(UNPAIRED)
                elif cid in ids:
                    found.add(DUP_CALL_ID)
                else:
                    ids.add(cid)
                function = call.get("function")
                if type(function) is not dict:
                    return None
                raw = function.get("arguments")
                if type(raw) is str:
                    arguments.append(raw)
                else:
                    found.add(BAD_ARGUMENTS)
            calls, n = listed, len(listed)
            if (type(content) is not str or not content) and not _call_content(
                found, message, content
            ):
                return None
            continue
        after_assistant = False
        if type(role) is not str:
            return None
        if role not in ROLES:
            found.add(ODD_ROLE)
            found.add(ROLE + role)
        if type(content) is not str and _content(found, content, role) is None:
            return None
    if k != n:
        found.add(UNPAIRED)
    if BAD_ARGUMENTS not in found:
        for raw in arguments:
            try:
                if type(orjson.loads(raw)) is dict:
                    continue
            except orjson.JSONDecodeError:
                pass
            found.add(BAD_ARGUMENTS)
            break
    return frozenset(found)


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
