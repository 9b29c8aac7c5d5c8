"""Reading an upstream's refusal: which catalogued class it is, and what it names.

An upstream's 4xx body is untrusted input (upstreams quote the client's own values back: a model
name, an id, a key), so reading it is bounded in time and memory whatever it holds:

- at most ``MAX_TEXT`` characters of error text are read (a gzipped body is inflated to at most
  ``MAX_INFLATED`` bytes first);
- the catalogue's texts are matched as *ordered literal pieces* (``Template``): a template's
  ``{slot}`` matches anything, so a text carries the template when its pieces occur in order,
  which the leftmost occurrence of each piece decides (``str.find``, linear). No regular
  expression with a lazy gap runs on the text (108 of them backtracked for minutes on a crafted
  200-character model name);
- the structural reading (the field path, the index, the key, the words) uses only
  deterministic expressions: each alternative starts with a different character, so a match
  never backtracks more than one step.

Two layers, in this order:

1. **The catalogue** (``CATALOGUE``): every check's text and every profile's override, longest
   first, so a specific text wins over a generic one it contains.
2. **The stable parts** (``structural``): providers word the same refusal differently and fill in
   ids, names and positions; what stays is the field path (``messages[1].tool_calls[0].type``,
   ``messages.1.tool_calls.0.type``, a pydantic ``loc``), the index and a few words
   (``duplicate``, ``unknown``, ``extra_forbidden``). A table maps those to the same classes.

``read_error`` also says what the refusal *names* (a message, a field, a role, a tool call) and
whether it is *about* something no repair of the messages fixes (context length, auth, the
model, rate, size): recovery escalates the first kind when no class matched and never retries
the second (proxy/recovery/retry.py).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import orjson

from rules.chat.bookkeeping_keys import MESSAGE_KEYS as BOOKKEEPING_KEYS
from rules.providers.contract import CHECKS
from rules.providers.contract.messages import MESSAGES_CHECKS
from rules.providers.contract.responses import CHECKS as RESPONSES_CHECKS
from rules.providers.profiles import PROFILES

#: The characters of error text classified: a refusal's stable parts come first; what follows
#: (a quoted body, a stack) is not read.
MAX_TEXT = 8 * 1024
#: A gzipped error body is inflated to at most this many bytes.
MAX_INFLATED = 256 * 1024
#: How many paths of one text are read (the first ones).
MAX_PATHS = 16

_SLOT = re.compile(r"\{[a-z_]*\}")
#: A catalogued text with at least this many literal characters is specific enough to come
#: before what a field path says.
STRONG_CHARS = 40
_MAX_FILL = 64  # the most a slot of a template cut short holds


@dataclass(frozen=True, slots=True)
class Template:
    """A catalogued text as its literal pieces, in order; between two pieces, anything."""

    pieces: tuple[str, ...]
    code: str

    @classmethod
    def of(cls, text: str, code: str) -> Template:
        plain = text.replace("{{", "\0").replace("}}", "\1")
        pieces = (p.replace("\0", "{").replace("\1", "}") for p in _SLOT.split(plain))
        return cls(tuple(piece for piece in pieces if piece), code)

    @property
    def strong(self) -> bool:
        """Whether the text says enough to win over a field path (not a short generic one)."""
        return sum(len(piece) for piece in self.pieces) >= STRONG_CHARS

    def found_in(self, text: str) -> bool:
        """Whether ``text`` carries this template: each piece after the previous one. Taking
        each piece's leftmost occurrence is enough (a later one leaves less room for the rest),
        so this is one forward scan: linear in ``text``. A text that carries a strong start of
        the template and then ends inside a piece is the refusal quoted short (a report, a
        client's log line cut at a sentence): it carries the template too."""
        at = 0
        matched = 0
        for piece in self.pieces:
            found = text.find(piece, at)
            if found < 0:
                return matched >= STRONG_CHARS and _ends_inside(text, at, piece)
            at = found + len(piece)
            matched += len(piece)
        return True


def _ends_inside(text: str, at: int, piece: str) -> bool:
    """Whether ``text`` ends, at or after ``at``, with the start of ``piece`` (or right at
    ``at``): the rest of the template was cut off. What comes before that start fills the
    slot: one short word (no space), never a sentence of its own. At most ``len(piece)`` short
    comparisons."""
    tail = text[at:].rstrip()
    if not tail:
        return True
    for size in range(min(len(piece), len(tail)), -1, -1):
        if tail.endswith(piece[:size]):
            fill = tail[: len(tail) - size]
            if len(fill) <= _MAX_FILL and not any(char.isspace() for char in fill):
                return True
    return False


def _catalogue() -> tuple[Template, ...]:
    """Every (text, code) pair: chat, Responses and Messages checks, and every profile's
    override. Two checks may share a text (deepseek-reasoner's successive users and assistants):
    both stay, in check order, so recovery can try each."""
    texts: dict[tuple[str, str], None] = {}
    for check in (*CHECKS, *RESPONSES_CHECKS, *MESSAGES_CHECKS):
        texts[check.text, check.code] = None
    for profile in PROFILES.values():
        for code, overrides in (*profile.contract.items(), *profile.messages_contract.items()):
            if "text" in overrides:
                texts[overrides["text"], code] = None
    # longest first (stable): a specific text wins over a generic one it contains
    ordered = sorted(texts, key=lambda pair: -len(pair[0]))
    return tuple(Template.of(text, code) for text, code in ordered)


CATALOGUE = _catalogue()

# --- reading the body --------------------------------------------------------------------------

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Refusal:
    """What an error body says, read in bounded time."""

    #: The refusal's message (capped), or the body's text when it has no message.
    text: str
    #: Field paths the body names: pydantic ``loc`` lists first, then those in the text.
    paths: tuple[Path, ...] = ()


def _inflate(body: bytes) -> bytes:
    if body[:2] != b"\x1f\x8b":
        return body
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(body, MAX_INFLATED)
    except zlib.error:
        return body


def _loc(value: Any) -> Path | None:
    if not isinstance(value, list):
        return None
    path = tuple(p for p in value[:16] if isinstance(p, str | int) and not isinstance(p, bool))
    if path and path[0] in ("body", "query"):
        path = path[1:]
    return path or None


def _message_of(data: Any, paths: list[Path], *, relayed: bool = False) -> str | None:
    """The message of a decoded error body: OpenAI's and Anthropic's ``error.message`` (plus
    OpenAI's ``param``), Mistral's ``message``, xAI's ``error`` string, FastAPI/pydantic's
    ``detail`` (a string, or a list of ``{type, loc, msg}``: the ``loc`` go to ``paths``), the
    first of Gemini's list; for OpenRouter's "Provider returned error", the message of the
    provider's body it relays in ``error.metadata.raw`` (one level; BerriAI/litellm#27439)."""
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return None
    error = data.get("error", data)
    if isinstance(error, str):
        return error
    if not isinstance(error, dict):
        return None
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if isinstance(raw, str) and not relayed:
        try:
            inner = _message_of(orjson.loads(raw[: MAX_TEXT * 4]), paths, relayed=True)
        except orjson.JSONDecodeError:
            inner = None
        if inner is not None:
            return inner
    parts: list[str] = []
    message = error.get("message")
    if isinstance(message, str):
        parts.append(message)
    param = error.get("param")
    if isinstance(param, str) and param:
        parts.append(f"(param {param})")
    detail = error.get("detail", data.get("detail"))
    if isinstance(detail, str):
        parts.append(detail)
    elif isinstance(detail, list):
        for item in detail[:MAX_PATHS]:
            if not isinstance(item, dict):
                continue
            loc = _loc(item.get("loc"))
            if loc is not None:
                paths.append(loc)
            kind, msg = item.get("type"), item.get("msg")
            shown = ".".join(str(p) for p in loc or ())
            parts.append(f"{shown}: {msg if isinstance(msg, str) else ''} [{kind}]")
    return " ".join(parts) if parts else None


def read_refusal(body: bytes | None) -> Refusal | None:
    """The refusal's text and the paths it names, or ``None`` for an empty body."""
    if not body:
        return None
    body = _inflate(body)
    paths: list[Path] = []
    try:
        text = _message_of(orjson.loads(body), paths)
    except orjson.JSONDecodeError:
        text = None
    if text is None:
        text = body[: MAX_TEXT * 4].decode("utf-8", "replace")
    text = text[:MAX_TEXT]
    paths.extend(_paths_in(text))
    return Refusal(text, tuple(paths[:MAX_PATHS]))


def error_text(body: bytes | None) -> str | None:
    """The refusal's text as classified (capped at ``MAX_TEXT``)."""
    refusal = read_refusal(body)
    return None if refusal is None else refusal.text


# --- the stable parts --------------------------------------------------------------------------

#: A field path as providers write it: ``messages[1].tool_calls[0].type`` (OpenAI),
#: ``messages.[8].content`` (OpenAI's param), ``messages.1.role`` (pydantic), ``message[4]``
#: (DeepSeek), ``input[2].call_id`` (Responses). Deterministic: after the root, each step starts
#: with ``[``, ``.[``, ``.<digit>`` or ``.<letter>``, never two at once.
_PATH = re.compile(  # never a path inside ``tool_choice`` (its ``tools`` are allowed_tools')
    r"\b(?<!tool_choice\.)(messages?|input|tools)((?:\[\d{1,7}\]|\.(?:\[\d{1,7}\]|\d{1,7}\b|[A-Za-z_][A-Za-z0-9_]{0,63}))*)"
)
_STEP = re.compile(r"\[(\d{1,7})\]|\.(\d{1,7})\b|\.([A-Za-z_][A-Za-z0-9_]{0,63})")
#: An index given in words: ``message index 3``, ``at index 3``, ``position 3``.
_INDEX_WORDS = re.compile(r"\b(?:index|position) (\d{1,7})\b")
#: A key quoted after the words that name an unexpected one: ``unknown field(s) ['x']``,
#: ``unknown field `x```, ``unrecognized field "x"``, ``Extra inputs ... field: 'x'``.
_NAMED_KEY = re.compile(
    r"(?:unknown|unrecognized|unexpected|extra|unsupported) (?:field|key|propert(?:y|ies)|"
    r"parameter|argument)s?(?:\(s\))?:? ?\[?[\"'`]([A-Za-z_][A-Za-z0-9_]{0,63})[\"'`]"
)
_WORD = re.compile(r"[a-z_]+")

# What a refusal names in its own words, for the generic repairs (rules/providers/named_repairs.py).
# Each expression reads quoted names and values of bounded length, with no gap between two pieces
# that could backtrack: a match costs at most a few steps per character of the text.
_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
#: ``Unsupported parameter: 'x'``, ``Unrecognized request argument supplied: x``, ``unknown
#: field `x```, ``Unknown parameter: 'x'``, ``extra field 'x'``.
_UNSUPPORTED_KEY = re.compile(
    r"(?:unsupported|unrecognized|unknown|unexpected|extra) (?:request )?"
    r"(?:parameter|argument|field|key|propert(?:y|ies))s?(?:\(s\))?(?: supplied)?:? ?\[?"
    rf"[\"'`]?({_NAME})",
    re.IGNORECASE,
)
#: ``property 'id' is unsupported`` (Groq), ``property 'messages.2.assistant.reasoning_content'
#: is unsupported`` (Cerebras): the last step of the name.
_PROPERTY_UNSUPPORTED = re.compile(
    r"propert(?:y|ies) [\"'`]((?:[A-Za-z0-9_]{1,64}\.){0,8}[A-Za-z_][A-Za-z0-9_]{0,63})[\"'`] "
    r"(?:is|are) (?:unsupported|not supported|not allowed|not permitted)",
    re.IGNORECASE,
)
#: ``'x' is not supported``.
_NOT_SUPPORTED = re.compile(
    rf"[\"'`]({_NAME})[\"'`] is not (?:supported|allowed|permitted)", re.IGNORECASE
)
#: ``Argument not supported: instructions and previous_response_id together`` (xAI).
_ARGUMENT_NOT_SUPPORTED = re.compile(
    rf"argument not supported: ({_NAME})(?: and ({_NAME}))?", re.IGNORECASE
)
#: Gemini: ``Invalid JSON payload received. Unknown name "store": Cannot find field.``
_UNKNOWN_NAME = re.compile(rf"unknown name [\"'`]({_NAME})[\"'`]", re.IGNORECASE)
#: Cohere: ``unknown field: parameter 'strict' is not a valid field``.
_NOT_A_VALID_FIELD = re.compile(
    rf"parameter [\"'`]({_NAME})[\"'`] is not a valid field", re.IGNORECASE
)
#: Anthropic: ```temperature` and `top_p` cannot both be specified for this model``.
_CANNOT_BOTH = re.compile(
    rf"[\"'`]({_NAME})[\"'`] and [\"'`]({_NAME})[\"'`] cannot both be specified", re.IGNORECASE
)
#: OpenAI's ``param`` of a refusal that says the thing is not supported.
_PARAM = re.compile(rf"\(param ({_NAME})\)")
_NOT_SUPPORTED_WORDS = ("not supported", "unsupported", "not allowed", "not permitted")
#: SiliconFlow: ``The `required` option for tool_choice is not yet supported.``
_OPTION_NOT_SUPPORTED = re.compile(
    rf"[\"'`]({_NAME})[\"'`] option for ({_NAME}) is not (?:yet )?supported", re.IGNORECASE
)
#: LM Studio: ``Invalid tool_choice type: 'object'. Supported string values: none, auto,
#: required``.
_INVALID_TYPE = re.compile(
    rf"invalid ({_NAME}) type: '([a-z]{{1,16}})'\. supported (?:string )?values: "
    r"([a-z_, ]{0,200})",
    re.IGNORECASE,
)
#: OpenAI: ``Unsupported value: 'temperature' does not support 0.5 with this model. Only the
#: default (1) value is supported.``
_DEFAULT_ONLY = re.compile(
    rf"unsupported value: '({_NAME})' does not support ([\w.+-]{{1,32}}) with this model\. "
    r"only the default \(([\w.+-]{1,32})\) value is supported",
    re.IGNORECASE,
)
#: pydantic's repr (vLLM): ``'loc': ('body', 'messages', 1, 'role'), 'msg': "Input should be
#: 'user' or 'assistant'", 'input': 'system'``.
_INPUT_SHOULD_BE = re.compile(
    r"'msg': \"input should be ([^\"]{1,200})\", 'input': '([^']{1,64})'", re.IGNORECASE
)
_LOC_ROLE = re.compile(r"'loc': \('body', 'messages', (\d{1,7}), 'role'\)")
#: MiniMax: ``chat content has invalid message role: system``.
_INVALID_ROLE = re.compile(r"invalid message role: ([a-z_]{1,32})", re.IGNORECASE)
#: OpenAI: ``Expected an ID that begins with 'fc'``.
_ID_PREFIX = re.compile(r"expected an id that begins with '([a-z_]{1,16})'", re.IGNORECASE)
#: Kimi (via OpenRouter): ``supports at most 1 image per prompt``.
_IMAGE_LIMIT = re.compile(r"supports at most (\d{1,3}) images? per (?:prompt|request)")
#: OpenAI, ``store: false``: ``Item with id 'rs_…' not found. Items are not persisted when
#: `store` is set to false.``
_NOT_PERSISTED = re.compile(
    r"item with id '([^']{1,128})' not found\. items are not persisted", re.IGNORECASE
)
#: ``Use 'max_completion_tokens' instead``.
_INSTEAD = re.compile(rf"use [\"'`]({_NAME})[\"'`] instead", re.IGNORECASE)
#: serde: ``unknown variant `tool_reference`, expected `text``` (or ``expected one of `a`, `b```).
_VARIANT = re.compile(
    r"unknown variant `([^`]{1,64})`"
    r"(?:, expected (?:one of )?((?:`[^`]{1,64}`(?:, | or )?){1,16}))?"
)
#: OpenAI: ``Invalid value: 'x'. Supported values are: 'a' and 'b'.``
_INVALID_VALUE = re.compile(
    r"invalid value: '([^']{1,64})'\. supported values are: "
    r"((?:'[^']{1,64}'(?:, |,? and )?){1,16})",
    re.IGNORECASE,
)
#: DashScope: ``developer is not one of ['system', 'assistant', 'user', 'tool', 'function']``.
_NOT_ONE_OF = re.compile(r"([A-Za-z_][A-Za-z0-9_-]{0,31}) is not one of \[([^\]]{0,400})\]")
#: MiniMax: ``invalid thinking.type: "enabled" (allowed: adaptive, disabled)``.
_INVALID_FIELD_VALUE = re.compile(
    r"invalid ([a-z_][a-z0-9_]{0,31}(?:\.[a-z_][a-z0-9_]{0,31}){0,4}): \"([^\"]{1,64})\" "
    r"\(allowed: ([^)]{0,300})\)",
    re.IGNORECASE,
)
#: OpenAI Responses: ``Item 'msg_…' was provided without its required 'reasoning' item:
#: 'rs_…'`` (continuedev/continue#11994), ``Item 'msg_…' of type 'message' was provided ...``
#: (NousResearch/hermes-agent#97442): the item's id, its type when said, the id it requires.
_REQUIRED_ITEM = re.compile(
    r"item '([^']{1,128})' (?:of type '([a-z_]{1,32})' )?was provided without its required "
    r"'([a-z_]{1,32})' item: '([^']{1,128})'",
    re.IGNORECASE,
)
#: ``Expected a string with maximum length 40``.
_MAX_LENGTH = re.compile(r"maximum length (\d{1,7})")
#: A value refused as empty or too short.
_TOO_SHORT = (
    "too short",
    "minimum length",
    "must not be empty",
    "cannot be empty",
    "is empty",
    "长度不足",
)
#: Words that say a key is refused (not its value).
_REFUSED_KEY_WORDS = frozenset(
    {"extra", "extra_forbidden", "unknown", "unsupported", "unrecognized", "forbidden"}
)
_QUOTED = re.compile(r"[`'\"]([^`'\"]{1,64})[`'\"]")
#: A role name that some providers write as a step of a message path
#: (``messages.2.assistant.reasoning_content``, Cerebras): not a field.
_ROLE_STEPS = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


@dataclass(frozen=True, slots=True)
class Named:
    """What a refusal names in its own words, for the generic repairs
    (rules/providers/named_repairs.py); each is checked against the request before anything acts on
    it."""

    #: Parameters or keys it says are unsupported, unknown or unrecognized, in order.
    keys: tuple[str, ...] = ()
    #: Keys of a tool definition it refuses at a tools path (``tools.14.search_content_types``,
    #: ``tools[0].function.strict``): for the tool key repair only, never a parameter or a field.
    tool_keys: tuple[str, ...] = ()
    #: The tools whose entry or ``type`` a path names (``tools[0]``, ``tools.8.type``), by
    #: position: a refused tool type is that tool's (``named_repairs._tool_type``), and a
    #: tools path is evidence against a server tool only where one stands.
    tools_at: tuple[int, ...] = ()
    #: The tools any path names inside (``tools.0.input_schema``, ``tools[2].name``), by
    #: position: a refusal of what is inside a tool is no evidence against another tool.
    tools_in: tuple[int, ...] = ()
    #: The name it says to use instead (``Use 'max_completion_tokens' instead``).
    instead: str | None = None
    #: A value it refuses (a role, a content part type, an enum value) ...
    value: str | None = None
    #: ... the dotted field it refuses it in, when it says (``thinking.type``) ...
    value_at: str | None = None
    #: ... and the values it accepts there.
    allowed: tuple[str, ...] = ()
    #: An item it names by its id and the id of the item it requires right before it
    #: (Responses: ``Item 'msg_…' was provided without its required 'reasoning' item: 'rs_…'``):
    #: the first is moved to the second where the request holds both, or sent without its id
    #: where no item of the request carries the second (named_repairs.py).
    order: tuple[str, str] | None = None
    #: The type it says the item it names is (``of type 'message'``), when it says.
    order_type: str | None = None
    #: The maximum length it names (of an id).
    max_length: int | None = None
    #: It says a value is empty or too short (an id: ``string too short``, ``长度不足``).
    too_short: bool = False
    #: It refuses two keys together (``... and ... together``, ``cannot both be specified``):
    #: one of them goes, not both.
    together: bool = False
    #: It takes only the default of the value it names (``value_at``): the parameter goes.
    default_only: bool = False
    #: The prefix it expects of an id (``Expected an ID that begins with 'fc'``).
    id_prefix: str | None = None
    #: The most images it takes in one request.
    max_images: int | None = None
    #: An item it says is not stored (``store: false``), to be sent in full or left out.
    unpersisted: str | None = None


def _quoted(text: str | None) -> tuple[str, ...]:
    return tuple(_QUOTED.findall(text or ""))[:16]


def _named_keys(text: str, lowered: str, paths: Sequence[Path]) -> list[str]:
    """The parameters or keys ``text`` says are unsupported, unknown or unrecognized."""
    keys = [match.group(1) for match in _UNSUPPORTED_KEY.finditer(text)]
    keys += [m.group(1).rsplit(".", 1)[-1] for m in _PROPERTY_UNSUPPORTED.finditer(text)]
    keys += [match.group(1) for match in _NOT_SUPPORTED.finditer(text)]
    argument = _ARGUMENT_NOT_SUPPORTED.search(text)
    if argument is not None:
        keys += [name for name in argument.groups() if name]
    keys += [match.group(1) for match in _UNKNOWN_NAME.finditer(text)]
    keys += [match.group(1) for match in _NOT_A_VALID_FIELD.finditer(text)]
    both = _CANNOT_BOTH.search(text)
    if both is not None:
        keys += [both.group(1), both.group(2)]
    if _REFUSED_KEY_WORDS & set(_WORD.findall(lowered)):  # every key a path names, not one
        keys += [
            path[2]
            for path in paths
            if len(path) > 2
            and path[0] in ("messages", "input")
            and isinstance(path[1], int)
            and isinstance(path[2], str)
            and path[2] not in _MESSAGE_KEYS
        ]
    param = _PARAM.search(text)
    if param is not None and any(words in lowered for words in _NOT_SUPPORTED_WORDS):
        keys.append(param.group(1))
    if {"extra_forbidden", "unsupported", "unrecognized", "forbidden"} & set(
        _WORD.findall(lowered)
    ):
        keys += [str(path[0]) for path in paths if len(path) == 1 and isinstance(path[0], str)]
    return keys


#: What makes a tool definition: a path to one of these refuses its value, never the key.
_TOOL_KEYS = frozenset({"type", "name", "function", "description", "parameters", "input_schema"})


def _tool_keys(lowered: str, paths: Sequence[Path]) -> list[str]:
    """The keys of a tool definition ``paths`` name where the words refuse a key
    (``unsupported field``, ``extra_forbidden``): the last step of ``tools.N.<key>`` or
    ``tools.N.function.<key>``, never what makes the tool (``tools.8.type``: its value)."""
    if not _REFUSED_KEY_WORDS & set(_WORD.findall(lowered)):
        return []
    keys: list[str] = []
    for path in paths:
        if len(path) < 3 or path[0] != "tools" or not isinstance(path[1], int):
            continue
        rest = path[3:] if path[2] == "function" else path[2:]
        if len(rest) == 1 and isinstance(rest[0], str) and rest[0] not in _TOOL_KEYS:
            keys.append(rest[0])
    return keys


def _tools_at(paths: Sequence[Path]) -> list[int]:
    """The positions of the tools ``paths`` name whole or by their ``type`` (``tools[0]``,
    ``tools.8.type``): never by a name, a key or a schema inside."""
    return [
        path[1]
        for path in paths
        if path[0] == "tools"
        and len(path) in (2, 3)
        and isinstance(path[1], int)
        and (len(path) == 2 or path[2] == "type")
    ]


def _named_value(text: str) -> tuple[str | None, str | None, tuple[str, ...]]:
    """The value ``text`` refuses, the field it refuses it in, and the values it accepts."""
    value = value_at = None
    allowed: tuple[str, ...] = ()
    if (
        (found := _VARIANT.search(text)) is not None
        or (found := _INVALID_VALUE.search(text)) is not None
        or (found := _NOT_ONE_OF.search(text)) is not None
    ):
        value, allowed = found.group(1), _quoted(found.group(2))
    elif (found := _INVALID_FIELD_VALUE.search(text)) is not None:
        value_at, value = found.group(1), found.group(2)
        allowed = tuple(part.strip() for part in found.group(3).split(",") if part.strip())[:16]
    elif (found := _OPTION_NOT_SUPPORTED.search(text)) is not None:
        value, value_at = found.group(1), found.group(2)
    elif (found := _INVALID_TYPE.search(text)) is not None:
        value_at, value = found.group(1), "{" + found.group(2).lower() + "}"
        allowed = tuple(part.strip() for part in found.group(3).split(",") if part.strip())[:16]
    elif (found := _INPUT_SHOULD_BE.search(text)) is not None:
        value, allowed = found.group(2), _quoted(found.group(1))
    elif (found := _INVALID_ROLE.search(text)) is not None:
        value = found.group(1)
    default = _DEFAULT_ONLY.search(text)
    if default is not None:
        value_at, value, allowed = default.group(1), default.group(2), (default.group(3),)
    return value, value_at, allowed


def named_in(text: str, paths: Sequence[Path]) -> Named:
    """What ``text`` names (``Named``): each expression once, over at most ``MAX_TEXT``
    characters."""
    lowered = text.lower()
    keys = _named_keys(text, lowered, paths)
    value, value_at, allowed = _named_value(text)
    both = _CANNOT_BOTH.search(text)
    argument = _ARGUMENT_NOT_SUPPORTED.search(text)
    instead = _INSTEAD.search(text)
    required = _REQUIRED_ITEM.search(text)
    length = _MAX_LENGTH.search(lowered)
    return Named(
        keys=tuple(dict.fromkeys(keys))[:16],
        tool_keys=tuple(dict.fromkeys(_tool_keys(lowered, paths)))[:16],
        tools_at=tuple(dict.fromkeys(_tools_at(paths)))[:16],
        tools_in=tuple(
            dict.fromkeys(
                p[1] for p in paths if p[0] == "tools" and len(p) > 1 and type(p[1]) is int
            )
        )[:16],
        instead=instead.group(1) if instead is not None else None,
        value=value,
        value_at=value_at,
        allowed=allowed,
        order=(required.group(1), required.group(4)) if required is not None else None,
        order_type=required.group(2) if required is not None else None,
        max_length=int(length.group(1)) if length is not None else None,
        too_short=any(phrase in lowered for phrase in _TOO_SHORT),
        together=both is not None or (argument is not None and "together" in lowered),
        default_only=_DEFAULT_ONLY.search(text) is not None,
        id_prefix=prefix.group(1) if (prefix := _ID_PREFIX.search(text)) is not None else None,
        max_images=int(image.group(1)) if (image := _IMAGE_LIMIT.search(lowered)) else None,
        unpersisted=gone.group(1) if (gone := _NOT_PERSISTED.search(text)) is not None else None,
    )


def _paths_in(text: str) -> Iterator[Path]:
    for count, match in enumerate(_PATH.finditer(text)):
        if count >= MAX_PATHS:
            return
        root = match.group(1)
        path: list[str | int] = [root if root in ("input", "tools") else "messages"]
        for step in _STEP.finditer(match.group(2)):
            number = step.group(1) or step.group(2)
            path.append(int(number) if number else step.group(3))
        # ``messages.2.assistant.reasoning_content`` (Cerebras): the role is no step
        if len(path) > 3 and isinstance(path[1], int) and path[2] in _ROLE_STEPS:
            del path[2]
        yield tuple(path)


#: Topics a repair of the messages never fixes: such a refusal is never retried.
_ABOUT: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "context",
        ("context length", "context window", "maximum context", "too many tokens", "token limit",
         "prompt is too long", "reduce the length"),
    ),
    (
        "auth",
        ("api key", "api_key", "unauthorized", "authentication", "permission denied",
         "credential", "access denied"),
    ),
    (
        "model",
        ("model_not_found", "does not exist", "no such model", "unknown model", "invalid model",
         "model not found", "not a valid model", "unsupported model"),
    ),
    ("rate", ("rate limit", "rate_limit", "too many requests", "quota", "insufficient balance")),
    ("size", ("too large", "request size", "body size", "exceeds the maximum size")),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Reading:
    """A refusal, read: its classes (catalogue first, then the stable parts), the index and
    path it names, the message key it names, what it names and what it is about."""

    codes: tuple[str, ...] = ()
    index: int | None = None
    #: The deepest message path named, as ``messages[1].tool_calls[0].type``.
    path: str | None = None
    #: A message key the refusal names (``finish_reason``).
    key: str | None = None
    #: What it names, of ``message``, ``field``, ``role``, ``tool_call``, ``content``.
    names: frozenset[str] = frozenset()
    #: ``context``, ``auth``, ``model``, ``rate`` or ``size``: a refusal no repair of the
    #: messages fixes; ``None`` otherwise.
    about: str | None = None
    #: What it names in its own words (a parameter, a value, an order, a length).
    named: Named = field(default_factory=Named)

    @property
    def path_has_field(self) -> bool:
        return self.path is not None and "." in self.path


