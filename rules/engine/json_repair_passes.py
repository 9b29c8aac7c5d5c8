"""Pure, named repairs that turn malformed JSON-object text into compact, strict JSON.

Only repairs whose intent is unambiguous are made, each reported by a name from ``FIXES``.
The string-level repairs (trailing commas, control characters, Python literals, quotes,
brackets, truncated tails) are fused into one tokenizing scan instead of one regex pass each:
separate passes are not string-aware (hermes' ``,\\s*}`` edited string values, #102311) and
each would rescan the text. The scan is iterative and linear, so depth and length cannot blow
the stack or go quadratic. Anything it does not understand (prose, comments, unquoted keys,
missing commas, invalid escapes) makes the text unrepairable: guessing is worse than ``{}``
plus the evidence in the log (hermes E13, E14).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

#: Every fix name, in the order they are reported.
FIXES: Final = (
    "code_fence",
    "double_encoded",
    "trailing_comma",
    "control_characters",
    "python_literals",
    "single_quotes",
    "non_finite_numbers",
    "misnested_closers",
    "extra_closers",
    "incomplete_tail",
    "completed_literal",
    "closed_string",
    "closed_brackets",
    "dropped_trailing",
)

#: Fixes that drop text the client sent (the log keeps the original for these, hermes E13).
LOSSY_FIXES: Final = frozenset({"incomplete_tail", "dropped_trailing"})

#: How many JSON-string layers are unwrapped at most (``"\"{...}\""``).
_MAX_UNWRAP = 3

#: The cost cap per string: tokens the scan may read (about 1 µs each: ~25 ms; a hostile
#: ``{"a":1,"a":1,...`` makes one token per two bytes, a real argument's long text is one
#: token). Past it the text counts as unrepairable.
MAX_SCAN_TOKENS: Final = 20_000
#: Nesting past orjson's limit (1024) and the stdlib's recursion limit cannot be written back:
#: the scan stops there (a hostile ``{"a":{"a":...`` then costs a few thousand tokens).
MAX_DEPTH: Final = 1024


@dataclass(frozen=True, slots=True)
class Repaired:
    """The outcome of ``repair_object``: compact JSON-object text, or ``None`` if unrepairable."""

    text: str | None
    fixes: tuple[str, ...] = ()
    #: Values after the first complete object, and their length (``dropped_trailing``).
    dropped_values: int = 0
    dropped_chars: int = 0
    #: Unrepairable because the scan reached its token cap (not because of its shape).
    over_cap: bool = False
    #: Tokens the scan read (what it cost).
    tokens: int = 0


class _Unrepairable(Exception):
    """Raised inside the scan; never leaves this module."""


class _OverCap(_Unrepairable):
    """The scan reached ``MAX_SCAN_TOKENS``."""


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_FENCE_OPEN = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*(?:\r?\n|$|(?=[{\"']))")
_DQ_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_SQ_BODY = re.compile(r"[^'\\]*(?:\\.[^'\\]*)*", re.DOTALL)
_DQ_SPECIAL = re.compile(r"\\(u[0-9a-fA-F]{4}|.)|[\x00-\x1f]", re.DOTALL)
_SQ_SPECIAL = re.compile(r"\\(u[0-9a-fA-F]{4}|.)|[\x00-\x1f\"]", re.DOTALL)
_VALID_ESCAPE = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})')
_CONTROL_CHAR = re.compile(r"[\x00-\x1f]")
_PARTIAL_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3}|u[dD][89abAB][0-9a-fA-F]{2})\Z")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_NUMBER_PREFIX = re.compile(r"-?[0-9]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?\Z")
_WORD = re.compile(r"-?[A-Za-z_][A-Za-z0-9_]*")
_STRUCTURAL = re.compile(r"[\"'{}\[\]]")

_SCALAR_END: Final = frozenset(" \t\n\r,:]}")
_SIMPLE_ESCAPES: Final = frozenset('"\\/bfnrt')
_CONTROL_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_WORDS: Final = {
    "true": ("true", None),
    "false": ("false", None),
    "null": ("null", None),
    "True": ("true", "python_literals"),
    "False": ("false", "python_literals"),
    "None": ("null", "python_literals"),
    "NaN": ("null", "non_finite_numbers"),
    "Infinity": ("null", "non_finite_numbers"),
    "-Infinity": ("null", "non_finite_numbers"),
}
#: orjson reads integers outside this range as (rounded) floats and cannot write them: text
#: holding one is parsed and dumped with the stdlib instead.
_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1

# Frame states of an open object or array.
_OPENED = 0  # just opened: first member, or the closer
_KEY = 1  # object: key read, colon expected
_COLON = 2  # object: colon read, value expected
_VALUE = 3  # member complete: comma or closer expected
_COMMA = 4  # comma read: next member expected (a closer here means a trailing comma)

_CLOSER: Final = {"{": "}", "[": "]"}
_OPENER: Final = {"}": "{", "]": "["}


def strip_code_fence(text: str) -> str | None:
    """The text inside a markdown code fence (```` ```json ... ``` ````), or ``None`` if unfenced.

    The fence may be on one line; an opening fence without a closing one (text cut off) still
    counts.
    """
    opening = _FENCE_OPEN.match(text)
    if opening is None:
        return None
    inner = text[opening.end() :]
    # str methods, not a `\s*```\s*\Z` search: that rescans long whitespace runs (quadratic).
    closed = inner.rstrip(" \t\r\n")
    return closed[:-3].rstrip(" \t\r\n") if closed.endswith("```") else inner


def parse_strict_object(text: str) -> bool:
    """True if ``text`` is strict JSON whose top level is an object (orjson first, then stdlib).

    The stdlib accepts what orjson refuses although the grammar allows it: escaped lone
    surrogates, numbers beyond a double, nesting beyond 1024.
    """
    try:
        return type(orjson.loads(text)) is dict
    except (ValueError, TypeError):
        pass
    try:
        return type(json.loads(text, parse_constant=_reject_constant)) is dict
    except (ValueError, TypeError, RecursionError):
        return False


def dump_object(value: dict[Any, Any]) -> str | None:
    """Compact JSON for a dict: orjson, or the stdlib (ASCII) for what orjson cannot write."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, ValueError):
        pass
    return _stdlib_dump(value)


