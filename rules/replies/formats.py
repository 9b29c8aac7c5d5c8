"""The wire formats in which models write tool calls as text, each read without a tokenizer.

A model that should answer with ``tool_calls`` sometimes writes its call into ``content``
instead, in its chat template's own markup (docs/replies.md). Each ``Format`` here knows one
such markup: the texts that open a block (``opens``), how a block ends (``closers``, or the end
of a JSON value), what its first characters must show (``early``), and how a complete block
reads as calls (``parse``), checked against the tools the request declared (``Declared``): a
call must name a declared tool and carry a JSON object of arguments, or the block is not a call
and stays text. Nothing here guesses: a block any parser doubts is ``None``.

The markups, as the serving stacks that parse them document them (vLLM's and SGLang's tool
parsers and their tests; the reports are in docs/replies.md):

- ``deepseek-v3``: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`` then
  a fenced JSON object, ``<｜tool▁call▁end｜>``, ...  ``<｜tool▁calls▁end｜>`` (V3.1 writes
  ``NAME<｜tool▁sep｜>{...}``).
- ``deepseek-dsml``: ``<｜DSML｜tool_calls>`` (V4; ``function_calls`` in V3.2), invokes
  ``<｜DSML｜invoke name="NAME">`` with ``<｜DSML｜parameter name="K" string="true|false">V``
  parameters or a JSON object body, ``</｜DSML｜tool_calls>``.
- ``kimi-k2``: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
  <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>``.
- ``minimax``: ``<minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter>
  </invoke></minimax:tool_call>``.
- ``mistral``: ``[TOOL_CALLS]NAME[ARGS]{...}`` (and the older ``[TOOL_CALLS][{"name": ...,
  "arguments": {...}}]``): no closing text, the block ends with its JSON.
- ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Qwen 2.5, Hermes).
- ``hermes-attr``: ``<tool_call id="..." name="NAME">{...}</tool_call>`` (DeepSeek V4 on its
  own API, felinics/Memoh#435).
- ``qwen3-coder``: ``<tool_call><function=NAME><parameter=K>V</parameter></function>
  </tool_call>``.
- ``glm``: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``.

XML-style parameter values are typed by the declared schema, as the serving stacks do: a
string parameter keeps its text, any other type must parse as JSON of that type.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

#: The tools a request declared: name -> its ``parameters`` schema (``{}`` if none).
Declared = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call read from text: the tool's name, its arguments as a JSON object's text,
    and the id the markup gave it, if any."""

    name: str
    arguments: str
    id: str = ""


#: What a block reader says after more text: the block's end (its length, opener included)
#: or ``MORE`` (not complete yet).
MORE: Final = -1


class JsonState:
    """Where a JSON text stands after what it was given: the depth of open objects and arrays,
    and whether it is inside a string. ``advance`` takes the text in pieces, in order."""

    __slots__ = ("depth", "escape", "in_string")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escape = False

    def advance(self, text: str, stop_at_close: bool = False) -> int:
        """Read ``text``; with ``stop_at_close``, stop just past the bracket that closes the
        outermost value and return how much was read (else ``len(text)``)."""
        for pos, char in enumerate(text):
            if self.in_string:
                if self.escape:
                    self.escape = False
                elif char == "\\":
                    self.escape = True
                elif char == '"':
                    self.in_string = False
            elif char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
            elif char in "}]":
                self.depth -= 1
                if stop_at_close and self.depth <= 0:
                    return pos + 1
        return len(text)

    @property
    def open(self) -> bool:
        return self.in_string or self.depth > 0


class Reader:
    """Where one block ends, read incrementally: ``feed`` gets the block's text in pieces (the
    first starts with its opener) and answers with the block's length once it is complete,
    else ``MORE``. Each piece is read once, so a block held over many small chunks costs
    linear time."""

    def feed(self, piece: str) -> int:
        raise NotImplementedError


