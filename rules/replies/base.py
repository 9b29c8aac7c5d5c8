"""The contract of the reply rules: rules over what the upstream sends back, one choice at a
time, streamed or not.

A reply rule sees a chat completion's choice as a sequence of ``Step``s: the deltas of a
stream, in order (a whole message is one step), each with the choice's ``finish_reason`` when
it carries one. Its ``fix`` (one per choice and response) takes each step and returns the steps
to pass on: the same ``Step`` object when it changes nothing (the relay then sends the upstream's
bytes as they came), else steps of its own, possibly none while it holds text back. ``end``
releases what it holds when the stream ends without a ``finish_reason``.

The rules of a response share one ``ChoiceState`` per choice: what the upstream's own tool calls
were, how many calls the rules made, so that a made call takes the next free ``index`` and the
``finish_reason`` follows the calls chatmend made. Each rewrite is a ``Change`` (ids, names,
counts and sizes; never argument values or text unless ``log_content``), like the request
rules'.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

import orjson

from rules.engine.base import Change, Option, RuleContext, Safety

#: A choice's delta (a stream event's ``choices[i].delta``) or, for a whole response, its
#: ``message``: ``content``, ``tool_calls``, ``reasoning_content``, ``role`` ...
Delta = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Step:
    """One piece of a choice: its delta, and its ``finish_reason`` if this piece ends it."""

    delta: Delta
    finish: str | None = None


#: The action of a held block let go as the text it was: recorded (the log says why a block was
#: not made a call), but no change: the client gets the upstream's text.
LEFT_AS_TEXT: Final = "left_as_text"


def changed(changes: list[Change]) -> bool:
    """Whether ``changes`` (one choice's) hold a change the client would see: a choice with none
    passes as it came, whatever the rules held and let go on the way."""
    return any(change.action != LEFT_AS_TEXT for change in changes)


@dataclass(slots=True)
class ChoiceState:
    """What the rules of one response know about one of its choices."""

    index: int
    #: A stream's deltas (``False``: one whole message, whose calls carry no ``index``).
    stream: bool = True
    #: The upstream's own tool-call indices seen so far in this choice (a made call never
    #: takes one).
    upstream_calls: set[int] = field(default_factory=set)
    #: Calls made by the rules (from text): their count.
    made: int = 0
    changes: list[Change] = field(default_factory=list)
    #: A new tool-call id, OpenAI's shape (tests give a counter).
    new_id: Callable[[], str] = field(default=lambda: "call_" + secrets.token_hex(12))

    def next_index(self) -> int:
        """The ``index`` the next made call takes: after every call of the choice so far."""
        return max(self.upstream_calls, default=-1) + 1 + self.made


class ChoiceFix:
    """One rule's work on one choice: ``feed`` each step in order, ``end`` at the end."""

    def feed(self, step: Step) -> list[Step]:
        return [step]

    def end(self) -> list[Step]:
        return []


#: ``fix(request, ctx, state)``: the rule's fix for one choice of a response to ``request``,
#: or ``None`` when the rule has nothing to do for that request (it is not armed).
Fixer = Callable[[Mapping[str, Any], RuleContext, ChoiceState], ChoiceFix | None]

#: Byte strings an answer's JSON must hold for a rule to have anything to do, as a JSON
#: writer writes them (``in_text``, ``as_key``): an answer that holds none of them, in a
#: ``plain`` body, is one the rule passes as it came.
Needles = tuple[bytes, ...]


def in_text(text: str) -> bytes:
    """``text`` as it is written inside a JSON string (its quotes off): ``"`` and ``\\`` and
    control characters escaped, anything else as its UTF-8."""
    return orjson.dumps(text)[1:-1]


def as_key(name: str) -> bytes:
    """``name`` as a JSON key or string value, its quotes on."""
    return orjson.dumps(name)


#: A ``\u`` or ``\/`` escape (one pass: the engine looks for the backslash first, where
#: ``b"\\u" in body`` steps through the body two bytes at a time).
_ESCAPE: Final = re.compile(rb"\\[u/]")


def plain(body: bytes) -> bool:
    """Whether every string of the JSON ``body`` is written one way only, so that a needle
    found nowhere in its bytes is in none of its strings: no ``\\uXXXX`` escape (Go writes
    ``<`` as ``\\u003c``, Python's ``ensure_ascii`` any non-ASCII character, any writer may
    escape any character) and no ``\\/``. Then each character has one written form (its
    UTF-8, or ``\\"``, ``\\\\``, ``\\n`` ...), and a string holding a text holds its
    written form. A false ``False`` (a ``\\u`` that is an escaped backslash and a ``u``)
    only costs the answer a full read."""
    return _ESCAPE.search(body) is None


@dataclass(frozen=True, slots=True)
class Search:
    """Needles made ready once (per plan) to be searched in many answers: grouped by their
    first byte, so that a body without that byte (one ``memchr``) skips the group: most
    openers begin with ``<``, which plain prose seldom holds."""

    groups: tuple[tuple[bytes, Needles], ...]

    @classmethod
    def of(cls, needles: Needles) -> Search:
        groups: dict[bytes, list[bytes]] = {}
        for needle in needles:
            found = groups.setdefault(needle[:1], [])
            if needle not in found:
                found.append(needle)
        return cls(tuple((first, tuple(found)) for first, found in groups.items()))

    def found(self, body: bytes) -> bool:
        """Whether ``body`` holds one of the needles."""
        for first, needles in self.groups:
            if first in body:
                for needle in needles:
                    if needle in body:
                        return True
        return False


def may_act(search: Search | None, body: bytes) -> bool:
    """Whether rules whose needles are ``search`` (``None``: one of them cannot say) may have
    anything to do on the JSON answer ``body``."""
    return search is None or search.found(body) or not plain(body)


def cannot_say(ctx: RuleContext) -> Needles | None:
    """The needles of a rule that does not declare them: ``None``, every answer is read."""
    return None


@dataclass(frozen=True, slots=True)
class ReplyRule:
    """A named, toggleable repair of a response: the same record fields as a request rule
    (``rules.engine.base.Rule``: docs, safety, default, options), with ``fix`` in place of
    ``apply``. ``arms`` says, from the request alone, whether it may act on the response (the
    relay reads a response it does not arm for as it always did). ``needles`` says, from its
    context, what a whole answer's bytes must hold for it to have anything to do (``Needles``;
    ``()``: it acts only on what another rule did), or ``None`` (the default): it cannot say,
    and every answer is read."""

    name: str
    summary: str
    defect: str
    repair: str
    safety: Safety
    default: bool
    fix: Fixer
    arms: Callable[[Mapping[str, Any], RuleContext], bool]
    options: tuple[Option[Any], ...] = ()
    needles: Callable[[RuleContext], Needles | None] = cannot_say

    def context(
        self, options: Mapping[str, Any] | None = None, *, log_content: bool = False
    ) -> RuleContext:
        return RuleContext(options or {}, log_content)

    @property
    def classes(self) -> tuple[Safety, ...]:
        """The classes its changes can have (a reply rule declares one)."""
        return (self.safety,)

    @property
    def worst(self) -> Safety:
        return self.safety


class _Read:
    """The ``tools`` list ``declared_tools`` read last, and what it declared. A request's
    reply rules ask for it several times (each rule's ``arms``, then each ``fix``), and a
    parsed body is never written to (rules never mutate their input), so the same list
    declares the same tools. The list itself is held, not its ``id``: another list made at
    the address of a freed one is never taken for it. One list is held at a time, with what it
    declared in one tuple (one read and one write: never one list's tools for another's)."""

    last: tuple[object, Mapping[str, Mapping[str, Any]]] = (None, MappingProxyType({}))


def declared_tools(request: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    """The function tools a chat request declared: name -> its parameters schema (read-only:
    the next call for the same list gets the same mapping)."""
    tools = request.get("tools")
    last_tools, last_declared = _Read.last
    if tools is last_tools and tools is not None:
        return last_declared
    declared: dict[str, Mapping[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        declared[function["name"]] = parameters if isinstance(parameters, dict) else {}
    found = MappingProxyType(declared)
    if isinstance(tools, list):
        _Read.last = (tools, found)
    return found


def declares_tools(request: Mapping[str, Any]) -> bool:
    """Whether a chat request declared a function tool: ``bool(declared_tools(request))``,
    read up to its first tool (arming asks only this; the rules' fixes read the whole list
    when an answer comes that they may change)."""
    tools = request.get("tools")
    if not isinstance(tools, list):
        return False
    last_tools, last_declared = _Read.last  # one read (the class's docstring)
    if tools is last_tools:
        return bool(last_declared)
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return True
    return False


def calls_allowed(request: Mapping[str, Any]) -> bool:
    """Whether the request lets the model call tools: it declared some, and ``tool_choice``
    is not ``"none"``."""
    return request.get("tool_choice") != "none" and declares_tools(request)