def repair_object(
    text: str, *, close_strings: bool = True, max_tokens: int | None = None, _depth: int = 0
) -> Repaired:
    """Repair ``text`` into compact JSON-object text, naming each fix used.

    ``close_strings`` decides text cut off inside a string value: closed and kept, or
    unrepairable. The result is deterministic, and valid input comes back compacted with no
    fix named (callers keep valid text as it was; see ``parse_strict_object``). The scan reads
    at most ``max_tokens`` tokens (default ``MAX_SCAN_TOKENS``): past them, ``over_cap``.
    """
    limit = MAX_SCAN_TOKENS if max_tokens is None else max_tokens
    scan: _Scan | None = None
    fixes: set[str] = set()
    # Only leading whitespace goes: trailing whitespace may belong to a cut-off string value.
    body = text.lstrip(" \t\n\r")
    fenced = strip_code_fence(body)
    if fenced is not None:
        fixes.add("code_fence")
        body = fenced.lstrip(" \t\n\r")
        if not body.rstrip(" \t\n\r"):
            return Repaired("{}", _ordered(fixes))
    try:
        if body[:1] in ("'", '"'):
            return _unwrap(body, fixes, close_strings=close_strings, limit=limit, depth=_depth)
        scan = _Scan(body, close_strings=close_strings, limit=limit)
        json_text = scan.run()
    except _OverCap:
        return Repaired(None, over_cap=True, tokens=limit)
    except _Unrepairable:
        return Repaired(None, tokens=0 if scan is None else scan.tokens)
    fixes |= scan.fixes
    out = _load_and_dump(json_text, exact=scan.big_int)
    if out is None:
        return Repaired(None, tokens=scan.tokens)
    return Repaired(
        out, _ordered(fixes), scan.dropped_values, scan.dropped_chars, tokens=scan.tokens
    )


