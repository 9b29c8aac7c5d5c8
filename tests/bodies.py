"""Hostile request *bodies* (bytes) for fuzzing ``rules.providers.sanitize.sanitize_body``.

``tests/strategies.py`` draws message lists; this module turns them into what a client can
really send: arbitrary bytes, any JSON document, and chat payloads with byte-level tricks a
message-level strategy cannot express (duplicate keys, lone surrogate escapes, ``NaN``,
non-UTF-8 bytes, nesting past the parser's limits, truncation, huge strings, 10k messages).
``SCALING_SHAPES`` builds adversarial payloads of a chosen size, for the linear-time check.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import orjson
from hypothesis import strategies as st

from tests.builders import call, result, turn, user
from tests.strategies import arbitrary_messages, junk_values
from tests.transcripts import BROKEN

Message = dict[str, Any]


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


#: The arguments of the calls these payloads make.
ARGS = '{"path": "a.py"}'


# ---------------------------------------------------------------------------------------------
# Payloads of a chosen size: every repair path at scale, for the linear-time check
# ---------------------------------------------------------------------------------------------


def _clean(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n // 4):
        out += [user(f"u{i}"), turn(call(f"c{i}", arguments=ARGS)), result(f"c{i}"), user("next")]
    return out


def _reused_ids(n: int) -> list[Any]:
    # Kimi-style: one id in every turn, and ids that look like the renamer's own suffixes.
    out: list[Any] = []
    for i in range(n // 2):
        call_id = "terminal:0" if i % 3 else f"terminal:0_d{i}"
        out += [turn(call(call_id, arguments=ARGS)), result(call_id)]
    return out


def _split_turns(n: int) -> list[Any]:
    return [turn(call(f"c{i}", arguments=ARGS), content=f"part {i}") for i in range(n)]


def _unpaired(n: int) -> list[Any]:
    # One block of n/2 calls; results displaced past user messages, missing ids, orphans.
    half = n // 2
    out: list[Any] = [turn(*(call(f"c{i}", arguments=ARGS) for i in range(half)))]
    for i in range(half):
        if i % 3 == 0:
            out += [user(), result(f"c{(i * 7) % half}")]
        elif i % 3 == 1:
            out.append({"role": "tool", "content": "no id"})
        else:
            out.append(result(f"unknown{i}"))
    return out


def _broken_arguments(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n // 2):
        arguments = ('{"a": [1, 2, {"b": "cut', "{'a': True,}", {"as": "dict"}, "", '{"a":1}{')[
            i % 5
        ]
        out += [turn(call(f"c{i}", arguments=arguments)), result(f"c{i}")]
    return out


def _junk(n: int) -> list[Any]:
    pattern: list[Any] = [
        [1, 2],
        "text",
        None,
        3.5,
        {"role": 5},
        {"role": "assistant", "tool_calls": "x"},
        {"role": "assistant", "tool_calls": []},
        {"role": "tool", "tool_call_id": ["x"]},
        {"role": "assistant", "tool_calls": [None, 1, {"id": {}}]},
    ]
    return (pattern * (n // len(pattern) + 1))[:n]


#: name -> builder of an n-message list that sends the pipeline down one costly path.
SCALING_SHAPES: Final[dict[str, Callable[[int], list[Any]]]] = {
    "clean": _clean,
    "reused_ids": _reused_ids,
    "split_turns": _split_turns,
    "unpaired": _unpaired,
    "broken_arguments": _broken_arguments,
    "junk": _junk,
}


def scaled_body(shape: str, n: int) -> bytes:
    return dumps({"model": "deepseek-chat", "messages": SCALING_SHAPES[shape](n)})


# ---------------------------------------------------------------------------------------------
# Hypothesis strategies: bytes a client may send to /chat/completions
# ---------------------------------------------------------------------------------------------

_BROKEN_LISTS: Final = st.sampled_from(sorted(BROKEN)).map(lambda kind: BROKEN[kind])

#: Message lists: hand-written broken transcripts, or junk with wrong types everywhere.
message_lists: Final[st.SearchStrategy[list[Any]]] = st.one_of(
    _BROKEN_LISTS, arbitrary_messages(max_size=10)
)

_EXTRA_FIELDS: Final = st.dictionaries(
    st.sampled_from(["model", "stream", "tools", "temperature", "n", "metadata", "seed"]),
    junk_values,
    max_size=3,
)


@st.composite
def chat_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A chat-completions object: messages plus other fields of any type."""
    payload = draw(_EXTRA_FIELDS)
    payload["messages"] = draw(message_lists)
    return payload


def _serialize(value: Any, style: str) -> bytes:
    if style == "orjson":
        return dumps(value)
    if style == "ascii":  # every non-ASCII character as a \\u escape (surrogate pairs included)
        return json.dumps(value).encode()
    return json.dumps(value, ensure_ascii=False, indent=2).encode()


#: Any well-formed JSON document: scalars, arrays, objects with or without ``messages``.
json_bodies: Final[st.SearchStrategy[bytes]] = st.builds(
    _serialize,
    st.one_of(junk_values, chat_objects(), st.dictionaries(st.text(max_size=8), junk_values)),
    st.sampled_from(["orjson", "ascii", "indented"]),
)


