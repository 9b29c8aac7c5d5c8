"""Verified-prefix reuse: a request that re-sends the last one of its session plus a turn is
parsed, and walked, only for what it adds.

An agent re-sends its whole history on every request. For each session (credential scope,
route, API) the cache keeps what the last body established: the bytes of that body up to the
``]`` that closes its list (``messages``, or ``input``), the list as parsed, and the chat walk's
state after it (``rules.chat.scan.walk``). A new body that starts with those bytes (one
``memcmp``) is parsed from there on only, and the walk goes on from its state: the rules then
run over a list equal to what a full parse gives (the cached messages and the new ones), with
the signals a full walk gives. What the rules do is unchanged: every rule still runs over the
whole list, the same way; only the parse and the walk of the history are not paid again.

Why a hit parses to the same thing as the whole body (``PrefixCache.read``):

- the cached bytes ``P`` are ``H + "[" + C`` where ``C`` is a sequence of complete JSON values,
  separated by commas and whitespace, that parses to the cached messages: checked once, when
  the entry is made, and for each message a later body adds. Either ``C`` is, byte for byte,
  orjson's writing of those messages (compared: the bytes ``JSON.stringify`` and httpx write),
  or each of its values was read by the standard library's scanner from the body orjson
  parsed (valid JSON) and equals the message parsed there (any other writing: ``json.dumps``'
  spacing, Go's and .NET's escapes, indentation). A value's bytes parse the same wherever they
  stand;
- the new body is ``P + R`` with ``R`` starting, after any whitespace, with ``,`` followed by
  something other than ``]`` (more messages: ``[a,]`` is not JSON, though ``H' + "[" + "]"``
  is) or with ``]`` (none);
- the cache parses ``H' + "[" + R`` from after that comma (or from the ``]``), where ``H'`` is
  ``H`` with the list's key written as ``"\\u0001"``: a key only that spelling can write,
  absent from ``H`` and ``R`` (checked), so when the parse holds it as a top-level key, the
  list's key in the body is a top-level key at the same place, its array holds the cached
  messages then the parsed ones, and every other top-level key parses the same in both; a body
  holding the list's key twice is not reused (the parse then holds it too).

The same holds from an earlier message boundary of the entry (it keeps its last three): a client
that rewrites one of its last messages (Claude Code moves its ``cache_control`` marker to the
newest turn) is read from the boundary before it, and its list is then walked whole. A repaired
body is written from its ``Layout``: the messages no rule replaced are copied from the body,
where the entry says they are (a run of them at once when the list is orjson's writing), and
the rest is serialized, as rules/providers/writing.py writes a body the cache holds nothing of;
a resumed run (rules/engine/resume.py) copies the previous request's repaired bytes for the
messages before its new turn.

Anything else is a miss: the body is parsed whole, as without the cache. A body whose list's key
is not written plainly, or whose first list of that key is a nested one, makes no entry, and is
parsed whole each time. Memory is bounded by ``max_bytes`` (least recently used first, and
entries older than ``ttl`` seconds are dropped); kept in process only.
"""

from __future__ import annotations

import bisect
import re
import sys
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from proxy.config import PrefixConfig
from rules.chat.scan import WalkState
from rules.engine.base import RequestFacts
from rules.engine.pipeline import NOT_WALKED, Carried, Walked
from rules.providers.apis import Api
from rules.providers.sanitize import PlanSource, Sanitized, sanitize_body
from rules.providers.writing import (
    Copy,
    Spans,
    assemble,
    copied,
    dumped,
    each_item,
    find_list,
    nested,
    read_items,
    whole,
)