class Closed(Reader):
    """A block that ends with one of ``closers``. With ``json_body``, a closer met while the
    body's JSON (from its first ``{``) is open, inside a string say, is text, not the end."""

    __slots__ = ("_brace_from", "_fed", "_json", "_json_at", "_tail", "closers", "json_body")

    def __init__(self, closers: tuple[str, ...], *, json_body: bool = False) -> None:
        self.closers = closers
        self.json_body = json_body
        self._fed = 0  # characters fed so far
        self._tail = ""  # the last ones, where a closer may have begun
        self._json: JsonState | None = None
        self._json_at = 0  # what the JSON state has read up to (absolute)
        self._brace_from = 0  # where the search for the body's first `{` goes on

    def feed(self, piece: str) -> int:
        text = self._tail + piece
        start = self._fed - len(self._tail)  # where ``text`` begins in the block
        self._fed += len(piece)
        found = sorted((at, c) for c in self.closers for at in _all(text, c))
        for at, closer in found:
            if self.json_body:
                self._read_json(text, start, start + at)
                if self._json is not None and self._json.open:
                    continue
            return start + at + len(closer)
        if self.json_body:
            self._read_json(text, start, self._fed)
        keep = max(map(len, self.closers)) - 1
        self._tail = text[-keep:] if keep else ""
        return MORE

    def _read_json(self, text: str, start: int, until: int) -> None:
        """Advance the body's JSON state to ``until`` (absolute; ``text`` begins at ``start``)."""
        if self._json is None:
            brace = text.find("{", self._brace_from - start, until - start)
            if brace == -1:
                self._brace_from = until
                return
            self._json = JsonState()
            self._json_at = start + brace
        if self._json_at < until:
            self._json.advance(text[self._json_at - start : until - start])
            self._json_at = until


def _all(text: str, needle: str) -> list[int]:
    """Every position of ``needle`` in ``text``."""
    found = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


class JsonEnd(Reader):
    """A block whose body is one JSON value after its markers (Mistral): it ends where that
    value closes. The value starts at the first ``{`` or ``[`` that ``start`` finds (``-1``:
    not yet seen) in the block's opening text."""

    __slots__ = ("_head", "_json", "_seen", "start")

    def __init__(self, start: Callable[[str], int]) -> None:
        self.start = start
        self._head = ""  # the block's text before its value starts
        self._json: JsonState | None = None
        self._seen = 0  # characters read into the value

    def feed(self, piece: str) -> int:
        if self._json is None:
            self._head += piece
            begin = self.start(self._head)
            if begin == -1:
                return MORE
            self._json = JsonState()
            piece = self._head[begin:]
            self._seen = begin
        read = self._json.advance(piece, stop_at_close=True)
        self._seen += read
        if read < len(piece) or (not self._json.open and read):
            return self._seen
        return MORE


#: ``early(block, declared)``: whether a block's first characters confirm it (``True``), refute
#: it (``False``: it is prose, its text stays text) or cannot tell yet (``None``; past the
#: scanner's confirm window that counts as refuted).
Early = Callable[[str, "Declared"], "bool | None"]


@dataclass(frozen=True, slots=True)
class Format:
    """One markup: the texts that open its blocks, how a block ends (``closers``, or the end of
    its JSON value when there are none), what its first characters must show (``early``), and
    the parse of a complete block (opener included) into calls, or ``None`` if it is not one."""

    name: str
    opens: tuple[str, ...]
    closers: tuple[str, ...]
    parse: Callable[[str, Declared], list[Call] | None]
    doc: str
    #: Its markers never occur in prose unless quoted: on under its models' profiles. The
    #: ambiguous ones (``<tool_call>``) are on only under their own profiles.
    unmistakable: bool
    early: Early | None = None
    #: A closer inside the body's JSON strings is text (Hermes' arguments may hold one).
    json_body: bool = False

    def reader(self) -> Reader:
        if self.closers:
            return Closed(self.closers, json_body=self.json_body)
        return JsonEnd(_mistral_value_start)


# --- values ---------------------------------------------------------------------------------


