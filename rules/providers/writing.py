"""How a request body's list is written in its bytes, and a repaired body written with them.

A repaired body is what orjson writes of the payload the rules left, but for the messages no rule
replaced: those reach the provider as the client wrote them. When the list is orjson's own
writing (``JSON.stringify``, httpx: compact, escaping only what JSON needs), ``orjson.dumps`` of
the payload writes those bytes already. Any other writing (``json.dumps``' spacing, Go's and
.NET's ``\\u003c``, PHP's ``\\/``, ``ensure_ascii``, indentation) is read here: each message's
bytes are found by the standard library's scanner (its C one) and compared, as orjson writes
what it read, with what orjson parsed (``read_items``). A repaired body then copies each message
a rule kept from the client's bytes, and writes the rest as orjson does: the top-level fields,
the messages rules made, and ``,`` between messages (the client's writing inside a message is
kept, its spacing between them and outside the list is not). Those messages reach the provider
as they would without chatmend: an integer past 64 bits with its digits (orjson reads it as a
float), a key written twice both times.

The server's prefix cache (proxy/relay/prefix.py) keeps where a session's messages are and
writes from that; without it, or when it holds nothing of the body, ``client_layout`` reads the
body once its rules changed it: the bytes sent are the same with the cache and without.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

import orjson

#: The lists' keys, written plainly, then ``:`` and ``[`` with JSON whitespace around: the
#: first match is the list a body is read for (a nested list of that key written before the
#: top-level one is found not to hold the parsed items, and the body is written by orjson; one
#: that holds the same values, as orjson writes them, stands for the top-level list's bytes).
KEYS: Final = {
    field: re.compile(b'"' + field.encode() + rb'"[ \t\n\r]*:[ \t\n\r]*\[')
    for field in ("messages", "input")
}
_SPACE: Final = re.compile(r"[ \t\n\r]*")


def _as_orjson_reads(digits: str) -> int | float:
    """An integer as orjson reads it: past 64 bits (below -2**63, or 2**64 and up), a float."""
    value = int(digits)
    return value if -(2**63) <= value < 2**64 else float(digits)


#: The standard library's JSON decoder (its C scanner): a value and its end, whatever its writing,
#: read as orjson reads it (an integer past 64 bits is a float: the message that holds one is
#: then found, and keeps the client's digits).
_DECODER: Final = json.JSONDecoder(parse_int=_as_orjson_reads)

#: Where the items of a list are in a body: each item's first byte, then one past its last.
Spans: TypeAlias = "array[int]"
#: The pieces of a list's bytes for its items ``a`` to ``b`` (exclusive) of a kept run.
Copy = Callable[[int, int], list[bytes | memoryview]]


def nested(wrapped: Any, depth: int) -> bytes:
    """The bytes of the value ``wrapped`` holds ``depth`` lists down: orjson writes at most 255
    levels, so a value is written at its depth in the payload, and fails as it would there."""
    return orjson.dumps(wrapped)[depth:-depth]


def dumped(wrapped: Any, depth: int) -> bytes | None:
    """``nested``, or ``None`` for what orjson cannot write."""
    try:
        return nested(wrapped, depth)
    except TypeError:
        return None


def whole(listed: list[Any]) -> list[bytes]:
    """The items of ``listed`` as orjson writes them in a body, as one piece (none if none)."""
    return [nested([listed], 1)[1:-1]] if listed else []


def read_items(body: bytes, at: int, written: bytes, *, first: bool) -> tuple[Spans, int] | None:
    """In a list of ``body`` (valid JSON), from ``at``: right after its ``[`` (``first``) or
    right after one of its items. Where each item that starts after ``at`` starts and ends
    (``Spans``), and where the ``]`` closing the list is, if those items are the ones orjson
    parsed, as it writes them (``written``, a list): compared as written, since ``1``, ``1.0``
    and ``true`` are equal in Python but not in JSON (a body holding its list's key twice keeps
    the last list, and the first may hold the same values written so); ``None`` otherwise.

    The items are read by the standard library's scanner (its C one), whatever their writing:
    spacing, escapes, indentation. About 5 µs a KB; a session's hit reads only what it adds."""
    try:
        text = body[at:].decode()
    except UnicodeDecodeError:
        return None
    marks: list[int] = []
    read: list[Any] = []
    space, scan = _space_end, _DECODER.raw_decode
    pos = space(text, 0)
    try:
        while text[pos] != "]":
            if not first:
                if text[pos] != ",":
                    return None
                pos = space(text, pos + 1)
            item, end = scan(text, pos)
            read.append(item)
            marks += (pos, end)
            first = False
            pos = space(text, end)
    except (IndexError, ValueError, RecursionError):
        return None
    if dumped([read], 1) != written:
        return None  # another list (a nested one, or the first of two), or not these items
    marks.append(pos)
    if text.isascii():
        places = [at + mark for mark in marks]
    else:  # characters to bytes, each run encoded once
        places, done, size = [], 0, at
        for mark in marks:
            size += len(text[done:mark].encode())
            places.append(size)
            done = mark
    return array("q", places[:-1]), places[-1]


def _space_end(text: str, at: int) -> int:
    """Where the first character at or after ``at`` that is not JSON whitespace is."""
    found = _SPACE.match(text, at)
    return at if found is None else found.end()


