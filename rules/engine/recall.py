"""Keys for what the server keeps of earlier responses (``Rule.recall``): one recipe for every
API, each under its own version so keys of two APIs never collide.

A turn's key is the sha256 (hex) over the version, the request's scope (the route and the
client's credential, hashed) and, in order, each call's id, name and arguments as canonical JSON
text, so a client that re-serializes them still matches. Ids alone are not enough: some servers
reuse them across turns and conversations (Kimi's ``functions.read_file:0``,
CONTRIBUTING.md#pitfalls), and a collision would restore another turn's text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import orjson


def turn_key(version: str, scope: str, calls: Iterable[tuple[str, str, Any]]) -> str:
    """The key of a turn whose calls are ``(id, name, arguments)``, in order."""
    parts: list[Any] = [version, scope]
    for cid, name, arguments in calls:
        parts.extend((cid, name, canonical_text(arguments)))
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()


def canonical_text(value: Any) -> str:
    """Arguments or an input as canonical JSON text (sorted keys, no spaces); a string is read
    as JSON first (a streamed input arrives as text) and kept as it is if it is none."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return str(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return type(value).__name__