def _unwrap(body: str, fixes: set[str], *, close_strings: bool, limit: int, depth: int) -> Repaired:
    """Double-encoded JSON: a (possibly broken) JSON string whose content repairs to an object."""
    if depth >= _MAX_UNWRAP:
        raise _Unrepairable
    literal, end, truncated, string_fixes = _read_string(body, 0)
    if body[end:].strip(" \t\n\r"):
        raise _Unrepairable  # a string followed by more text is not one encoded object
    if truncated:
        if not close_strings:
            raise _Unrepairable
        string_fixes.add("closed_string")
    try:
        inner = json.loads(literal)
    except (ValueError, RecursionError):
        raise _Unrepairable from None
    if not isinstance(inner, str):
        raise _Unrepairable
    nested = repair_object(inner, close_strings=close_strings, max_tokens=limit, _depth=depth + 1)
    if nested.text is None:
        return nested
    all_fixes = fixes | string_fixes | set(nested.fixes) | {"double_encoded"}
    return Repaired(
        nested.text,
        _ordered(all_fixes),
        nested.dropped_values,
        nested.dropped_chars,
        tokens=nested.tokens,
    )


class _Frame:
    __slots__ = ("kind", "mark", "state")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.state = _OPENED
        #: Output length before the current member (its comma included), for dropping it.
        self.mark = 0