def each_item(raw: bytes, spans: Spans, offset: int = 0) -> Copy:
    """``Copy`` for a list in the client's own writing: each item's bytes alone (the client's
    spacing between them is not kept), of the items from ``offset`` on. Copies, not views: a
    view is an object the collector tracks, and a list of thousands of tiny messages made as
    many (a collection each few hundred, over the payload's objects: 0.7 µs a message)."""

    def copy(a: int, b: int) -> list[bytes | memoryview]:
        return [raw[spans[k] : spans[k + 1]] for k in range(2 * (a + offset), 2 * (b + offset), 2)]

    return copy


def copied(
    listed: list[Any], items: list[Any], copy: Copy
) -> tuple[list[bytes | memoryview], list[bytes]]:
    """The pieces of the bytes of ``listed``: each run of it that is a run of ``items`` (the
    client's messages, as parsed: a rule never writes them, it keeps or replaces them) copied
    (``copy``), wherever it went, and each message a rule made serialized; and those serialized
    pieces. A message is known by its object, so only objects and lists are: orjson gives one
    object for every ``null``, ``true``, ``false``, ``""`` and small integer of a body (``0``
    and ``-0`` alike), which are written as orjson writes them."""
    where = {id(item): k for k, item in enumerate(items) if type(item) in _CONTAINERS}
    pieces: list[bytes | memoryview] = []
    made: list[bytes] = []
    run = end = -1
    for message in listed:
        k = where.get(id(message), -1)
        if k >= 0 and k == end:
            end += 1
            continue
        if run >= 0:
            pieces += copy(run, end)
        if k >= 0:
            run, end = k, k + 1
            continue
        run = end = -1
        piece = nested([[message]], 2)
        pieces.append(piece)
        made.append(piece)
    if run >= 0:
        pieces += copy(run, end)
    return pieces, made


_CONTAINERS: Final = (dict, list)


def assemble(
    payload: Mapping[str, Any], field: str, pieces: list[bytes | memoryview]
) -> tuple[bytes, int, int]:
    """``payload`` written as orjson writes it, but its list ``field`` made of ``pieces`` (its
    items' bytes); and where the list's items are in the bytes (after its ``[``, at its ``]``)."""
    chunks: list[bytes | memoryview] = []
    start = end = size = 0
    for key, value in payload.items():
        chunks += (b",", orjson.dumps(key), b":")
        size += 2 + len(chunks[-2])
        if key != field:
            chunks.append(nested([value], 1))
            size += len(chunks[-1])
            continue
        start = size = size + 1
        chunks.append(b"[")
        if pieces:  # the pieces with a comma between each two (no loop over them here)
            woven: list[bytes | memoryview] = [b","] * (2 * len(pieces) - 1)
            woven[::2] = pieces
            chunks += woven
            size += sum(map(len, pieces)) + len(pieces) - 1
        end = size
        chunks.append(b"]")
        size += 1
    chunks[0] = b"{"
    chunks.append(b"}")
    return b"".join(chunks), start, end


class ClientLayout:
    """How a body's list is written when it is not orjson's writing, read from the body alone
    (``client_layout``): a repaired body copies each message no rule replaced from it.
    rules/providers/sanitize.py's ``Layout``, for a body the prefix cache holds nothing of."""

    __slots__ = ("items", "spans")

    def __init__(self, items: list[Any], spans: Spans) -> None:
        self.items = items
        self.spans = spans

    def write_spanned(
        self, raw: bytes, payload: Mapping[str, Any], field: str, closed: object
    ) -> tuple[bytes, int, int]:
        listed = payload[field]
        if closed is not None or type(listed) is not list:
            return orjson.dumps(payload), -1, -1  # not a list (a Responses string), or resumed
        pieces, _ = copied(listed, self.items, each_item(raw, self.spans))
        return assemble(payload, field, pieces)

    def unchecked(self, raw: bytes) -> bytes:
        return raw  # no earlier body's check read any of it

    def signed_checked(self) -> None:
        """Nothing is kept for a later body."""


def find_list(raw: bytes, items: Any, field: str) -> tuple[int, int, bytes] | None:
    """Where the list ``items`` (``orjson.loads(raw)[field]``, not empty) is looked for in
    ``raw``: where its key starts (the first place it is written plainly, then ``:`` and ``[``)
    and its ``[``, and the list as orjson writes it; ``None`` if the key is not written so, or
    orjson cannot write the list (too deep). Whether the list there is those items, in orjson's
    writing (``raw.startswith(written, start)``) or another (``read_items``), is the caller's."""
    if type(items) is not list or not items or field not in KEYS:
        return None
    found = KEYS[field].search(raw)
    written = None if found is None else dumped([items], 1)
    if found is None or written is None:
        return None
    return found.start(), found.end() - 1, written


def client_layout(raw: bytes, items: Any, field: str) -> ClientLayout | None:
    """How the list ``items`` (``orjson.loads(raw)[field]``) is written in ``raw``, when it is
    not orjson's writing and is found (``find_list``) and read (``read_items``); ``None`` when
    ``orjson.dumps`` of the payload writes the client's bytes of every message already (the
    list is orjson's writing), or when the list is not found so (a body written whole, as
    before)."""
    found = find_list(raw, items, field)
    if found is None or raw.startswith(found[2], found[1]):
        return None
    _, start, written = found
    read = read_items(raw, start + 1, written, first=True)
    return None if read is None else ClientLayout(items, read[0])