def show(path: Path) -> str:
    """``("messages", 1, "role")`` as ``messages[1].role``."""
    out = str(path[0])
    for step in path[1:]:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


def _message_path(paths: Sequence[Path], field: str) -> Path | None:
    """The deepest path into ``field`` (``messages``, ``input``) that carries an index."""
    best: Path | None = None
    for path in paths:
        indexed = path[0] == field and len(path) > 1 and isinstance(path[1], int)
        if indexed and (best is None or len(path) > len(best)):
            best = path
    return best


#: A call's keys and a message's keys other providers' allowlists know: a refusal naming one of
#: these is about its value, not about the key being there.
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
_UNEXPECTED = frozenset(
    {"extra", "extra_forbidden", "unknown", "unsupported", "unrecognized", "unexpected",
     "permitted", "additional", "forbidden", "allowed"}
)  # fmt: skip
_MISSING = frozenset({"missing", "required"})
_ROLE_REFUSED = frozenset(
    {"unknown", "invalid", "variant", "unsupported", "supported", "expected", "tag", "allowed"}
)


def _by_path(path: Path, words: frozenset[str]) -> list[str]:
    """The chat classes a message path and the refusal's words point to, most likely first."""
    rest = path[2:]
    if not rest:
        return []
    head = rest[0]
    if head == "tool_calls":
        if len(rest) == 1:
            return ["empty_tool_calls"] if "empty" in words else []
        leaf = rest[-1]
        if leaf == "arguments":
            if "string" in words and "json" not in words:
                return ["arguments_not_string", "invalid_arguments"]
            return ["invalid_arguments", "arguments_not_string"]
        if leaf == "type":
            return ["missing_tool_call_type"]
        if leaf == "name":
            return ["function_name_invalid"]
        if leaf == "id":
            if "duplicate" in words or "unique" in words:
                return ["duplicate_tool_call_id"]
            if {"long", "length", "pattern", "format"} & words:
                return ["tool_call_id_format"]
        if isinstance(leaf, str) and leaf not in ("function", "id") and _UNEXPECTED & words:
            return ["bookkeeping_field"]
        return []
    if head == "role":
        return ["unknown_role"] if _ROLE_REFUSED & words else []
    if head == "tool_call_id":
        if "duplicate" in words:
            return ["duplicate_tool_result"]
        if _MISSING & words:
            return ["missing_tool_call_id"]
        if {"long", "length", "pattern", "format"} & words:
            return ["tool_call_id_format"]
        return []
    if head == "content" and len(rest) <= 2:  # the content, or one part: not a block's field
        if "null" in words or "none" in words:
            return ["content_null"]
        if _MISSING & words:
            return ["content_missing"]
        if "object" in words:
            return ["content_object"]
        if "string" in words or "sequence" in words:
            return ["content_not_string"]
        return []
    if head == "reasoning_content" and _MISSING & words:
        return ["reasoning_content_missing"]
    if isinstance(head, str) and head not in _MESSAGE_KEYS and _UNEXPECTED & words:
        return _unknown_key(head)
    return []