def json_object(text: str) -> str | None:
    """``text`` stripped if it is a JSON object, else ``None``."""
    body = text.strip()
    if not body.startswith("{"):
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(value, dict) else None


def _known(name: str, declared: Declared) -> bool:
    return name in declared


def _properties(declared: Declared, name: str) -> Mapping[str, Any]:
    props = declared.get(name, {}).get("properties")
    return props if isinstance(props, Mapping) else {}


def _types(schema: Any) -> set[str]:
    """The JSON types a property schema allows (``string`` when it says nothing usable)."""
    if not isinstance(schema, Mapping):
        return {"string"}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)} or {"string"}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            found |= _types(option)
    if "enum" in schema and not found:
        values = schema["enum"] if isinstance(schema["enum"], list) else []
        found = {"string"} if all(isinstance(v, str) for v in values) else {"any"}
    return found or {"string"}


_JSON_TYPES: Final[dict[str, Callable[[Any], bool]]] = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
    "any": lambda v: True,
}


def typed(text: str, schema: Any) -> tuple[bool, Any]:
    """An XML parameter's text as the value its schema declares: the text itself for a string
    (or an undeclared parameter), else JSON of a declared type. ``(False, None)`` if it is
    neither."""
    kinds = _types(schema)
    if "string" in kinds and len(kinds) == 1:
        return True, text
    try:
        value = orjson.loads(text.strip())
    except orjson.JSONDecodeError:
        return ("string" in kinds, text if "string" in kinds else None)
    if any(kind in _JSON_TYPES and _JSON_TYPES[kind](value) for kind in kinds):
        return True, value
    return ("string" in kinds, text if "string" in kinds else None)


def _arguments(name: str, pairs: list[tuple[str, str]], declared: Declared) -> str | None:
    """XML parameters typed by the tool's schema, as a JSON object's text (``None`` if a value
    does not fit its declared type, or a key repeats)."""
    props = _properties(declared, name)
    values: dict[str, Any] = {}
    for key, text in pairs:
        if key in values:
            return None
        ok, value = typed(text, props.get(key))
        if not ok:
            return None
        values[key] = value
    return orjson.dumps(values).decode()


# --- deepseek-v3 ----------------------------------------------------------------------------

_V3_OPEN = "<｜tool▁calls▁begin｜>"
_V3_CLOSE = "<｜tool▁calls▁end｜>"
_V3_CALL = re.compile(r"<｜tool▁call▁begin｜>(.*?)<｜tool▁call▁end｜>", re.DOTALL)
_V3_FENCED = re.compile(r"\A\s*```(?:json)?\s*\n(.*)\n\s*```\s*\Z", re.DOTALL)


def parse_deepseek_v3(block: str, declared: Declared) -> list[Call] | None:
    body = block[len(_V3_OPEN) : -len(_V3_CLOSE)]
    calls: list[Call] = []
    end = 0
    for match in _V3_CALL.finditer(body):
        if body[end : match.start()].strip():
            return None
        end = match.end()
        head, sep, rest = match.group(1).partition("<｜tool▁sep｜>")
        if not sep:
            return None
        if head.strip() == "function":  # V3: the type, then the name, then fenced JSON
            name, _, fenced = rest.partition("\n")
            inner = _V3_FENCED.match("\n" + fenced)
            arguments = json_object(inner.group(1)) if inner else None
        else:  # V3.1: the name, then the JSON
            name, arguments = head, json_object(rest)
        name = name.strip()
        if arguments is None or not _known(name, declared):
            return None
        calls.append(Call(name, arguments))
    if body[end:].strip() or not calls:
        return None
    return calls


# --- deepseek-dsml --------------------------------------------------------------------------

#: The DSML marker as the API and the relays write it: full-width bars, doubled, double
#: vertical lines, ASCII (lsdefine/GenericAgent#804).
_DSML_MARKS: Final = ("｜DSML｜", "｜｜DSML｜｜", "‖DSML‖", "|DSML|")
_DSML_BLOCKS: Final = ("tool_calls", "function_calls")
_DSML_OPENS: Final = tuple(f"<{mark}{block}>" for mark in _DSML_MARKS for block in _DSML_BLOCKS)