#: The key the list's key is replaced with in the head: U+0001 has one JSON spelling only.
SENTINEL: Final = "\x01"
_SENTINEL: Final = b'"\\u0001"'
#: Candidates checked before the body's place among a session space's prefixes (a session's
#: own prefix is its nearest predecessor, but for longer entries that extend it: forks of the
#: same history, which a hit drops).
_NEAREST: Final = 8
#: Message boundaries kept before the end of an entry's list (``_Entry.ends``).
_STEPS_BACK: Final = 3
#: A space whose body was not orjson's writing tries again every so many misses; so many such
#: spaces are remembered (``PrefixCache._still_loose``).
_RETRY: Final = 32
_LOOSE_SPACES: Final = 4096
#: Misses of a space whose lists are not orjson's writing since its last hit, past which its
#: misses read their list one time in ``_RETRY`` only, drawn (``PrefixCache._worth_reading``).
_UNREAD: Final = 2
#: What an entry is charged, so that ``max_bytes`` bounds what the cache really holds (traced
#: allocations; tests/proxy/test_prefix.py measures it over agent sessions and bodies made of
#: tiny containers): each byte of its prefix once, and for the objects parsed from its list,
#: ``CHARGE_ASCII`` more per byte of ASCII (one byte a character) or ``CHARGE_WIDE`` more per
#: byte once any byte is not, or an escape writes a character that is not (a string with one
#: character past U+FFFF takes four bytes a character, and keeps its UTF-8 once orjson wrote
#: it), and ``CHARGE_PER_VALUE`` for each
#: ``,``, ``[`` and ``{`` (every value in a list, and every key and value in an object, follows
#: one of them: a dict, a list, a string or a number object, the entry that holds it, and a
#: walk state's share; one in text is charged too). Counted over the bytes an entry adds only,
#: never again over what it keeps (``bytes.translate``: about 1 ms per MB, on a miss).
CHARGE_ASCII: Final = 1
CHARGE_WIDE: Final = 6
CHARGE_PER_VALUE: Final = 192
_VALUE_MARKS: Final = b",[{"
#: An escape of a character past U+007F (``\\u0080`` on): a string that holds it is not ASCII.
_WIDE_ESCAPE: Final = re.compile(rb"\\u(?!00[0-7])")
#: Bytes charged per message (its place in the body, ``Layout``, and in the list) and per entry
#: (the entry itself, its place in the spaces and the LRU, the walk's fixed state).
BOUND_BYTES: Final = 48
ENTRY_BYTES: Final = 4096
#: What a kept run (``PrefixCache.keep``) is charged per step's mark, per change and per
#: message of a list of its own (a pointer, the objects being the entry's or charged as made).
MARK_BYTES: Final = 96
CHANGE_BYTES: Final = 512
POINTER_BYTES: Final = 8
#: And per key of what the stash recalled for it, which its steps hold (``RequestFacts``: the
#: key asked for, its slot in ``recalled`` and ``wanted``), besides the recalled values.
FACT_BYTES: Final = 176
SET_ENTRY_BYTES: Final = 64
_SPACES: Final = (b" ", b"\t", b"\n", b"\r")
_SPACE_RUN: Final = re.compile(rb"[ \t\n\r]*")
#: A walk that goes on from a state: ``rules.chat.scan.walk``.
Walk = Callable[[list[Any], Any], tuple[frozenset[str] | None, Any]]


@dataclass(slots=True)
class _Entry:
    space: Hashable
    #: The body up to (not including) the ``]`` closing its list.
    prefix: bytes
    #: The body before its list's key, then ``"\u0001":[``.
    head: bytes
    #: Where the list's first item starts in the body.
    first: int
    #: The list as parsed (shared with the requests that reuse it: never written).
    items: list[Any]
    #: The walk's state after ``items`` (``None``: the API has no walk, or it stopped).
    state: WalkState | None
    charge: int
    expires: float
    #: Where each item starts in the body, then one past the ``]``: worked out when a
    #: repaired body is first written from the entry (``Layout``), then carried on.
    bounds: list[int] | None = None
    #: The last few message boundaries, ``(length of the prefix, messages before it)``,
    #: ascending, the whole prefix last: a client that rewrites its last messages (Claude Code
    #: moves its ``cache_control`` marker to the newest turn) still reuses what comes before.
    ends: tuple[tuple[int, int], ...] = ()
    #: What the objects parsed from the list are charged (``parsed_charge`` of its bytes).
    parsed: int = 0
    #: The body's bytes after its list's last item: the ``]`` (and any whitespace before it),
    #: then its other fields, when they come after.
    after: bytes = b""
    #: Where each item starts and ends in the body, when the list is not written as orjson
    #: writes it (``json.dumps``' spacing, Go's and .NET's escapes, indentation: the client's
    #: own writing, its items found by reading the JSON); ``None`` when it is (``JSON.stringify``,
    #: httpx: its items' bytes are orjson's own, where ``bounds`` says). Either way a repaired
    #: body copies the client's bytes of each message no rule replaced.
    spans: Spans | None = None
    #: What the API's walk knows of ``items`` (a body that adds nothing is not walked again).
    walked: Walked | None = None
    #: What the rules' run over this entry's list left for the next request
    #: (rules/engine/resume.py; ``PrefixCache.keep``), and what it is charged.
    carried: Carried | None = None
    carried_charge: int = 0
    #: No object written in ``prefix`` that carries a ``signature`` repeats a key: the check of
    #: a signed API's rewritten body read them (rules/providers/sanitize.py ``_write``), and a
    #: later body that starts with the same bytes holds the same objects there.
    signed_checked: bool = False

    @property
    def own(self) -> bool:
        """Whether the list is written as orjson writes it."""
        return self.spans is None


@dataclass(frozen=True, slots=True)
class Reading:
    """A body as the cache read it."""

    #: ``hit`` (parsed from the cached prefix on), ``miss`` (parsed whole), ``skip`` (not
    #: parsed here: off, or not a JSON object; the rules read it their own way).
    outcome: str
    #: The body parsed (``None`` for ``skip``): the caller's to write.
    payload: dict[str, Any] | None = None
    #: What the API's walk knows of the list, for ``run_rules(walked=...)``.
    walked: Walked = NOT_WALKED
    #: Bytes of the body not parsed again.
    reused: int = 0
    #: Where the body's list's messages are, when an entry holds it (``Layout``).
    layout: Layout | None = None
    #: What the previous request of the session left for this one to resume from, when this
    #: body is that one's plus messages, with the same bytes around its list.
    resume: Carried | None = None


