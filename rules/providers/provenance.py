"""Map an upstream rejection of a rewritten body back to the message the client sent.

A provider that rejects a body chatmend rewrote cites an index of the list chatmend sent
(``messages[2]``); after a merge, a drop or an insertion before it, the client sent that
message at another index (``messages[3]``). The provider's body is relayed unchanged; the
``upstream_rejected_rewritten`` log event and the ``X-Chatmend-Client-Index`` header add the
mapping.

Built only on that path (a 4xx answer to a rewritten body), never on the hot one: both bodies
are parsed again and their lists matched. A message no rule touched is equal in both (rules
copy on write and keep what they do not change), so it anchors the match; a rewritten message
between two anchors maps to the client's message at the same place in the gap; a message with
no counterpart there was inserted by chatmend.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import orjson

#: How providers cite a message: ``messages[2]`` (OpenAI), ``messages.[8]`` (OpenAI's
#: ``param``), ``messages.2`` (pydantic locations: Mistral, vLLM, Anthropic-style), ``message[4]``
#: (DeepSeek); ``input[2]`` / ``input.2`` for the Responses API.
_CITED = re.compile(r"\b(messages?|input)(?:\[(\d{1,7})\]|\.\[(\d{1,7})\]|\.(\d{1,7})\b)")


def cited_index(text: str | None, field: str) -> int | None:
    """The first index of ``field`` the provider's error text cites, if any."""
    if not text:
        return None
    for match in _CITED.finditer(text):
        if match.group(1).rstrip("s") == field.rstrip("s"):
            return int(match.group(2) or match.group(3) or match.group(4))
    return None


def client_indices(original: list[Any], sent: list[Any]) -> list[int | None]:
    """For each index of ``sent``, the index in ``original`` of the message it comes from
    (``None``: inserted by chatmend). Linear in the lists' sizes."""
    where: dict[bytes, deque[int]] = {}
    for index, item in enumerate(original):
        where.setdefault(_key(item), deque()).append(index)
    mapped: list[int | None] = []
    last = -1
    for item in sent:
        found = where.get(_key(item))
        while found and found[0] <= last:
            found.popleft()  # an earlier copy: matches stay in order
        if found:
            last = found.popleft()
            mapped.append(last)
        else:
            mapped.append(None)
    return _fill_gaps(mapped, len(original))


def _fill_gaps(mapped: list[int | None], size: int) -> list[int | None]:
    """Map each run of unmatched (rewritten) messages onto the client's messages between the
    same two anchors, in order; what the gap does not cover was inserted."""
    filled = list(mapped)
    start = 0
    while start < len(filled):
        if filled[start] is not None:
            start += 1
            continue
        end = start
        while end < len(filled) and filled[end] is None:
            end += 1
        before = filled[start - 1] if start else -1
        after = filled[end] if end < len(filled) else size
        assert before is not None and after is not None
        gap = range(before + 1, after)
        for offset in range(end - start):
            filled[start + offset] = gap[offset] if offset < len(gap) else None
        start = end
    return filled


def _key(item: Any) -> bytes:
    try:
        return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return repr(item).encode()


def explain(
    original: bytes, sent: bytes, field: str, text: str | None
) -> tuple[int, int | None] | None:
    """The cited index of the sent list and the client's index for it (``None``: a message
    chatmend inserted), or ``None`` if the text cites none or a body cannot be read."""
    cited = cited_index(text, field)
    if cited is None:
        return None
    try:
        before = orjson.loads(original).get(field)
        after = orjson.loads(sent).get(field)
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(before, list) or not isinstance(after, list) or cited >= len(after):
        return None
    return cited, client_indices(before, after)[cited]