_DSML_CLOSES: Final = tuple(f"</{mark}{block}>" for mark in _DSML_MARKS for block in _DSML_BLOCKS)


def parse_deepseek_dsml(block: str, declared: Declared) -> list[Call] | None:
    mark = next(m for m in _DSML_MARKS if block.startswith(f"<{m}"))
    kind = block[len(mark) + 1 : block.index(">")]
    closer = f"</{mark}{kind}>"
    if not block.endswith(closer):
        return None
    body = block[block.index(">") + 1 : -len(closer)]
    m = re.escape(mark)
    invoke = re.compile(rf'<{m}invoke name="([^"<>]*)"\s*(?:/>|>(.*?)</{m}invoke>)', re.DOTALL)
    param = re.compile(
        rf'<{m}parameter name="([^"<>]*)" string="(true|false)">(.*?)</{m}parameter>', re.DOTALL
    )
    calls: list[Call] = []
    end = 0
    for match in invoke.finditer(body):
        if body[end : match.start()].strip():
            return None
        end = match.end()
        name, inner = match.group(1), match.group(2) or ""
        if not _known(name, declared):
            return None
        arguments = json_object(inner) if inner.strip().startswith("{") else None
        if arguments is None:
            values: dict[str, Any] = {}
            rest = 0
            for p in param.finditer(inner):
                if inner[rest : p.start()].strip() or p.group(1) in values:
                    return None
                rest = p.end()
                if p.group(2) == "true":
                    values[p.group(1)] = p.group(3)
                else:
                    try:
                        values[p.group(1)] = orjson.loads(p.group(3))
                    except orjson.JSONDecodeError:
                        return None
            if inner[rest:].strip():
                return None
            arguments = orjson.dumps(values).decode()
        calls.append(Call(name, arguments))
    if body[end:].strip() or not calls:
        return None
    return calls


# --- kimi-k2 --------------------------------------------------------------------------------

_KIMI_OPENS: Final = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_KIMI_CLOSES: Final = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*((?:functions\.)?([A-Za-z0-9_.\-]+?):(\d+))\s*"
    r"<\|tool_call_argument_begin\|>(.*?)<\|tool_call_end\|>",
    re.DOTALL,
)


def parse_kimi_k2(block: str, declared: Declared) -> list[Call] | None:
    opener = next(o for o in _KIMI_OPENS if block.startswith(o))
    closer = next((c for c in _KIMI_CLOSES if block.endswith(c)), None)
    if closer is None:
        return None
    body = block[len(opener) : -len(closer)]
    calls: list[Call] = []
    end = 0
    for match in _KIMI_CALL.finditer(body):
        if body[end : match.start()].strip():
            return None
        end = match.end()
        call_id, name, arguments = match.group(1), match.group(2), json_object(match.group(4))
        if arguments is None or not _known(name, declared):
            return None
        calls.append(Call(name, arguments, call_id))
    if body[end:].strip() or not calls:
        return None
    return calls


# --- minimax --------------------------------------------------------------------------------

_MINIMAX_OPEN = "<minimax:tool_call>"
_MINIMAX_CLOSE = "</minimax:tool_call>"
_MINIMAX_INVOKE = re.compile(r'<invoke name="([^"<>]*)">(.*?)</invoke>', re.DOTALL)
_MINIMAX_PARAM = re.compile(r'<parameter name="([^"<>]*)">(.*?)</parameter>', re.DOTALL)