SKIP: Final = Reading("skip")


class Layout:
    """Where each message of a body's list is written (its entry's ``bounds`` or ``spans``). A
    repaired body is written by copying the messages no rule replaced from the body, and
    serializing only the others and the top-level fields (rules/providers/writing.py): for a
    list in orjson's writing, byte for byte ``orjson.dumps(payload)``, since each copied
    message's bytes are its own ``orjson.dumps`` (compared when the entry was made).

    ``tail``: for a body read from a whole entry's prefix, how many messages that prefix held,
    where its list ends in the body, and where each message added after it starts (then one
    past the ``]``; in another writing than orjson's, the entry's ``spans`` say): a resumed
    list (``write_spanned``) copies the previous request's repaired bytes for the messages
    before, and the body's own for the new ones no rule replaced.

    ``checked``: where the body's list's first item starts and how long a prefix of it an
    earlier body's signed-duplicates check read (the entry it was read from), if one did."""

    __slots__ = ("checked", "entry", "made", "tail")

    def __init__(
        self,
        entry: _Entry,
        tail: tuple[int, int, list[int]] | None = None,
        checked: tuple[int, int] | None = None,
    ) -> None:
        self.entry = entry
        self.tail = tail
        self.checked = checked
        #: What the objects of the messages serialized by the last write are charged.
        self.made = 0

    def unchecked(self, raw: bytes) -> bytes:
        """What of ``raw`` the signed-duplicates check has still to read: ``raw`` without the
        messages in the prefix an earlier body's check read (a JSON text with every other
        object of ``raw``, the top-level one included), else ``raw`` whole."""
        if self.checked is None:
            return raw
        first, length = self.checked
        at = _past_space(raw, length)
        after = at + 1 if raw[at : at + 1] == b"," else length
        return b"".join((memoryview(raw)[:first], memoryview(raw)[after:]))

    def signed_checked(self) -> None:
        """The body this layout was made for holds no signed object that repeats a key: so
        does its entry's prefix, for the next body that starts with it."""
        self.entry.signed_checked = True

    def write(self, raw: bytes, payload: Mapping[str, Any], field: str) -> bytes:
        """``orjson.dumps(payload)``, where ``payload[field]`` holds the messages of ``raw`` a
        rule kept (the very objects) and the ones it made."""
        return self.write_spanned(raw, payload, field, None)[0]

    def write_spanned(
        self,
        raw: bytes,
        payload: Mapping[str, Any],
        field: str,
        closed: tuple[bytes | memoryview | None, int, int] | None,
    ) -> tuple[bytes, int, int]:
        """``write``, and where the list's items are in the bytes written (``-1, -1``: not
        known). ``closed``: the list's first messages are the previous request's repaired ones,
        written as the bytes given (``None``: the body's own, up to ``tail``'s end), so many of
        them, made from so many of the body's messages (rules/providers/sanitize.py)."""
        listed = payload[field]
        self.made = 0
        pieces = None if type(listed) is not list else self._pieces(raw, listed, closed)
        if pieces is None:
            return orjson.dumps(payload), -1, -1
        return assemble(payload, field, pieces)

    def _pieces(
        self,
        raw: bytes,
        listed: list[Any],
        closed: tuple[bytes | memoryview | None, int, int] | None,
    ) -> list[bytes | memoryview] | None:
        view = memoryview(raw)
        entry = self.entry
        spans = entry.spans  # the client's own writing: each message it kept is copied alone
        if closed is None:
            if spans is not None:
                return self._copied(listed, entry.items, each_item(raw, spans))
            bounds = _bounds(entry)
            if bounds is None:  # written whole: what the rules made is charged (``keep``)
                kept = {id(item) for item in entry.items}
                self.made = sum(
                    parsed_charge(nested([[m]], 2)) for m in listed if id(m) not in kept
                )
                return list(whole(listed))
            return self._copied(listed, entry.items, _runs(view, bounds))
        before, out_count, in_count = closed
        tail = self.tail
        if tail is None or tail[0] != in_count or len(listed) < out_count:
            return None
        if spans is None:  # orjson's writing: a run of kept messages is one piece
            before = view[entry.first : tail[1]] if before is None else before
            copy = _runs(view, tail[2])
        elif before is None:  # the previous request's list went as it came: written whole
            return self._pieces(raw, listed, None) if out_count == in_count else None
        else:
            copy = each_item(raw, spans, in_count)
        pieces = self._copied(listed[out_count:], entry.items[in_count:], copy)
        return [before, *pieces] if out_count else pieces

    def _copied(self, listed: list[Any], items: list[Any], copy: Copy) -> list[bytes | memoryview]:
        pieces, made = copied(listed, items, copy)
        self.made = sum(map(parsed_charge, made))
        return pieces


