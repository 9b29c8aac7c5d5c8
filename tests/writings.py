"""How clients write a JSON body: the same value, different bytes.

orjson writes as ``JSON.stringify`` (the Node SDKs, Claude Code) and httpx (openai-python,
LiteLLM, LangChain) do. The others are the writings of clients people point at chatmend too:
Python's ``json.dumps`` (``requests``, aiohttp's ``json=``), Go's ``encoding/json`` (``<``,
``>`` and ``&`` escaped), .NET's ``System.Text.Json`` (every non-ASCII character and the HTML
ones escaped, in upper-case hex), PHP's ``json_encode`` (``/`` escaped), an indented body, and
one with whitespace on both sides of every comma and colon.
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
    for char in "<>&'":  # and "+", which json.dumps also writes in a float's exponent
        written = written.replace(char, f"\\u{ord(char):04X}")
    return written.encode()


WRITINGS: Final[dict[str, Callable[[Any], bytes]]] = {
    "orjson": orjson.dumps,
    "json.dumps": lambda value: json.dumps(value).encode(),
    "go": go,
    "dotnet": dotnet,
    "php": lambda value: json.dumps(value, ensure_ascii=False).replace("/", "\\/").encode(),
    "indented": lambda value: json.dumps(value, ensure_ascii=False, indent=2).encode(),
    "spaced around": lambda value: json.dumps(value, separators=(" , ", " : ")).encode(),
}