def parse_minimax(block: str, declared: Declared) -> list[Call] | None:
    body = block[len(_MINIMAX_OPEN) : -len(_MINIMAX_CLOSE)]
    calls: list[Call] = []
    end = 0
    for match in _MINIMAX_INVOKE.finditer(body):
        if body[end : match.start()].strip():
            return None
        end = match.end()
        name, inner = match.group(1), match.group(2)
        pairs = _pairs(_MINIMAX_PARAM, inner)
        if pairs is None or not _known(name, declared):
            return None
        arguments = _arguments(name, [(k, _trim_newlines(v)) for k, v in pairs], declared)
        if arguments is None:
            return None
        calls.append(Call(name, arguments))
    if body[end:].strip() or not calls:
        return None
    return calls


def _pairs(pattern: re.Pattern[str], inner: str) -> list[tuple[str, str]] | None:
    """The (key, text) pairs ``pattern`` finds in ``inner``, with nothing but whitespace
    between them (``None`` otherwise)."""
    pairs: list[tuple[str, str]] = []
    end = 0
    for match in pattern.finditer(inner):
        if inner[end : match.start()].strip():
            return None
        end = match.end()
        pairs.append((match.group(1), match.group(2)))
    return None if inner[end:].strip() else pairs


def _trim_newlines(text: str) -> str:
    """A parameter value without the one newline its template writes on each side."""
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


# --- mistral --------------------------------------------------------------------------------

_MISTRAL_OPEN = "[TOOL_CALLS]"
_NAME = r"[A-Za-z0-9_.\-]+"
_MISTRAL_CALL = re.compile(
    rf"\[TOOL_CALLS\]\s*({_NAME})\s*(?:\[CALL_ID\]\s*([A-Za-z0-9_-]{{1,64}})\s*)?\[ARGS\]"
)


def _mistral_value_start(block: str) -> int:
    """Where the JSON value of a Mistral block starts (``-1``: not seen yet)."""
    rest = block[len(_MISTRAL_OPEN) :]
    if rest.lstrip().startswith("["):
        return len(block) - len(rest.lstrip())
    match = _MISTRAL_CALL.match(block)
    if match is None:
        return -1
    brace = block.find("{", match.end())
    return -1 if brace == -1 else brace


def _mistral_early(block: str, declared: Declared) -> bool | None:
    rest = block[len(_MISTRAL_OPEN) :].lstrip()
    if not rest:
        return None
    if rest.startswith("["):  # the array form: [{"name": ...
        after = rest[1:].lstrip()
        return None if not after else after.startswith("{")
    name = re.match(_NAME, rest)
    if name is None:
        return False
    after = rest[name.end() :].lstrip()
    if not after:
        return _could_name(name.group(), declared)
    if not _known(name.group(), declared):
        return False
    if after.startswith("[ARGS]"):
        return True
    call_id = re.match(r"\[CALL_ID\]\s*[A-Za-z0-9_-]{0,64}\s*", after)
    if call_id is not None:
        tail = after[call_id.end() :]
        return True if tail.startswith("[ARGS]") else _prefix(tail, "[ARGS]")
    return _prefix(after, "[ARGS]", "[CALL_ID]")


def _prefix(text: str, *literals: str) -> bool | None:
    """``None`` (undecided) if ``text`` may still grow into one of ``literals``, else
    ``False``."""
    return None if any(literal.startswith(text) for literal in literals) else False


def _could_name(partial: str, declared: Declared) -> bool | None:
    """``None`` if ``partial`` may still grow into a declared tool's name, else ``False``."""
    return None if any(name.startswith(partial) for name in declared) else False


def parse_mistral(block: str, declared: Declared) -> list[Call] | None:
    rest = block[len(_MISTRAL_OPEN) :].lstrip()
    if rest.startswith("["):
        return _mistral_array(rest, declared)
    match = _MISTRAL_CALL.match(block)
    if match is None:
        return None
    name, call_id = match.group(1), match.group(2) or ""
    arguments = json_object(block[match.end() :])
    if arguments is None or not _known(name, declared):
        return None
    return [Call(name, arguments, call_id)]


