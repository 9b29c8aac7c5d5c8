"""The Messages response observer: a JSON body's ``content`` blocks, or an SSE stream parsed
event by event across any chunk boundary; a tool-use turn's thinking blocks are stored exactly
(text, signature, redacted data) under the key of its ``tool_use`` blocks; anything else is
not stored, and nothing ever raises into the relay."""

from __future__ import annotations

import gzip
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from proxy.observe.metrics import Metrics
from proxy.stash import MemoryStore, Stash
from proxy.stash.hooks import ReasoningHooks
from proxy.stash.messages_observer import MessagesObserver
from proxy.stash.observer import MAX_OBSERVED, ResponseObserver
from rules.chat.reasoning_content import turn_key as chat_turn_key
from rules.messages.missing_thinking import recalled_blocks, turn_key
from rules.providers.planner import Planner
from tests.budget import examples

SCOPE = "https://api.deepseek.com/anthropic\nabc"
THINKING = "The user wants a.txt — «ünïcode» and\nnewlines, so I read it, then list the dir."
SIGNATURE = "EqQBCkYIARgCIkBsig+/=="
TOOLS = [
    {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.txt"}},
    {"type": "tool_use", "id": "toolu_02", "name": "ls", "input": {}},
]
BLOCK = {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
KEY = turn_key(SCOPE, TOOLS)


class Sink:
    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    def __call__(self, key: str, text: str) -> None:
        self.stored[key] = text


def sse(data: dict[str, Any], newline: bytes = b"\n") -> bytes:
    name: bytes = data["type"].encode()
    return b"event: " + name + newline + b"data: " + orjson.dumps(data) + newline + newline


def stream(
    blocks: list[dict[str, Any]], *, pieces: int = 7, newline: bytes = b"\n", stop: bool = True
) -> bytes:
    """An Anthropic event stream of ``blocks``: each thinking text in ``pieces`` deltas, then
    its signature delta; each tool input as JSON text in pieces; pings between."""
    out = [
        sse({"type": "message_start", "message": {"id": "msg_1", "content": []}}, newline),
        sse({"type": "ping"}, newline),
    ]
    for index, block in enumerate(blocks):
        deltas: list[dict[str, Any]] = []
        if block["type"] == "thinking":
            opened: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            text = block["thinking"]
            size = max(1, len(text) // pieces)
            deltas = [
                {"type": "thinking_delta", "thinking": text[i : i + size]}
                for i in range(0, len(text), size)
            ]
            if "signature" in block:
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "tool_use":
            opened = {**block, "input": {}}
            text = orjson.dumps(block["input"]).decode() if block["input"] else ""
            deltas = [
                {"type": "input_json_delta", "partial_json": text[i : i + 3]}
                for i in range(0, len(text), 3)
            ] or [{"type": "input_json_delta", "partial_json": ""}]
        elif block["type"] == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        else:
            opened = block
        out.append(
            sse({"type": "content_block_start", "index": index, "content_block": opened}, newline)
        )
        out.extend(
            sse({"type": "content_block_delta", "index": index, "delta": d}, newline)
            for d in deltas
        )
        out.append(sse({"type": "content_block_stop", "index": index}, newline))
    out.append(sse({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, newline))
    if stop:
        out.append(sse({"type": "message_stop"}, newline))
    return b"".join(out)


def body(blocks: list[dict[str, Any]]) -> bytes:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": blocks}
    return orjson.dumps({**message, "stop_reason": "tool_use", "usage": {"output_tokens": 5}})


def observe(chunks: list[bytes], *, stream_mode: bool = True, encoding: str = "") -> Sink:
    sink = Sink()
    observer = MessagesObserver(sink, SCOPE, stream=stream_mode, encoding=encoding)
    for chunk in chunks:
        observer.feed(chunk)
    observer.finish()
    return sink


def stored_blocks(sink: Sink, key: str | None = KEY) -> list[dict[str, Any]] | None:
    assert key is not None
    return recalled_blocks(sink.stored.get(key))


def test_a_json_body_stores_the_thinking_block_exactly() -> None:
    text = {"type": "text", "text": "Reading it."}
    sink = observe([body([BLOCK, text, *TOOLS])], stream_mode=False)
    assert list(sink.stored) == [KEY]
    assert stored_blocks(sink) == [BLOCK]


def test_a_stream_stores_the_thinking_split_over_many_deltas_and_its_signature() -> None:
    sink = observe([stream([BLOCK, *TOOLS], pieces=40)])
    assert stored_blocks(sink) == [BLOCK]


@settings(max_examples=examples(0.6), deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=30))
def test_any_chunking_stores_the_same_blocks(cuts: list[int]) -> None:
    data = stream([BLOCK, {"type": "text", "text": "ok"}, *TOOLS], newline=b"\r\n")
    points = sorted({min(cut, len(data)) for cut in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    sink = observe(chunks)
    assert stored_blocks(sink) == [BLOCK]


def test_redacted_and_several_thinking_blocks_keep_their_order() -> None:
    second = {"type": "thinking", "thinking": "Then ls.", "signature": "sig-2"}
    blocks = [BLOCK, REDACTED, second]
    for sink in (
        observe([body([*blocks, *TOOLS])], stream_mode=False),
        observe([stream([*blocks, *TOOLS])]),
    ):
        assert stored_blocks(sink) == blocks


def test_a_turn_without_tool_use_is_not_stored() -> None:
    answer = [BLOCK, {"type": "text", "text": "a.txt says hello."}]
    assert observe([body(answer)], stream_mode=False).stored == {}
    assert observe([stream(answer)]).stored == {}


def test_a_turn_without_thinking_is_not_stored_and_the_stream_not_read_further() -> None:
    sink = Sink()
    observer = MessagesObserver(sink, SCOPE, stream=True)
    data = stream([{"type": "text", "text": "Reading."}, *TOOLS])
    half = data.index(b"content_block_stop")
    observer.feed(data[:half])
    assert observer._off  # nothing to keep: the rest is relayed without a parse
    observer.feed(data[half:])
    observer.finish()
    assert sink.stored == {}
    assert observe([body(TOOLS)], stream_mode=False).stored == {}


def test_an_empty_unsigned_thinking_block_is_not_stored() -> None:
    """The placeholder gives the same: nothing worth a store entry."""
    empty = {"type": "thinking", "thinking": ""}
    assert observe([body([empty, *TOOLS])], stream_mode=False).stored == {}
    assert observe([stream([empty, *TOOLS])]).stored == {}


def test_a_signed_block_with_empty_text_is_stored() -> None:
    signed = {"type": "thinking", "thinking": "", "signature": SIGNATURE}
    assert stored_blocks(observe([stream([signed, *TOOLS])])) == [signed]


def test_an_error_event_drops_the_turn() -> None:
    data = stream([BLOCK, *TOOLS], stop=False)
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert observe([data, sse(error)]).stored == {}


def test_a_stream_that_ends_without_message_stop_is_completed_at_the_end() -> None:
    assert stored_blocks(observe([stream([BLOCK, *TOOLS], stop=False)])) == [BLOCK]


def test_a_tool_without_input_deltas_keys_like_its_empty_input() -> None:
    """Anthropic streams ``partial_json: ""`` for a tool called with ``{}``: the client sends
    ``input: {}`` back, and the key must match it."""
    tool = {"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {}}
    sink = observe([stream([BLOCK, tool])])
    assert stored_blocks(sink, turn_key(SCOPE, [tool])) == [BLOCK]


def test_a_re_serialized_input_still_matches() -> None:
    """The key reads inputs as canonical JSON: key order and spacing do not matter."""
    tool = {"type": "tool_use", "id": "t", "name": "edit", "input": {"b": 1, "a": [1, 2]}}
    sink = observe([stream([BLOCK, tool])])
    sent_back = {**tool, "input": {"a": [1, 2], "b": 1}}
    assert stored_blocks(sink, turn_key(SCOPE, [sent_back])) == [BLOCK]


def test_gzip_bodies_are_read() -> None:
    data = gzip.compress(stream([BLOCK, *TOOLS]))
    chunks = [data[i : i + 50] for i in range(0, len(data), 50)]
    assert stored_blocks(observe(chunks, encoding="gzip")) == [BLOCK]
    whole = gzip.compress(body([BLOCK, *TOOLS]))
    assert stored_blocks(observe([whole], stream_mode=False, encoding="gzip")) == [BLOCK]


def test_thinking_over_the_bound_is_not_stored() -> None:
    huge = {"type": "thinking", "thinking": "x" * (MAX_OBSERVED + 1), "signature": "s"}
    assert observe([stream([huge, *TOOLS], pieces=3)]).stored == {}


def test_garbage_never_raises_and_is_never_logged() -> None:
    with capture_logs() as logs:
        for chunks, mode in (
            ([b"data: {not json}\n\n", b"data: [1, 2]\n\n", b"data: null\n\n"], True),
            ([sse({"type": "content_block_start", "index": "0", "content_block": BLOCK})], True),
            ([sse({"type": "content_block_delta", "index": 5, "delta": {"type": "x"}})], True),
            ([b"\x1f\x8b garbage"], False),
            ([body([{"type": "thinking", "thinking": 3}, *TOOLS])], False),
        ):
            assert observe(chunks, stream_mode=mode).stored == {}
    assert THINKING not in orjson.dumps(logs, default=str).decode()


def test_the_key_is_not_the_chat_key_of_the_same_calls() -> None:
    """Own key version: a chat turn and a Messages turn with the same ids never collide."""
    calls = [
        {"id": t["id"], "function": {"name": t["name"], "arguments": orjson.dumps(t["input"])}}
        for t in TOOLS
    ]
    assert KEY is not None and chat_turn_key(SCOPE, calls) != KEY
    assert turn_key(SCOPE, [BLOCK]) is None  # no tool_use: no key
    assert turn_key(SCOPE, [{"type": "tool_use", "name": "x", "input": {}}]) is None
    assert turn_key("other scope", TOOLS) != KEY


def test_the_stash_gives_a_messages_request_the_messages_observer() -> None:
    stash = Stash(MemoryStore(1 << 20, 60))
    observer = stash.observer_for(SCOPE, "text/event-stream", "", MessagesObserver)
    assert isinstance(observer, MessagesObserver)
    assert isinstance(stash.observer_for(SCOPE, "application/json", ""), ResponseObserver)
    assert stash.observer_for(SCOPE, "text/event-stream", "br", MessagesObserver) is None
    observer.feed(stream([BLOCK, *TOOLS]))
    observer.finish()
    assert isinstance(stash.store, MemoryStore)
    assert KEY is not None and recalled_blocks(stash.store.get(KEY)) == [BLOCK]


def test_the_hooks_recall_for_messages_under_the_deepseek_profiles_only() -> None:
    """Which Messages plans recall (``Rule.recall`` of messages-missing-thinking), per API: the
    chat plans' answer is not the Messages plans'."""
    hooks = ReasoningHooks(Stash(MemoryStore(1 << 20, 60)), Metrics())
    planner = Planner()
    assert hooks.profiles(planner, "messages") == {"deepseek", "deepseek-reasoner"}
    assert "kimi" in hooks.profiles(planner, "chat")  # reasoning-content, chat only
    assert "kimi" not in hooks.profiles(planner, "messages")
    assert hooks.profiles(planner, "messages") is hooks.profiles(planner, "messages")  # cached


# --- issue 27: bounds, and signed thinking never stored altered ---------------------------------


def _bounded(chunks: list[bytes]) -> tuple[Sink, list[str]]:
    sink, bounds = Sink(), list[str]()
    observer = MessagesObserver(sink, SCOPE, stream=True, on_limit=bounds.append)
    for chunk in chunks:
        observer.feed(chunk)
    observer.finish()
    return sink, bounds


def test_endless_input_json_pieces_reach_the_bound() -> None:
    from proxy.stash.observer import PIECE_COST

    head = stream([BLOCK, *TOOLS], stop=False)
    piece = sse(
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "a"},
        }
    )
    sink, bounds = _bounded([head, piece * (MAX_OBSERVED // (1 + PIECE_COST) + 2)])
    assert bounds == ["observed_bytes"] and sink.stored == {}


def test_too_many_blocks_stop_the_observation() -> None:
    from proxy.stash.observer import MAX_BLOCKS

    sink, bounds = _bounded([stream([BLOCK] + [TOOLS[1]] * MAX_BLOCKS)])
    assert bounds == ["blocks"] and sink.stored == {}


def test_a_stream_with_a_broken_thinking_delta_is_not_stored() -> None:
    """Stored without that piece but with the full signature, the block would not be the one
    its signature signs (issue 27)."""
    whole = stream([BLOCK, *TOOLS])
    assert observe([whole]).stored  # as sent, it is stored
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta"}}
    broken_event = sse({**delta, "delta": {"type": "thinking_delta", "thinking": 7}})
    cut = whole.index(b"event: content_block_delta")
    assert observe([whole[:cut] + broken_event + whole[cut:]]).stored == {}
    not_json = b'event: content_block_delta\ndata: {"type": "content_block_delta", \x00\n\n'
    assert observe([whole[:cut] + not_json + whole[cut:]]).stored == {}
