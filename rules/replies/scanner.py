"""Find tool calls written as text in a stream of content, holding back as little as it can.

``TextCalls`` reads one choice's content as it arrives (``feed``, then ``end``) and gives back,
in order, the text to pass on (``Text``) and the calls it read (``Calls``). Every character it
is given leaves exactly once, in order: as text, or inside a block that parsed as calls.

- **Text passes at once** unless its end could be the start of an opener of an armed format
  (``<tool_``, ``[TOOL_C``): only that suffix is held, at most one opener's length, until the
  next text says whether it is one.
- **A block** begins at a whole opener outside code (a fenced block or an inline code span:
  markup a model quotes is text). It is held until it ends; an ambiguous opener
  (``<tool_call>``) must also show its format within ``confirm_window`` characters, or it is
  text. A block that ends and parses is a ``Calls``; one that does not parse is released as
  ``Text``, verbatim. A block that grows past ``max_block`` characters is released verbatim and
  the scanner stops looking (``latched``): what follows passes as it comes.
- ``end`` releases whatever is held as text: a block cut off by the end of the content is not
  a call (its arguments may be cut off too).

The work is linear in the text: each character is searched once for openers, and a held block
is read once by its format's ``Reader``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from rules.replies.base import in_text
from rules.replies.formats import CONFIRM_WINDOW, MORE, Call, Declared, Format, Reader

#: The most characters one block may hold (a call's arguments can be a whole file).
MAX_BLOCK: Final = 256 * 1024


@dataclass(frozen=True, slots=True)
class Text:
    """Text to pass on as it is."""

    text: str


@dataclass(frozen=True, slots=True)
class Calls:
    """A block that read as calls: its format, the calls, and the block's text (what it
    held)."""

    format: str
    calls: tuple[Call, ...]
    text: str

    @property
    def chars(self) -> int:
        return len(self.text)


Piece = Text | Calls


@dataclass(slots=True)
class _Block:
    """A block being held: its opener, its text so far, and the formats it may still be."""

    opener: str
    parts: list[str]
    size: int
    #: (format, its reader, whether its early check confirmed it)
    candidates: list[tuple[Format, Reader, bool]]

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0]


@dataclass(slots=True)
class _Code:
    """Whether the text so far ends inside code: a fenced block (a line starting with three or
    more backticks opens it, the same fence closes it) or an inline span (a run of backticks,
    closed by a run of the same length or by the end of its line)."""

    at_line_start: bool = True
    #: The backtick run being read, and whether it began at the start of its line.
    run: int = 0
    run_at_line_start: bool = False
    fence: int = 0
    inline: int = 0
    #: Only spaces or tabs since the start of the line.
    blank_so_far: bool = True

    def inside(self) -> bool:
        """Whether the text read so far ends inside code (a backtick run it ends with is
        taken as complete: the caller's next character is not a backtick)."""
        self._close_run()
        return bool(self.fence or self.inline)

    def read(self, text: str) -> None:
        if "`" not in text and not self.run:  # the common case: no backtick at all
            if "\n" in text:
                self.inline = 0
                tail = text[text.rindex("\n") + 1 :]
                self.at_line_start = not tail
                self.blank_so_far = not tail.strip(" \t")
            elif text:
                self.at_line_start = False
                self.blank_so_far = self.blank_so_far and not text.strip(" \t")
            return
        for char in text:
            if char == "`":
                if not self.run:
                    self.run_at_line_start = self.blank_so_far
                self.run += 1
                continue
            self._close_run()
            if char == "\n":
                self.inline = 0
                self.blank_so_far = True
            elif char not in " \t":
                self.blank_so_far = False

    def _close_run(self) -> None:
        run, self.run = self.run, 0
        if not run:
            return
        self.blank_so_far = False
        if self.fence:
            if run >= self.fence and self.run_at_line_start:
                self.fence = 0
        elif self.inline:
            if run == self.inline:
                self.inline = 0
        elif run >= 3 and self.run_at_line_start:
            self.fence = run
        else:
            self.inline = run


@dataclass(frozen=True, slots=True)
class _Openers:
    """What a scanner searches for, made once per set of formats (``_tables``): each opener's
    formats, one pattern for them all (longest first), every proper prefix of one (the text
    held at the end of a piece) and the longest opener's length."""

    formats: Mapping[str, tuple[Format, ...]]
    pattern: re.Pattern[str] | None
    prefixes: frozenset[str]
    longest: int
    #: The last characters of the prefixes: text ending otherwise holds none back.
    ends: frozenset[str]


@lru_cache(maxsize=64)
def _tables(formats: tuple[Format, ...]) -> _Openers:
    """The openers of ``formats``. A profile arms a fixed set of formats, so each request's
    scanner reuses its set's tables (building them is most of what a scanner costs: about 30 µs
    for three formats); 64 sets at most are kept, each a few hundred short strings."""
    by_opener: dict[str, list[Format]] = {}
    for fmt in formats:
        for opener in fmt.opens:
            by_opener.setdefault(opener, []).append(fmt)
    openers = sorted(by_opener, key=len, reverse=True)
    pattern = re.compile("|".join(map(re.escape, openers))) if openers else None
    prefixes = frozenset(o[:k] for o in openers for k in range(1, len(o)))
    return _Openers(
        {opener: tuple(found) for opener, found in by_opener.items()},
        pattern,
        prefixes,
        len(openers[0]) if openers else 0,
        frozenset(prefix[-1] for prefix in prefixes),
    )


@lru_cache(maxsize=64)
def openers(formats: tuple[Format, ...]) -> tuple[bytes, ...]:
    """Every opener of ``formats`` as a JSON string holds it (``rules.replies.base.in_text``):
    a text in which none is found holds no block, so the scanner gives it back as it came."""
    return tuple(in_text(opener) for opener in _tables(formats).formats)


@dataclass(slots=True)
class TextCalls:
    """One choice's content, scanned for tool calls written as text in ``formats``."""

    formats: Sequence[Format]
    declared: Declared
    confirm_window: int = CONFIRM_WINDOW
    max_block: int = MAX_BLOCK
    #: After a block too big to hold, the rest passes as it comes.
    latched: bool = False
    #: The blocks released as text, as (why, how many characters): ``not_a_call`` (no format
    #: reads it: an undeclared tool, arguments that are not an object), ``too_long`` (past
    #: ``max_block``), ``cut_off`` (the content ended inside it).
    released: list[tuple[str, int]] = field(default_factory=list)
    _openers: Mapping[str, tuple[Format, ...]] = field(default_factory=dict)
    _pattern: re.Pattern[str] | None = None
    _prefixes: frozenset[str] = frozenset()
    _ends: frozenset[str] = frozenset()
    _longest: int = 0
    _held: str = ""
    _block: _Block | None = None
    _code: _Code = field(default_factory=_Code)

    def __post_init__(self) -> None:
        openers = _tables(tuple(self.formats))
        self._openers, self._pattern = openers.formats, openers.pattern
        self._prefixes, self._longest = openers.prefixes, openers.longest
        self._ends = openers.ends

    @property
    def holding(self) -> int:
        """How many characters are held back."""
        return len(self._held) + (self._block.size if self._block else 0)

    def feed(self, text: str) -> list[Piece]:
        out: list[Piece] = []
        if self.latched or self._pattern is None:
            _emit(out, text)
            return out
        if self._block is not None:
            rest = self._grow(text, out)
            if rest is None:
                return out
            text = rest
        self._pass(self._held + text, out)
        return out

    def end(self) -> list[Piece]:
        """The end of the content: what is held is text."""
        out: list[Piece] = []
        if self._block is not None:
            self.released.append(("cut_off", self._block.size))
            _emit(out, self._block.text)
            self._block = None
        _emit(out, self._held)
        self._held = ""
        return out

    def _pass(self, text: str, out: list[Piece]) -> None:
        """Text outside any block: pass it on up to the next opener (or a possible one at its
        end), and go on from there."""
        self._held = ""
        assert self._pattern is not None
        pos = 0
        while pos < len(text):
            match = self._pattern.search(text, pos)
            at = match.start() if match else self._tail_prefix(text, pos)
            if at == -1:
                break
            self._code.read(text[pos:at])
            _emit(out, text[pos:at])
            pos = at
            if self._code.inside():  # quoted markup: one character of it is text, search on
                self._code.read(text[at])
                _emit(out, text[at])
                pos = at + 1
                continue
            if match is None:  # a possible opener runs to the end: hold it
                self._held = text[at:]
                return
            self._block = _Block(
                match.group(),
                [],
                0,
                [(fmt, fmt.reader(), fmt.early is None) for fmt in self._openers[match.group()]],
            )
            rest = self._grow(text[at:], out)
            if rest is None:
                return
            text, pos = rest, 0
        self._code.read(text[pos:])
        _emit(out, text[pos:])

    def _tail_prefix(self, text: str, pos: int) -> int:
        """Where a proper prefix of an opener runs from to the end of ``text`` (at or after
        ``pos``), else ``-1``: the earliest such position."""
        if not text or text[-1] not in self._ends:  # no prefix ends as the text does
            return -1
        for size in range(min(self._longest - 1, len(text) - pos), 0, -1):
            if text[-size:] in self._prefixes:
                return len(text) - size
        return -1

    def _grow(self, piece: str, out: list[Piece]) -> str | None:
        """Add ``piece`` to the held block: ``None`` while it is held, else the text after it
        (the block was emitted, as calls or as text)."""
        block = self._block
        assert block is not None
        block.parts.append(piece)
        block.size += len(piece)
        window = self.confirm_window + len(block.opener)
        ended = -1
        alive: list[tuple[Format, Reader, bool]] = []
        for fmt, reader, was_confirmed in block.candidates:
            confirmed = was_confirmed
            if not confirmed and fmt.early is not None:
                verdict = fmt.early(block.text[:window], self.declared)
                if verdict is False or (verdict is None and block.size > window):
                    continue
                confirmed = verdict is True
            end = reader.feed(piece)
            alive.append((fmt, reader, confirmed))
            if end != MORE and (ended == -1 or end < ended):
                ended = end
        block.candidates = alive
        if not alive:  # prose after all: the opener is text, the rest is searched again
            self._block = None
            self._code.read(block.opener)
            _emit(out, block.opener)
            return block.text[len(block.opener) :]
        if ended != -1:
            return self._close(block, ended, out)
        if block.size > self.max_block:
            self._block = None
            self.latched = True
            self.released.append(("too_long", block.size))
            _emit(out, block.text)
        return None

    def _close(self, block: _Block, end: int, out: list[Piece]) -> str:
        """The block ends at ``end``: its calls, or its text if no format reads it."""
        self._block = None
        text = block.text
        for fmt, _, _ in block.candidates:
            calls = fmt.parse(text[:end], self.declared)
            if calls:
                out.append(Calls(fmt.name, tuple(calls), text[:end]))
                return text[end:]
        self.released.append(("not_a_call", end))
        self._code.read(text[:end])
        _emit(out, text[:end])
        return text[end:]


def _emit(out: list[Piece], text: str) -> None:
    """Add ``text`` to ``out``, joined to the text before it."""
    if not text:
        return
    if out and isinstance(out[-1], Text):
        out[-1] = Text(out[-1].text + text)
    else:
        out.append(Text(text))


def text_of(pieces: Iterable[Piece]) -> str:
    """The text the pieces pass on (their calls left out)."""
    return "".join(p.text for p in pieces if isinstance(p, Text))


def whole(pieces: Iterable[Piece]) -> str:
    """Everything the pieces hold, calls as the text they were read from: always the text the
    scanner was given (nothing lost, nothing added)."""
    return "".join(p.text for p in pieces)