def _mistral_array(text: str, declared: Declared) -> list[Call] | None:
    try:
        items = orjson.loads(text.strip())
    except orjson.JSONDecodeError:
        return None
    if not isinstance(items, list) or not items:
        return None
    calls: list[Call] = []
    for item in items:
        if not isinstance(item, dict) or set(item) - {"name", "arguments", "id"}:
            return None
        name, arguments = item.get("name"), item.get("arguments", {})
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
        if not _known(name, declared):
            return None
        call_id = item["id"] if isinstance(item.get("id"), str) else ""
        calls.append(Call(name, orjson.dumps(arguments).decode(), call_id))
    return calls


# --- the <tool_call> family -----------------------------------------------------------------

_TAG_OPEN = "<tool_call>"
_TAG_CLOSE = "</tool_call>"
#: How far into an ambiguous block its format must show itself (the club-3090#72 fix: a
#: literal ``<tool_call>`` in prose is released once this many characters say it is prose).
CONFIRM_WINDOW: Final = 64


def _tag_body(block: str, opener: str = _TAG_OPEN) -> str | None:
    if not (block.startswith(opener) and block.endswith(_TAG_CLOSE)):
        return None
    return block[len(opener) : -len(_TAG_CLOSE)]


def _hermes_early(block: str, declared: Declared) -> bool | None:
    rest = block[len(_TAG_OPEN) :].lstrip()
    if not rest:
        return None
    if not rest.startswith("{"):
        return False
    key = rest[1:].lstrip()
    return True if key.startswith('"name"') else _prefix(key, '"name"')


def parse_hermes(block: str, declared: Declared) -> list[Call] | None:
    body = _tag_body(block)
    if body is None:
        return None
    try:
        value = orjson.loads(body.strip())
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or set(value) - {"name", "arguments", "parameters"}:
        return None
    name = value.get("name")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _loads(arguments)
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    if not _known(name, declared):
        return None
    return [Call(name, orjson.dumps(arguments).decode())]


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


_ATTR_OPEN = "<tool_call "
_ATTR_HEAD = re.compile(r'\A<tool_call((?:\s+(?:id|name)="[^"<>]*")+)\s*>')
_ATTR_SO_FAR = re.compile(r'\A<tool_call(?:\s+(?:id|name)="[^"<>]*")*\s*')
_ATTR = re.compile(r'(id|name)="([^"<>]*)"')


def _attr_early(block: str, declared: Declared) -> bool | None:
    head = _ATTR_HEAD.match(block)
    if head is not None:
        return "name=" in head.group(1)
    done = _ATTR_SO_FAR.match(block)
    assert done is not None
    tail = block[done.end() :]  # a partial attribute: `na`, `name="get_we`
    partial = re.fullmatch(r'(?:(?:i|id|n|na|nam|name)(?:="[^"<>]*)?|id=|name=)?', tail)
    return None if partial is not None else False


def parse_hermes_attr(block: str, declared: Declared) -> list[Call] | None:
    head = _ATTR_HEAD.match(block)
    if head is None or not block.endswith(_TAG_CLOSE):
        return None
    attributes = dict(_ATTR.findall(head.group(1)))
    name = attributes.get("name", "")
    arguments = json_object(block[head.end() : -len(_TAG_CLOSE)])
    if arguments is None or not _known(name, declared):
        return None
    return [Call(name, arguments, attributes.get("id", ""))]


_CODER_FUNCTION = re.compile(r"\A\s*<function=([^>\n]+)>(.*)</function>\s*\Z", re.DOTALL)
_CODER_PARAM = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)


def _coder_early(block: str, declared: Declared) -> bool | None:
    rest = block[len(_TAG_OPEN) :].lstrip()
    return True if rest.startswith("<function=") else _prefix(rest, "<function=")


def parse_qwen3_coder(block: str, declared: Declared) -> list[Call] | None:
    body = _tag_body(block)
    match = _CODER_FUNCTION.match(body) if body is not None else None
    if match is None:
        return None
    name = match.group(1).strip()
    pairs = _pairs(_CODER_PARAM, match.group(2))
    if pairs is None or not _known(name, declared):
        return None
    arguments = _arguments(name, [(k.strip(), _trim_newlines(v)) for k, v in pairs], declared)
    return None if arguments is None else [Call(name, arguments)]