def _splice(body: bytes, at: int, insert: bytes) -> bytes:
    at %= len(body) + 1
    return body[:at] + insert + body[at:]


def _prepend(item: bytes, array: bytes) -> bytes:
    """The JSON array ``array`` with ``item`` (serialized JSON) put first."""
    return b"[" + item + (b"]" if array == b"[]" else b", " + array[1:])


def _nest(value: bytes, depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + value + b"]" * depth
    return b'{"a":' * depth + value + b"}" * depth


#: Depths around orjson's limits: it serializes at most 254 levels and parses at most 1024.
NESTING_DEPTHS: Final[tuple[int, ...]] = (2, 100, 254, 255, 256, 1000, 1022, 1023, 1024, 1025)


@st.composite
def adversarial_bodies(draw: st.DrawFn) -> bytes:
    """A chat payload with one byte-level trick applied; often still repairable JSON."""
    payload = draw(chat_objects())
    base = dumps(payload)
    messages = dumps(payload["messages"])
    trick = draw(
        st.sampled_from(
            [
                "duplicate_messages_key",
                "lone_surrogate",
                "surrogate_pair_escape",
                "nan",
                "non_utf8",
                "nested_content",
                "nested_body",
                "big_int",
                "float_edge",
                "truncated",
                "bom",
                "huge_string",
                "many_messages",
                "random_bytes",
            ]
        )
    )
    if trick == "duplicate_messages_key":  # orjson keeps the last
        other = dumps(draw(message_lists))
        return b'{"messages": ' + messages + b', "model": "m", "messages": ' + other + b"}"
    if trick == "lone_surrogate":
        escape = draw(st.sampled_from([b"\\ud800", b"\\udfff", b"\\ud83d", b"\\ud800\\u0041"]))
        content = b'{"role": "user", "content": "x' + escape + b'y"}'
        return b'{"messages": ' + _prepend(content, messages) + b"}"
    if trick == "surrogate_pair_escape":  # valid: an escaped astral character
        content = b'{"role": "user", "content": "\\ud83d\\ude00"}'
        return b'{"messages": ' + _prepend(content, messages) + b"}"
    if trick == "nan":
        literal = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"nan"]))
        return b'{"temperature": ' + literal + b', "messages": ' + messages + b"}"
    if trick == "non_utf8":
        junk = draw(
            st.one_of(
                st.sampled_from(
                    [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80", b"\x80"]
                ),
                st.binary(min_size=1, max_size=4),
            )
        )
        return _splice(base, draw(st.integers(0, len(base))), junk)
    if trick == "nested_content":
        depth = draw(st.sampled_from(NESTING_DEPTHS))
        deep = _nest(b'"x"', depth, draw(st.sampled_from(["array", "object"])))
        # Nesting next to a split turn: the rules change something, so the body is re-serialized.
        split = b'{"role": "assistant", "content": "a"}, {"role": "assistant", "content": '
        return b'{"messages": ' + _prepend(split + deep + b"}", messages) + b"}"
    if trick == "nested_body":
        depth = draw(st.sampled_from(NESTING_DEPTHS))
        return _nest(base, depth, draw(st.sampled_from(["array", "object"])))
    if trick == "big_int":  # beyond 64 bits: read as a float, or not at all
        number = draw(st.sampled_from([b"18446744073709551616", b"-9223372036854775809", b"1e400"]))
        return b'{"seed": ' + number + b', "messages": ' + messages + b"}"
    if trick == "float_edge":
        number = draw(
            st.sampled_from([b"-0.0", b"1e-400", b"0.1", b"5e-324", b"1.7976931348623157e308"])
        )
        return b'{"temperature": ' + number + b', "messages": ' + messages + b"}"
    if trick == "truncated":
        return base[: draw(st.integers(0, max(len(base) - 1, 0)))]
    if trick == "bom":
        return b"\xef\xbb\xbf" + base
    if trick == "huge_string":
        size = draw(st.sampled_from([100_000, 2_000_000]))
        text = draw(st.sampled_from(["x", "é", "\\", '"', "\n", "{"])) * size
        arguments = text if draw(st.booleans()) else '{"a": "' + text
        calling = turn(call("h1", arguments=arguments))
        return dumps({"messages": [user(text), calling, result("h1", text), *payload["messages"]]})
    if trick == "many_messages":
        count = draw(st.sampled_from([1_000, 10_000]))
        template = draw(st.sampled_from(sorted(BROKEN)))
        messages_list = (BROKEN[template] * (count // len(BROKEN[template]) + 1))[:count]
        return dumps({"model": "m", "messages": messages_list})
    return draw(st.binary(max_size=200))


#: Everything at once: raw bytes, JSON documents, adversarial chat payloads.
request_bodies: Final[st.SearchStrategy[bytes]] = st.one_of(
    st.binary(max_size=100), json_bodies, adversarial_bodies()
)

__all__ = [
    "NESTING_DEPTHS",
    "SCALING_SHAPES",
    "adversarial_bodies",
    "chat_objects",
    "json_bodies",
    "message_lists",
    "request_bodies",
    "scaled_body",
]