def _unknown_key(key: str) -> list[str]:
    return ["bookkeeping_field", "unknown_field"] if key in BOOKKEEPING_KEYS else ["unknown_field"]


def _by_words(words: frozenset[str], paths: Sequence[Path]) -> list[str]:
    """The classes a refusal's words point to, whatever path it names."""
    codes: list[str] = []
    if "duplicate" in words and ("tool_call_id" in words or "tool_call_ids" in words):
        codes.extend(("duplicate_tool_result", "duplicate_tool_call_id"))
    if "role" in words and ({"unknown", "variant", "unsupported"} & words):
        codes.append("unknown_role")
    # Roles that must alternate, in other words: Perplexity "After the (optional) system
    # message(s), user and assistant roles should be alternating." (obsidian-smart-composer#305)
    if "roles" in words and {"alternating", "alternate"} & words:
        codes.append("roles_not_alternating")
    # Arguments that are not JSON: DashScope 'The "function.arguments" parameter of the code
    # model must be in JSON format.' (HKUDS/nanobot#1487)
    if "arguments" in words and "json" in words and {"format", "valid", "invalid"} & words:
        codes.append("invalid_arguments")
    # An empty text block, in Anthropic's other words: "cache_control cannot be set for empty
    # text blocks" (anthropics/claude-code#54013)
    if "empty" in words and "text" in words and {"block", "blocks"} & words:
        codes.append("messages_empty_text_block")
    # A tool entry of a type the endpoint does not take: "Input should be 'function', ...,
    # field: 'tools[8].type'" (boldsoftware/shelley#242). A path to a tool's name refuses a
    # function's name, never a server tool; whether the tool at the path is one is the
    # request's (``named_repairs.server_tool_named``).
    tool_fields = [p for p in paths if p[0] == "tools" and len(p) == 3]
    if any(isinstance(p[1], int) and p[2] == "type" for p in tool_fields):
        codes.append("messages_server_tool")
    # Bedrock's Converse words (a result with no call, a call with no result): "The number of
    # toolResult blocks at messages.2.content exceeds the number of toolUse blocks of previous
    # turn." (Just-Curieous/Curie#16)
    if {"toolresult", "toolresults"} & words and {"exceeds", "exceed", "unexpected"} & words:
        codes.append("orphan_tool_result")
    return codes