def _runs(view: memoryview, bounds: list[int]) -> Copy:
    """``Copy`` for a list in orjson's writing, whose items start at ``bounds`` (then one past
    its ``]``): a run of items is one piece, their ``,`` between them."""

    def copy(a: int, b: int) -> list[bytes | memoryview]:
        return [view[bounds[a] : bounds[b] - 1]]

    return copy


def _last_ends(items: list[Any], length: int) -> tuple[tuple[int, int], ...]:
    """The boundaries before each of the last messages of ``items``, whose list is orjson's
    writing and ends at ``length``: ``_Entry.ends``."""
    ends = [(length, len(items))]
    for count in range(len(items) - 1, max(0, len(items) - 1 - _STEPS_BACK), -1):
        length -= len(dumped([[items[count]]], 2) or b"") + 1
        ends.append((length, count))
    return tuple(reversed(ends))


def _orjsons(items: list[Any]) -> list[bytes] | None:
    """Each of ``items`` as orjson writes it in a list (``None``: what orjson cannot write)."""
    parts = [dumped([[item]], 2) for item in items]
    return None if None in parts else parts  # type: ignore[return-value]


def _past_space(body: bytes, at: int) -> int:
    """Where the first byte at or after ``at`` that is not JSON whitespace is."""
    if body[at : at + 1] not in _SPACES:
        return at  # the common case
    found = _SPACE_RUN.match(body, at)  # C speed, as orjson's parse of it (a padded body)
    return at if found is None else found.end()


def _bounds(entry: _Entry) -> list[int] | None:
    """``entry.bounds``, worked out the first time: each message's own ``orjson.dumps`` length
    (their bytes are those, as the entry's list is orjson's writing)."""
    if not entry.own:
        return None  # its bytes are not orjson's: never copied
    if entry.bounds is None:
        bounds = [entry.first]
        for item in entry.items:
            bounds.append(bounds[-1] + len(orjson.dumps(item)) + 1)
        if bounds[-1] != len(entry.prefix) + 1:
            return None  # cannot be: the entry's list was compared with orjson's writing
        entry.bounds = bounds
    return entry.bounds


class _Space:
    """One session space's prefixes, sorted: a body's own prefix is its nearest predecessor.
    (Two parallel lists: a prefix is never hashed, only compared.)"""

    __slots__ = ("entries", "keys")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.entries: list[_Entry] = []

    def find(self, body: bytes) -> tuple[_Entry | None, list[_Entry]]:
        """The entry whose prefix ``body`` starts with, and the entries sorted between them:
        each extends that prefix (sorted between a string and one it prefixes, a string starts
        with it), with a history this body does not follow (a fork, an older branch)."""
        if len(self.keys) == 1:  # one session: its prefix or none (one memcmp, not two)
            return (self.entries[0], []) if body.startswith(self.keys[0]) else (None, [])
        at = bisect.bisect_right(self.keys, body)
        for j in range(at - 1, max(-1, at - 1 - _NEAREST), -1):
            if body.startswith(self.keys[j]):
                return self.entries[j], self.entries[j + 1 : at]
        return None, []

    def near(self, body: bytes) -> tuple[_Entry, tuple[int, int]] | None:
        """The entry, and the boundary of it, that ``body`` starts with when it starts with no
        entry's whole prefix: one of its last messages rewritten. Of all the prefixes, the one
        sharing the most with ``body`` is a neighbour of its place in the order."""
        at = bisect.bisect_right(self.keys, body)
        for entry in self.entries[max(0, at - 1) : at + 1]:
            earlier = entry.ends[:-1]
            if not earlier or not body.startswith(entry.prefix[: earlier[0][0]]):
                continue  # not even its earliest: another session (one copy, not three)
            for end in reversed(earlier):
                if body.startswith(entry.prefix[: end[0]]):
                    return entry, end
        return None

    def add(self, entry: _Entry) -> _Entry | None:
        """Add ``entry``; the entry it replaces (same prefix), if any."""
        at = bisect.bisect_left(self.keys, entry.prefix)
        if at < len(self.keys) and self.keys[at] == entry.prefix:
            old, self.entries[at] = self.entries[at], entry
            return old
        self.keys.insert(at, entry.prefix)
        self.entries.insert(at, entry)
        return None

    def remove(self, entry: _Entry) -> None:
        entries = self.entries
        if len(entries) <= _NEAREST:  # found by identity: no prefix compared with itself
            at = next((at for at, kept in enumerate(entries) if kept is entry), len(entries))
        else:
            at = bisect.bisect_left(self.keys, entry.prefix)
        if at < len(self.entries) and self.entries[at] is entry:
            del self.keys[at]
            del self.entries[at]