class _Scan:
    """One left-to-right pass over an object's text, emitting strict JSON tokens."""

    def __init__(self, text: str, *, close_strings: bool, limit: int = MAX_SCAN_TOKENS) -> None:
        self.text = text
        self.close_strings = close_strings
        self.limit = limit
        self.tokens = 0
        self.out: list[str] = []
        self.stack: list[_Frame] = []
        self.open_counts = {"{": 0, "[": 0}
        self.fixes: set[str] = set()
        self.big_int = False
        self.dropped_values = 0
        self.dropped_chars = 0

    def run(self) -> str:
        text, n = self.text, len(self.text)
        if not text.startswith("{"):
            raise _Unrepairable  # arrays, scalars, prose: not an object
        self.out.append("{")
        self._push("{")
        pos = 1
        limit = self.limit
        while self.stack:
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            if pos >= n:
                self._close_truncated()
                break
            self.tokens += 1
            if self.tokens > limit:
                raise _OverCap
            pos = self._step(pos)
        self._after_top(pos)
        return "".join(self.out)

    def _step(self, pos: int) -> int:
        """Consume one token at ``pos`` (not whitespace, not the end) and return the next pos."""
        text = self.text
        frame = self.stack[-1]
        ch = text[pos]
        if ch in "}]":
            self._close(ch)
            return pos + 1
        if ch == ",":
            if frame.state != _VALUE:
                raise _Unrepairable  # `[,` or `,,`: a missing value is not guessed
            frame.state = _COMMA
            return pos + 1
        if ch == ":":
            if frame.state != _KEY:
                raise _Unrepairable
            self.out.append(":")
            frame.state = _COLON
            return pos + 1
        if frame.kind == "{" and frame.state in (_OPENED, _COMMA):
            if ch not in "\"'":
                raise _Unrepairable  # unquoted keys are not repaired
            self._begin_member(frame)
            literal, pos, truncated, string_fixes = _read_string(text, pos)
            if truncated:  # a cut-off key: the member never existed
                return self._drop_tail(frame)
            self.fixes |= string_fixes
            self.out.append(literal)
            frame.state = _KEY
            return pos
        if frame.kind == "[" and frame.state in (_OPENED, _COMMA):
            self._begin_member(frame)
        elif frame.state != _COLON:
            raise _Unrepairable  # a value where a comma, colon or closer belongs
        frame.state = _VALUE
        return self._value(frame, pos)

    def _value(self, frame: _Frame, pos: int) -> int:
        text = self.text
        ch = text[pos]
        if ch in "{[":
            self.out.append(ch)
            self._push(ch)
            return pos + 1
        if ch in "\"'":
            literal, pos, truncated, string_fixes = _read_string(text, pos)
            if truncated:
                if not self.close_strings:
                    raise _Unrepairable
                string_fixes.add("closed_string")
            self.fixes |= string_fixes
            self.out.append(literal)
            return pos
        return self._scalar(frame, pos)

    def _scalar(self, frame: _Frame, pos: int) -> int:
        text, n = self.text, len(self.text)
        number = _NUMBER.match(text, pos)
        if number and (number.end() == n or text[number.end()] in _SCALAR_END):
            token = number.group()
            if number.group(1) is None and number.group(2) is None and len(token) > 18:
                self.big_int |= not _INT_MIN <= int(token) <= _UINT_MAX
            self.out.append(token)
            return number.end()
        if text[pos] in "-0123456789" and _NUMBER_PREFIX.match(text, pos):
            return self._drop_tail(frame)  # a number cut off at the end: `1.`, `-`, `2e`
        word = _WORD.match(text, pos)
        if word and (word.end() == n or text[word.end()] in _SCALAR_END):
            token = word.group()
            known = _WORDS.get(token)
            if known is not None:
                literal, fix = known
                if fix:
                    self.fixes.add(fix)
                self.out.append(literal)
                return word.end()
            if word.end() == n:
                # A literal cut off at the end has one completion (`tr`, `Non`, `-Inf`); a
                # number does not (`1.` may have been anything), so only the former is kept.
                values = {v for w, (v, _) in _WORDS.items() if w.startswith(token)}
                if len(values) == 1:
                    self.fixes.add("completed_literal")
                    self.out.append(values.pop())
                    return n
        raise _Unrepairable

    def _push(self, kind: str) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise _Unrepairable  # deeper than any JSON parser here reads back: stop now
        frame = _Frame(kind)
        frame.mark = len(self.out)
        self.stack.append(frame)
        self.open_counts[kind] += 1

    def _pop(self) -> None:
        frame = self.stack.pop()
        self.open_counts[frame.kind] -= 1
        self.out.append(_CLOSER[frame.kind])

    def _begin_member(self, frame: _Frame) -> None:
        frame.mark = len(self.out)
        if frame.state == _COMMA:
            self.out.append(",")

    def _close(self, closer: str) -> None:
        """A closer in the text: close its opener, inserting missing inner closers first."""
        opener = _OPENER[closer]
        if not self.open_counts[opener]:
            self.fixes.add("extra_closers")  # matches nothing open: drop it
            return
        while self.stack[-1].kind != opener:
            self._check_closable(self.stack[-1])
            self.fixes.add("misnested_closers")
            self._pop()
        self._check_closable(self.stack[-1])
        self._pop()

    def _check_closable(self, frame: _Frame) -> None:
        if frame.state in (_KEY, _COLON):
            raise _Unrepairable  # `{"a"}` or `{"a":}` in mid-text: a missing value
        if frame.state == _COMMA:
            self.fixes.add("trailing_comma")

    def _drop_tail(self, frame: _Frame) -> int:
        """The text ended inside the current member: drop it (comma included), then close."""
        del self.out[frame.mark :]
        frame.state = _VALUE  # closable as it stands; the scan ends here
        self.fixes.add("incomplete_tail")
        return len(self.text)

    def _close_truncated(self) -> None:
        frame = self.stack[-1]
        if frame.state in (_KEY, _COLON, _COMMA):
            if frame.state != _COMMA:
                del self.out[frame.mark :]
            self.fixes.add("incomplete_tail")
        while self.stack:
            self.fixes.add("closed_brackets")
            self._pop()

    def _after_top(self, pos: int) -> None:
        """After the top-level object: drop extra closers and concatenated objects."""
        text, n = self.text, len(self.text)
        while True:
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            if pos >= n or text[pos] not in "}]":
                break
            self.fixes.add("extra_closers")
            pos += 1
        if pos >= n:
            return
        if text[pos] != "{":
            raise _Unrepairable  # trailing prose or a stray value: not a known shape
        self.fixes.add("dropped_trailing")
        self.dropped_values = _count_values(text, pos)
        self.dropped_chars = n - pos