def structural(refusal: Refusal, field: str = "messages") -> Reading:
    """What ``refusal`` names and the classes its stable parts point to (no catalogue)."""
    lowered = refusal.text.lower()
    words = frozenset(_WORD.findall(lowered))
    path = _message_path(refusal.paths, field)
    codes: list[str] = []
    key: str | None = None
    if path is not None:
        codes.extend(_by_path(path, words))
        if len(path) > 2 and isinstance(path[2], str) and path[2] not in _MESSAGE_KEYS:
            key = path[2]
    named = _NAMED_KEY.search(lowered)
    if named is not None:
        key = key or named.group(1)
        if key not in _MESSAGE_KEYS:
            codes.extend(_unknown_key(key))
    codes.extend(_by_words(words, refusal.paths))
    index = path[1] if path is not None else None
    if index is None and (words_index := _INDEX_WORDS.search(lowered)) is not None:
        index = int(words_index.group(1))
    names: set[str] = set()
    if path is not None or index is not None:
        names.add("message")
    if key is not None or (path is not None and len(path) > 2):
        names.add("field")
    if "role" in words or (path is not None and "role" in path):
        names.add("role")
    if {"tool_calls", "tool_call", "tool_call_id", "tool_use", "call_id"} & words:
        names.add("tool_call")
    if path is not None and "content" in path:
        names.add("content")
    about = next(
        (topic for topic, phrases in _ABOUT if any(phrase in lowered for phrase in phrases)), None
    )
    return Reading(
        named=named_in(refusal.text, refusal.paths),
        codes=tuple(dict.fromkeys(codes)),
        index=index if isinstance(index, int) else None,
        path=show(path) if path is not None else None,
        key=key,
        names=frozenset(names),
        about=about,
    )