class PrefixCache:
    """The cache of one process (``read``), bounded by ``max_bytes`` and ``ttl``."""

    def __init__(
        self, config: PrefixConfig | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config or PrefixConfig()
        self._clock = clock
        self._spaces: dict[Hashable, _Space] = {}
        self._lru: OrderedDict[int, _Entry] = OrderedDict()
        self.charged = 0
        #: Reads by outcome, and bytes not parsed again, since start.
        self.counts: dict[str, int] = {"hit": 0, "miss": 0, "skip": 0}
        self.reused_bytes = 0
        #: Spaces whose bodies were not orjson's writing, and the misses since (``_miss``).
        self._loose: OrderedDict[Hashable, int] = OrderedDict()
        #: Spaces whose lists, not orjson's writing, missed since their last hit, and how often;
        #: kept apart from the entries, which the bound may drop (``_worth_reading``).
        self._unread: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()

    @property
    def entries(self) -> int:
        return len(self._lru)

    def read(self, space: Hashable, api: Api, body: bytes) -> Reading:
        """``body`` of an ``api`` request in ``space`` (a session's credential scope and
        route), parsed from its cached prefix on when one matches, else whole; the entry for
        the next request of the session is made (or replaced) here."""
        if not self.config.enabled:
            return SKIP
        self._expire()
        place = self._spaces.get(space)
        entry, forks = place.find(body) if place is not None else (None, [])
        for fork in forks:  # left behind by this session: they would crowd its place out
            self._drop(fork)
        reading = self._hit(entry, api, body) if entry is not None else None
        if entry is None and place is not None:
            near = place.near(body)
            reading = None if near is None else self._hit(near[0], api, body, near[1])
        if reading is None:
            reading = self._miss(space, api, body)
        elif space in self._unread:  # its count starts over; its draws go on
            self._unread[space] = (0, self._unread[space][1])
        self.counts[reading.outcome] += 1
        self.reused_bytes += reading.reused
        return reading

    def configure(self, config: PrefixConfig) -> None:
        """Take a reloaded ``prefix_cache`` (off: everything held is dropped)."""
        self.config = config
        if not config.enabled:
            self.clear()
        self._fit()

    def clear(self) -> None:
        self._spaces.clear()
        self._lru.clear()
        self._loose.clear()
        self._unread.clear()
        self.charged = 0

    # The two ways a body is read ------------------------------------------------------------

    def _hit(
        self, entry: _Entry, api: Api, body: bytes, end: tuple[int, int] | None = None
    ) -> Reading | None:
        """``body`` read from ``entry``'s prefix on (or from its boundary ``end``: its
        messages before it, then the body's own), or ``None`` if that cannot be trusted."""
        length, count = (len(entry.prefix), len(entry.items)) if end is None else end
        if body.find(_SENTINEL, length) >= 0:
            return None
        at = _past_space(body, length)
        mark = body[at : at + 1]  # what follows the prefix: no copy of the rest
        if mark == b",":
            after = _past_space(body, at + 1)
            if body[after : after + 1] == b"]":
                return None  # a comma and no item: not JSON (the parse after it would be)
            text = b"".join((entry.head, memoryview(body)[at + 1 :]))
        elif mark == b"]":
            text = b"".join((entry.head, memoryview(body)[at:]))
        else:
            return None
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if type(parsed) is not dict or api.field in parsed:
            return None
        added = parsed.get(SENTINEL)
        if type(added) is not list:
            return None
        items = entry.items[:count] + added  # a new list: the cached one is never written
        payload = {(api.field if key == SENTINEL else key): value for key, value in parsed.items()}
        payload[api.field] = items
        if end is None and not added and entry.walked is not None:
            walked, state = entry.walked, entry.state  # the same list: what its walk knew
        elif end is None:
            walked, state = _walk(api, added, entry.state)
        else:  # no walk state is kept at an earlier boundary: the list is walked whole
            walked, state = _walk(api, items, None, whole=True)
        self._touch(entry)
        now: _Entry | None = entry
        tail = (count, length, [at + 1])
        if added or end is not None:
            extended = self._extend(
                entry, body, added, items=items, state=(state, walked), end=(length, count)
            )
            now, tail = (None, tail) if extended is None else extended
        if now is None:
            return Reading("hit", payload, walked, length)
        # The messages of the prefix are the entry's (the same bytes): checked if its were.
        checked = (entry.first, length) if entry.signed_checked and entry.first <= length else None
        resume = None
        if end is None and entry.carried is not None and _ends(body, len(now.prefix), entry.after):
            resume = entry.carried  # the same bytes around the list: the same other fields
        return Reading("hit", payload, walked, length, Layout(now, tail, checked), resume)

    def _miss(self, space: Hashable, api: Api, body: bytes) -> Reading:
        """``body`` parsed whole; an entry made if its list is written as orjson writes it."""
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return SKIP  # the rules read it their own way (surrogates, errors)
        if type(payload) is not dict:
            return SKIP
        items = payload.get(api.field)
        if type(items) is not list or not items:
            return Reading("miss", payload)
        walked, state = _walk(api, items, None, whole=True)
        if self._still_loose(space):
            return Reading("miss", payload, walked)
        found = _listed(body, api.field, items, lambda: self._worth_reading(space))
        if found is None:
            self._loosen(space)
            return Reading("miss", payload, walked)
        self._loose.pop(space, None)
        if found is _NOT_READ:
            return Reading("miss", payload, walked)
        at, start, ends, written, spans = found
        head = body[:at] + _SENTINEL + b":["
        length = ends[-1][0]
        entry = _Entry(space, body[:length], head, start + 1, items, state, 0, 0.0)
        entry.walked = walked
        entry.ends = ends
        entry.parsed = parsed_charge(written)
        entry.after = body[length:]
        entry.spans = spans
        made = self._add(entry)
        return Reading("miss", payload, walked, layout=None if made is None else Layout(made))

    def _still_loose(self, space: Hashable) -> bool:
        """Whether the space's bodies were found not to write their list's key plainly (or to
        hold a nested list of that key first), recently: their misses skip the search for the
        list and its reading (they would pay them on every request), but every ``_RETRY``-th."""
        misses = self._loose.get(space)
        if misses is None:
            return False
        self._loose[space] = misses + 1
        return (misses + 1) % _RETRY != 0

    def _worth_reading(self, space: Hashable) -> bool:
        """Whether to read a list that is not orjson's writing (about 5 µs a KB, where the
        comparison with orjson's is about 0.4): on a space's first two such misses since its
        last hit, then one time in ``_RETRY`` (its requests are each a conversation of their
        own, not a session's). Drawn, not counted: a session whose requests alternate with
        one-shot calls of its space would miss a count's every ``_RETRY``-th turn for ever.
        Drawn from the space's own sequence (``_next_draw``), not from one generator for all:
        another space's misses must not change which of this one's are read. A hit starts the
        count over, not the draws (a sequence started over at each hit would read the same
        misses after each, and never a session's that comes third to twenty-second): in a
        space whose sessions and one-shot calls alternate, the call after a hit is read (what
        reading cost on every miss before the count)."""
        unread, draw = self._unread.pop(space, (0, _FIRST_DRAW))
        unread, draw = unread + 1, _next_draw(draw)
        self._unread[space] = (unread, draw)
        if len(self._unread) > _LOOSE_SPACES:
            self._unread.popitem(last=False)
        return unread <= _UNREAD or (draw >> 32) % _RETRY == 0  # its high bits

    def _loosen(self, space: Hashable) -> None:
        self._loose[space] = 0
        self._loose.move_to_end(space)
        if len(self._loose) > _LOOSE_SPACES:
            self._loose.popitem(last=False)

    # Entries --------------------------------------------------------------------------------

    def _extend(
        self,
        entry: _Entry,
        body: bytes,
        added: list[Any],
        *,
        items: list[Any],
        state: tuple[WalkState | None, Walked],
        end: tuple[int, int],
    ) -> tuple[_Entry, tuple[int, int, list[int]]] | None:
        """Replace ``entry`` with one that ends where this body's list does (the messages it
        adds after ``entry``'s boundary ``end``, read from the body): the new entry, and its
        ``Layout.tail`` from ``end``. It stays orjson's writing if they are written as orjson
        writes them, else it is the client's own (``_Entry.own``). ``state``: the walk's state
        after ``items``, and what it knows of them."""
        length, count = end
        ends = [kept for kept in entry.ends if kept[1] <= count]
        parts = _orjsons(added) if entry.own else None
        written = b"]" if not parts else b"".join((b",", b",".join(parts), b"]"))
        own = parts is not None and body.startswith(written, length)
        bounds = None if entry.bounds is None or not own else entry.bounds[: count + 1]
        starts = [length + 1]
        spans = None
        if parts is not None and own:
            for part in parts:
                length, count = length + 1 + len(part), count + 1
                ends.append((length, count))
                starts.append(length + 1)  # where the next message would start
                if bounds is not None:
                    bounds.append(length + 1)
        else:  # any other writing: the new messages' places read from the body
            spans = _spans(entry, count)
            listed = dumped([added], 1) if parts is None else b"[" + b",".join(parts) + b"]"
            found = None if listed is None else read_items(body, length, listed, first=False)
            if spans is None or found is None:
                return None
            places, close = found
            written = body[length : close + 1]
            spans += places
            starts = []  # never read: the entry's spans say where its messages are
            for place in places[1::2]:
                length, count = place, count + 1
                ends.append((length, count))
        # What the entry was charged up to its boundary (at least: the bytes it leaves behind
        # are taken off at the lower, ASCII rate), and what the new messages are.
        kept = entry.parsed - parsed_charge(entry.prefix[end[0] :], floor=True)
        self._drop(entry)
        new = _Entry(
            entry.space, body[:length], entry.head, entry.first, items, state[0], 0, 0.0, bounds
        )
        new.walked = state[1]
        new.ends = tuple(ends[-_STEPS_BACK - 1 :])
        new.parsed = max(0, kept) + parsed_charge(written)
        new.after = body[length:]
        new.spans = spans
        made = self._add(new)
        return None if made is None else (made, (end[1], end[0], starts))

    def repair(
        self,
        reading: Reading,
        body: bytes,
        source: PlanSource,
        api: str = "chat",
        *,
        parsed: dict[str, Any] | None,
        given: RequestFacts | None = None,
    ) -> Sanitized:
        """``sanitize_body`` over ``body`` as this cache read it (``reading``; ``parsed``: its
        payload, or what the caller made of it): the rules resumed from the session's previous
        request when ``config.resume`` says so and the reading brought its record, and what
        their run leaves kept for the session's next request (``keep``)."""
        resume = self.config.resume
        sanitized = sanitize_body(
            body,
            source,
            api,
            parsed=parsed,
            given=given,
            walked=reading.walked,
            layout=reading.layout,
            resume=reading.resume if resume else None,
            carry=resume and reading.layout is not None,
        )
        if sanitized.carried is not None:  # for the session's next request
            resumed = reading.resume if sanitized.resumed else None
            # The facts given (a plan given none runs as compiled: its steps hold none).
            facts = 0 if given is None or given.empty else _facts_charge(given)
            self.keep(reading.layout, sanitized.carried, resumed, facts)
        return sanitized

    def keep(
        self,
        layout: Layout | None,
        carried: Carried | None,
        resumed: Carried | None,
        facts: int = 0,
    ) -> None:
        """Keep what the rules' run over the body ``layout`` was made for left for the next
        request (``Sanitized.carried``; ``resumed``: the record it went on from), charged for
        what it holds: the body written, its list where it is not the entry's, the objects of
        the messages rules made, its steps' marks and changes, and ``facts``: what the facts its
        steps were given are charged (``_facts_charge``)."""
        if layout is None or carried is None:
            return
        entry = layout.entry
        if self._lru.get(id(entry)) is not entry:
            return  # dropped meanwhile (the bound, a fork, a reload)
        made = layout.made + (0 if resumed is None or carried.clean else resumed.charge)
        carried = carried.but(carried.written, made) if made != carried.charge else carried
        marks = carried.marks.values()
        charge = made + MARK_BYTES * len(marks) + CHANGE_BYTES * sum(len(m.changes) for m in marks)
        charge += sum(_state_charge(mark.state) for mark in marks)
        charge += facts
        if carried.written is not None:
            charge += len(carried.written[0])
        if carried.messages is not entry.items:
            charge += POINTER_BYTES * len(carried.messages)
        self.charged += charge - entry.carried_charge
        entry.charge += charge - entry.carried_charge
        entry.carried, entry.carried_charge = carried, charge
        self._fit(entry)

    def _add(self, entry: _Entry) -> _Entry | None:
        """Keep ``entry`` (charged, and timed from now); ``None`` if it alone is over the bound."""
        charge = len(entry.prefix) + len(entry.head) + ENTRY_BYTES + entry.parsed
        charge += BOUND_BYTES * len(entry.items) + len(entry.after)
        if charge > self.config.max_bytes:
            return None
        entry.charge, entry.expires = charge, self._clock() + self.config.ttl
        old = self._spaces.setdefault(entry.space, _Space()).add(entry)
        if old is not None:
            self._lru.pop(id(old), None)
            self.charged -= old.charge
        self._lru[id(entry)] = entry
        self.charged += charge
        self._fit(entry)
        return entry if id(entry) in self._lru else None

    def _fit(self, grown: _Entry | None = None) -> None:
        """Drop the least recently used entries until the cache is within its bound, but
        ``grown`` (the entry just made, or charged the record its repair kept) while another is
        left: a repair kept after the stash's wait may find its entry the least recently used
        (other requests came meanwhile), and it has just been used."""
        while self.charged > self.config.max_bytes:
            victim = next((kept for kept in self._lru.values() if kept is not grown), grown)
            if victim is None:
                return
            self._drop(victim)

    def _drop(self, entry: _Entry) -> None:
        if self._lru.pop(id(entry), None) is None:
            return
        self.charged -= entry.charge
        place = self._spaces.get(entry.space)
        if place is not None:
            place.remove(entry)
            if not place.entries:
                del self._spaces[entry.space]

    def _touch(self, entry: _Entry) -> None:
        entry.expires = self._clock() + self.config.ttl
        self._lru.move_to_end(id(entry))

    def _expire(self) -> None:
        """Drop the entries past their time: the least recently used go first."""
        now = self._clock()
        while self._lru:
            oldest = next(iter(self._lru.values()))
            if oldest.expires > now:
                return
            self._drop(oldest)


def _listed(
    body: bytes, field: str, items: list[Any], worth_reading: Callable[[], bool]
) -> tuple[int, int, tuple[tuple[int, int], ...], bytes, Spans | None] | None:
    """Where the list of ``items`` is in ``body`` (valid JSON): where its key starts (the first
    place the key is written plainly, followed by ``:`` and ``[``), where its ``[`` is, its last
    few message boundaries (``_Entry.ends``), its bytes, and ``None`` if they are orjson's
    writing (compared), else where each item is in the client's own writing (read, if
    ``worth_reading()``: else ``_NOT_READ``); ``None`` if the key is not found so."""
    found = find_list(body, items, field)
    if found is None:
        return None  # not written plainly, or what orjson cannot write (too deep): not reused
    at, start, written = found  # where the key starts, the list's "[", orjson's writing of it
    if _SENTINEL in body[:start]:
        return None
    if body.startswith(written, start):
        return at, start, _last_ends(items, start + len(written) - 1), written, None
    if not worth_reading():
        return _NOT_READ
    read = read_items(body, start + 1, written, first=True)
    if read is None:
        return None  # a nested list of that key (the top-level one follows): not reused
    spans, close = read
    ends = tuple((spans[2 * count + 1], count + 1) for count in range(len(items)))
    return at, start, ends[-_STEPS_BACK - 1 :], body[start : close + 1], spans


def _spans(entry: _Entry, count: int) -> Spans | None:
    """Where the first ``count`` items of ``entry`` are (a new array): its spans, or its bounds
    when its list is orjson's writing (``None`` if they cannot be worked out)."""
    if entry.spans is not None:
        return entry.spans[: 2 * count]
    bounds = _bounds(entry)
    if bounds is None:
        return None
    flat: list[int] = []
    for k in range(count):
        flat += (bounds[k], bounds[k + 1] - 1)
    return array("q", flat)


#: ``_listed``: the list is not orjson's writing, and was not read.
_NOT_READ: Final[tuple[int, int, tuple[tuple[int, int], ...], bytes, Spans | None]] = (
    0,
    0,
    (),
    b"",
    array("q"),
)


#: The draws of a space's read gate: a 64-bit linear congruential sequence (Knuth's MMIX
#: constants), each space's its own from the same start, so that it is the same in every run.
_FIRST_DRAW: Final = 0x9E3779B97F4A7C15


def _next_draw(draw: int) -> int:
    return (draw * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF


def _ends(body: bytes, length: int, after: bytes) -> bool:
    """``body[length:] == after``, without copying the body's end."""
    return len(body) == length + len(after) and body.endswith(after)


def _facts_charge(given: RequestFacts) -> int:
    """What facts given to a run's steps hold: each key asked for or recalled, and each value
    recalled (a store's answer is new each request: the texts are not the kept messages')."""
    keys = max(len(given.recalled), len(given.wanted or ()))
    return FACT_BYTES * keys + sum(map(sys.getsizeof, given.recalled.values()))


def _state_charge(state: Any) -> int:
    """What a step's carried state holds beyond its mark: a set's entries (the replay scan's
    anchor ids: their strings are the messages' own), a pointer and a hash each."""
    if type(state) is tuple:
        return sum(_state_charge(part) for part in state)
    if type(state) in (set, frozenset, list, dict):
        return SET_ENTRY_BYTES * len(state)
    return 0


def parsed_charge(data: bytes, *, floor: bool = False) -> int:
    """What the objects parsed from ``data`` (JSON text) are charged (see ``CHARGE_ASCII``): at
    the wide rate when a byte is not ASCII or an escape writes a character that is not
    (``json.dumps``' and .NET's ``\\u00e9``: a string holding one character past U+FFFF takes
    four bytes a character, whatever wrote it); ``floor``: at the ASCII rate whatever the
    bytes, at most what they were charged."""
    values = len(data) - len(data.translate(None, _VALUE_MARKS))
    wide = not floor and (
        not data.isascii() or (b"\\u" in data and _WIDE_ESCAPE.search(data) is not None)
    )
    rate = CHARGE_WIDE if wide else CHARGE_ASCII
    return rate * len(data) + CHARGE_PER_VALUE * values


def _walk(
    api: Api, added: list[Any], state: WalkState | None, *, whole: bool = False
) -> tuple[Walked, WalkState | None]:
    """What the API's walk knows of the whole list: from the start over ``added`` (``whole``: it
    is the whole list), else going on from ``state`` over ``added``. A ``None`` state is a
    prefix the walk does not model: nor does it model any list that starts with it."""
    resumable = api.resumable
    if resumable is None:
        return NOT_WALKED, None
    if state is None and not whole:
        return Walked({resumable.scan: None}), None
    signals, after = resumable.walk(added, state)
    primed = {} if after is None else resumable.primed(after)
    return Walked({resumable.scan: signals}, primed), after