def _read_string(text: str, pos: int) -> tuple[str, int, bool, set[str]]:
    """Read the string starting at ``text[pos]`` (a quote): its strict JSON literal, the
    position after it, whether the text ended inside it, and the fixes it needed."""
    quote = text[pos]
    single = quote == "'"
    body_match = (_SQ_BODY if single else _DQ_BODY).match(text, pos + 1)
    assert body_match is not None  # both patterns match the empty string
    body, end = body_match.group(), body_match.end()
    truncated = end >= len(text) or text[end] != quote
    if truncated:
        # Only a lone backslash can stop the body before the end: a cut-off escape.
        end = len(text)
        body = _trim_partial_escape(body)
    fixes: set[str] = {"single_quotes"} if single else set()
    if single or _needs_rewrite(body):
        special = _SQ_SPECIAL if single else _DQ_SPECIAL
        body = special.sub(lambda m: _convert(m, single, fixes), body)
    return f'"{body}"', end if truncated else end + 1, truncated, fixes


def _needs_rewrite(body: str) -> bool:
    """True if a double-quoted body holds a raw control character or an invalid escape.

    Both checks run in C: removing the valid escapes left to right pairs backslashes as a
    JSON reader does, so a backslash left over starts an invalid escape. Bodies full of
    ``\\n`` (source code) then skip the per-escape callback of ``_convert``.
    """
    if _CONTROL_CHAR.search(body) is not None:
        return True
    return "\\" in body and "\\" in _VALID_ESCAPE.sub("", body)


def _convert(match: re.Match[str], single: bool, fixes: set[str]) -> str:
    escaped = match.group(1)
    if escaped is None:
        char = match.group()
        if char == '"':  # a bare double quote inside a single-quoted string
            return '\\"'
        fixes.add("control_characters")
        return _CONTROL_ESCAPES.get(char) or f"\\u{ord(char):04x}"
    if len(escaped) == 5 or escaped in _SIMPLE_ESCAPES:
        return match.group()
    if single and escaped == "'":
        return "'"
    raise _Unrepairable  # `\d`, `\x41`, `\u12`: not a JSON escape


def _trim_partial_escape(body: str) -> str:
    """Drop an escape cut off by the end of the text (``\\u00``, or a lone high surrogate)."""
    for _ in range(2):  # a partial escape may follow a lone high surrogate: `\ud83d\ude`
        partial = _PARTIAL_ESCAPE.search(body)
        if partial is None:
            break
        start = partial.start()
        backslashes = start - len(body[:start].rstrip("\\"))
        if backslashes % 2:
            break  # the backslash is itself escaped: `\\u12` is text, not an escape
        body = body[:start]
    return body


def _count_values(text: str, pos: int) -> int:
    """How many top-level values start in ``text[pos:]`` (string-aware bracket depth)."""
    depth = count = 0
    n = len(text)
    while pos < n:
        found = _STRUCTURAL.search(text, pos)
        if found is None:
            break
        ch, pos = found.group(), found.end()
        if ch in "\"'":
            body = (_DQ_BODY if ch == '"' else _SQ_BODY).match(text, pos)
            assert body is not None
            pos = body.end() + 1
        elif ch in "{[":
            count += depth == 0
            depth += 1
        else:
            depth = max(depth - 1, 0)
    return count


def _load_and_dump(text: str, *, exact: bool) -> str | None:
    """Parse the scan's strict JSON and write it compactly, or ``None`` if it is no object.

    orjson does both unless ``exact``; what it refuses or would round (integers beyond 64
    bits, escaped lone surrogates, numbers beyond a double) goes through the stdlib both ways,
    so nothing is silently turned into a float or ``null``.
    """
    if not exact:
        try:
            value = orjson.loads(text)
        except ValueError:
            pass
        else:
            if type(value) is not dict:
                return None
            try:
                return orjson.dumps(value).decode()
            except (TypeError, ValueError):
                pass
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _stdlib_dump(value) if type(value) is dict else None


def _stdlib_dump(value: dict[Any, Any]) -> str | None:
    # ASCII output keeps escaped lone surrogates escaped; allow_nan=False keeps it strict.
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _ordered(fixes: set[str]) -> tuple[str, ...]:
    return tuple(name for name in FIXES if name in fixes)


#: How much argument text a change may carry when ``log_content`` is on (hermes #74146).
MAX_LOGGED_CHARS: Final = 100_000


#: Tokens the scans of one request may read in all (three strings at their cap, ~75 ms).
MAX_REQUEST_TOKENS: Final = 3 * MAX_SCAN_TOKENS