@lru_cache(maxsize=4)  # one refusal is read by the metrics, the log and recovery: read it once
def read_error(body: bytes | None, field: str = "messages") -> Reading:
    """``body`` read whole: the catalogue's classes, then those of its stable parts."""
    refusal = read_refusal(body)
    if refusal is None:
        return Reading()
    strong: list[str] = []
    weak: list[str] = []
    for template in CATALOGUE:
        if template.found_in(refusal.text):
            (strong if template.strong else weak).append(template.code)
    reading = structural(refusal, field)
    # A catalogued sentence is the provider's own words: it comes first. A short generic one
    # ("Extra inputs are not permitted") says less than a path down to a field, which then
    # comes before it.
    if reading.path_has_field:
        codes = tuple(dict.fromkeys((*strong, *reading.codes, *weak)))
    else:
        codes = tuple(dict.fromkeys((*strong, *weak, *reading.codes)))
    return replace(reading, codes=codes)


def classify(body: bytes | None) -> str:
    """The class the refusal carries (the catalogue's most specific first), or
    ``unclassified``."""
    codes = read_error(body).codes
    return codes[0] if codes else "unclassified"


def classes(body: bytes | None) -> list[str]:
    """Every class the refusal carries, the most specific first (empty: not a known refusal)."""
    return list(read_error(body).codes)
