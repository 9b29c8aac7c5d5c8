"""How clients write a JSON body: the same value, different bytes.

orjson writes as ``JSON.stringify`` (the Node SDKs, Claude Code) and httpx (openai-python,
LiteLLM, LangChain) do. The others are the writings of clients people point at chatmend too:
Python's ``json.dumps`` (``requests``, aiohttp's ``json=``), Go's ``encoding/json`` (``<``,
``>`` and ``&`` escaped), .NET's ``System.Text.Json`` (every non-ASCII character and the HTML
ones escaped, in upper-case hex), PHP's ``json_encode`` (``/`` escaped), an indented body,
one with whitespace on both sides of every comma and colon, and one whose messages are each
written another way (``mixed``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

import orjson


def go(value: Any) -> bytes:
    """Go's encoding/json: ``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e``, ``\\u0026``."""
    written = orjson.dumps(value)
    for char, escaped in ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026")):
        written = written.replace(char, escaped)
    return written


_LOWER_HEX: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-f]{4})")


def dotnet(value: Any) -> bytes:
    """System.Text.Json's default: compact, non-ASCII and ``<>&'`` escaped, upper-case hex."""
    written = json.dumps(value, separators=(",", ":"))
    written = _LOWER_HEX.sub(lambda m: m.group(1) + "\\u" + m.group(2).upper(), written)
    for char in "<>&'":  # not "+" (.NET escapes it too): json.dumps writes it in exponents
        written = written.replace(char, f"\\u{ord(char):04X}")
    return written.encode()


_MIXED: Final[tuple[Callable[[Any], bytes], ...]] = (
    orjson.dumps,
    lambda value: json.dumps(value).encode(),
    go,
    dotnet,
    lambda value: json.dumps(value, ensure_ascii=False, indent=1).encode(),
)
_GAPS: Final = (b"", b" ", b"\n  ", b"\t", b"\r\n")


def mixed(value: Any) -> bytes:
    """A body built by hand: each item of its top-level lists in another of the writings above
    (by its place, so a growing session writes its old items the same way), with other
    whitespace around it."""
    if type(value) is not dict:
        return orjson.dumps(value)
    parts = []
    for key, field in value.items():
        if type(field) is list:
            items = (
                _GAPS[n % 5] + _MIXED[n % 5](item) + _GAPS[(n + 2) % 5]
                for n, item in enumerate(field)
            )
            written = b"[" + b",".join(items) + b"]"
        else:
            written = orjson.dumps(field)
        parts.append(orjson.dumps(key) + b": " + written)
    return b"{" + b", ".join(parts) + b"}"


WRITINGS: Final[dict[str, Callable[[Any], bytes]]] = {
    "orjson": orjson.dumps,
    "json.dumps": lambda value: json.dumps(value).encode(),
    "go": go,
    "dotnet": dotnet,
    "php": lambda value: json.dumps(value, ensure_ascii=False).replace("/", "\\/").encode(),
    "indented": lambda value: json.dumps(value, ensure_ascii=False, indent=2).encode(),
    "spaced around": lambda value: json.dumps(value, separators=(" , ", " : ")).encode(),
    "mixed": mixed,
}


def items_written(body: bytes, field: str) -> list[bytes]:
    """The bytes of each item of the list ``field`` of the JSON object ``body``, as written:
    read member by member from the top (the standard library's decoder, one value at a time),
    so a nested list of that key, or the key written with escapes, is found as what it is."""
    text, scan = body.decode(), json.JSONDecoder().raw_decode

    def space(at: int) -> int:
        while text[at] in " \t\n\r":
            at += 1
        return at

    at = space(0)
    assert text[at] == "{"
    at = space(at + 1)
    found: list[bytes] | None = None
    while text[at] != "}":
        key, at = scan(text, at)
        at = space(at)
        assert text[at] == ":"
        at = space(at + 1)
        if key == field and text[at] == "[":
            found, at = [], space(at + 1)
            while text[at] != "]":
                _, end = scan(text, at)
                found.append(text[at:end].encode())
                at = space(end)
                at = space(at + 1) if text[at] == "," else at
            at += 1
        else:
            _, at = scan(text, at)
        at = space(at)
        at = space(at + 1) if text[at] == "," else at
    assert found is not None, f"no list {field!r}"
    return found  # the last one, if the key is written twice, as a JSON reader keeps


def same_json(a: Any, b: Any) -> bool:
    """Whether two parsed values are the same JSON: ``==`` to the type (in Python ``1 == 1.0 ==
    True``, ``0.0 == -0.0``, and ``{"a": 1, "b": 2} == {"b": 2, "a": 1}``), objects' keys in
    order."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return repr(a) == repr(b)
    if type(a) is dict:
        return list(a) == list(b) and all(same_json(a[key], b[key]) for key in a)
    if type(a) is list:
        return len(a) == len(b) and all(map(same_json, a, b))
    return bool(a == b)