_GLM_PARAM = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


def _glm_early(block: str, declared: Declared) -> bool | None:
    rest = block[len(_TAG_OPEN) :].lstrip()
    name = re.match(_NAME, rest)
    if name is None:
        return None if not rest else False
    after = rest[name.end() :].lstrip()
    if not after:
        return _could_name(name.group(), declared)
    if not _known(name.group(), declared):
        return False
    if after.startswith(("<arg_key>", _TAG_CLOSE)):
        return True
    return _prefix(after, "<arg_key>", _TAG_CLOSE)


def parse_glm(block: str, declared: Declared) -> list[Call] | None:
    body = _tag_body(block)
    head = re.match(rf"\A\s*({_NAME})", body) if body is not None else None
    if body is None or head is None or not _known(head.group(1), declared):
        return None
    name = head.group(1)
    pairs = _pairs(_GLM_PARAM, body[head.end() :])
    if pairs is None:
        return None
    arguments = _arguments(name, [(k.strip(), v) for k, v in pairs], declared)
    return None if arguments is None else [Call(name, arguments)]


# --- the formats ----------------------------------------------------------------------------

#: Every format, by name; the order is the order in which formats sharing an opener are tried.
FORMATS: Final = {
    f.name: f
    for f in (
        Format(
            "deepseek-v3",
            (_V3_OPEN,),
            (_V3_CLOSE,),
            parse_deepseek_v3,
            "DeepSeek V3/V3.1 tool-call tokens (`<｜tool▁calls▁begin｜>`)",
            unmistakable=True,
        ),
        Format(
            "deepseek-dsml",
            _DSML_OPENS,
            _DSML_CLOSES,
            parse_deepseek_dsml,
            "DeepSeek V3.2/V4 DSML (`<｜DSML｜tool_calls>`)",
            unmistakable=True,
        ),
        Format(
            "kimi-k2",
            _KIMI_OPENS,
            _KIMI_CLOSES,
            parse_kimi_k2,
            "Kimi K2 sections (`<|tool_calls_section_begin|>`)",
            unmistakable=True,
        ),
        Format(
            "minimax",
            (_MINIMAX_OPEN,),
            (_MINIMAX_CLOSE,),
            parse_minimax,
            "MiniMax M2 (`<minimax:tool_call>`)",
            unmistakable=True,
        ),
        Format(
            "mistral",
            (_MISTRAL_OPEN,),
            (),
            parse_mistral,
            "Mistral (`[TOOL_CALLS]name[ARGS]{...}`)",
            unmistakable=True,
            early=_mistral_early,
        ),
        Format(
            "hermes-attr",
            (_ATTR_OPEN,),
            (_TAG_CLOSE,),
            parse_hermes_attr,
            'DeepSeek V4 on its own API (`<tool_call id="..." name="...">{...}`)',
            unmistakable=False,
            early=_attr_early,
            json_body=True,
        ),
        Format(
            "hermes",
            (_TAG_OPEN,),
            (_TAG_CLOSE,),
            parse_hermes,
            'Hermes and Qwen 2.5 (`<tool_call>{"name": ...}`)',
            unmistakable=False,
            early=_hermes_early,
            json_body=True,
        ),
        Format(
            "qwen3-coder",
            (_TAG_OPEN,),
            (_TAG_CLOSE,),
            parse_qwen3_coder,
            "Qwen3-Coder (`<tool_call><function=name>`)",
            unmistakable=False,
            early=_coder_early,
        ),
        Format(
            "glm",
            (_TAG_OPEN,),
            (_TAG_CLOSE,),
            parse_glm,
            "GLM 4.5 to 5 (`<tool_call>name<arg_key>`)",
            unmistakable=False,
            early=_glm_early,
        ),
    )
}
