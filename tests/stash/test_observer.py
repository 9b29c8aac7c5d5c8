"""The response observer: SSE parsed incrementally across any chunk boundary, a JSON body at the
end; a choice with tool calls and reasoning is stored under its turn key; garbage is ignored and
nothing ever raises into the relay."""

from __future__ import annotations

import gzip
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from proxy.stash.observer import ResponseObserver
from rules.chat.reasoning_content import turn_key
from tests.budget import examples

SCOPE = "https://api.deepseek.com\nabc"
CALLS = [
    {"id": "call_0", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
    {"id": "call_1", "function": {"name": "ls", "arguments": "{}"}},
]
KEY = turn_key(SCOPE, CALLS)
REASONING = "First read a.txt, then list — «ünïcode» too."


class Sink:
    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    def __call__(self, key: str, text: str) -> None:
        self.stored[key] = text


def event(choices: list[dict[str, Any]]) -> bytes:
    return b"data: " + orjson.dumps({"object": "chat.completion.chunk", "choices": choices})


def delta(index: int = 0, finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"index": index, "delta": fields, "finish_reason": finish}


def stream(
    index: int = 0,
    newline: bytes = b"\n",
    calls: list[dict[str, Any]] = CALLS,
    reasoning: str = REASONING,
) -> bytes:
    """A DeepSeek-style thinking stream: reasoning in pieces, two calls in pieces, finish."""
    lines = [
        event([delta(index, role="assistant", content=None)]),
        event([delta(index, reasoning_content=reasoning[:10], content=None)]),
        event([delta(index, reasoning_content=reasoning[10:], content=None)]),
        b": keep-alive comment",
        event([delta(index, content="")]),
    ]
    for position, call in enumerate(calls):
        first = {"index": position, "id": call["id"], "type": "function"}
        args = call["function"]["arguments"]
        lines.append(
            event(
                [
                    delta(
                        index,
                        tool_calls=[{**first, "function": {"name": call["function"]["name"]}}],
                    )
                ]
            )
        )
        for piece in (args[:3], args[3:]):
            piece_call = {"index": position, "function": {"arguments": piece}}
            lines.append(event([delta(index, tool_calls=[piece_call])]))
    lines.append(event([delta(index, "tool_calls")]))
    lines.append(b"data: [DONE]")
    return b"".join(line + newline + newline for line in lines)


def observe(chunks: list[bytes], *, stream_mode: bool = True, encoding: str = "") -> Sink:
    sink = Sink()
    observer = ResponseObserver(sink, SCOPE, stream=stream_mode, encoding=encoding)
    for chunk in chunks:
        observer.feed(chunk)
    observer.finish()
    return sink


def test_a_thinking_stream_stores_the_reasoning_under_the_turn_key() -> None:
    assert KEY is not None
    assert observe([stream()]).stored == {KEY: REASONING}


def test_crlf_line_endings() -> None:
    assert observe([stream(newline=b"\r\n")]).stored == {KEY: REASONING}


def test_every_two_way_split_of_the_stream() -> None:
    body = stream()
    for cut in range(len(body) + 1):
        assert observe([body[:cut], body[cut:]]).stored == {KEY: REASONING}, cut


@settings(max_examples=examples(1.5), deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=4000), max_size=40))
def test_any_chunking_of_the_stream(cuts: list[int]) -> None:
    body = stream(newline=b"\r\n")
    points = sorted({cut % (len(body) + 1) for cut in cuts})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert observe(chunks).stored == {KEY: REASONING}


def test_the_turn_is_stored_at_finish_reason_before_the_stream_ends() -> None:
    sink = Sink()
    observer = ResponseObserver(sink, SCOPE, stream=True)
    body = stream()
    observer.feed(body[: body.index(b"data: [DONE]")])
    assert sink.stored == {KEY: REASONING}  # the client may send turn 2 right after this chunk


def test_reasoning_under_the_name_reasoning() -> None:
    body = stream().replace(b'"reasoning_content":"', b'"reasoning":"')
    assert observe([body]).stored == {KEY: REASONING}


def test_several_choices_are_kept_apart() -> None:
    other = [{"id": "call_9", "function": {"name": "ls", "arguments": "{}"}}]
    zero = stream(0).replace(b"data: [DONE]\n\n", b"").split(b"\n\n")
    one = stream(1, calls=other, reasoning="The other choice thinks.").split(b"\n\n")
    interleaved = [line for pair in zip(zero, one, strict=False) for line in pair]
    sink = observe([b"\n\n".join(interleaved) + b"\n\n"])
    assert sink.stored == {KEY: REASONING, turn_key(SCOPE, other): "The other choice thinks."}


def test_tool_calls_without_reasoning_store_nothing() -> None:
    body = b"".join(
        line + b"\n\n"
        for line in stream().split(b"\n\n")
        if b"reasoning_content" not in line and line
    )
    assert observe([body]).stored == {}


def test_reasoning_without_tool_calls_stores_nothing() -> None:
    body = event([delta(reasoning_content="just thinking")]) + b"\n\n"
    body += event([delta(content="Hello.", finish="stop")]) + b"\n\ndata: [DONE]\n\n"
    assert observe([body]).stored == {}


def test_garbage_events_are_skipped() -> None:
    junk = [
        b"data: {not json",
        b"data: []",
        b'data: {"choices": "x"}',
        b'data: {"choices": [1, {"index": "0"}, {"index": 0, "delta": []}]}',
        b"event: ping",
        b"id: 7",
        b"retry: 100",
        b"data:",
        b'data: {"choices":[{"index":3,"delta":{"tool_calls":[7, {"index": "x"}]}}]}',
    ]
    body = b"".join(line + b"\n\n" for line in junk) + stream()
    assert observe([body]).stored == {KEY: REASONING}


def test_a_stream_without_finish_reason_completes_at_the_end() -> None:
    body = stream().replace(b'"finish_reason":"tool_calls"', b'"finish_reason":null')
    assert observe([body.rstrip(b"\n")]).stored == {KEY: REASONING}


def completion(message: dict[str, Any]) -> bytes:
    return orjson.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "x"}]})


MESSAGE = {
    "role": "assistant",
    "content": None,
    "reasoning_content": REASONING,
    "tool_calls": CALLS,
}


def test_a_json_body_is_parsed_once_at_the_end() -> None:
    body = completion(MESSAGE)
    assert observe([body[:5], body[5:]], stream_mode=False).stored == {KEY: REASONING}


def test_a_gzip_json_body() -> None:
    body = gzip.compress(completion(MESSAGE))
    chunks = [body[:9], body[9:]]
    assert observe(chunks, stream_mode=False, encoding="gzip").stored == {KEY: REASONING}


def test_json_bodies_that_hold_nothing_to_store() -> None:
    for message in (
        {**MESSAGE, "reasoning_content": None},
        {**MESSAGE, "reasoning_content": "  "},
        {**MESSAGE, "tool_calls": []},
        {**MESSAGE, "tool_calls": [{"function": {"name": "ls"}}]},  # no id: no key
    ):
        assert observe([completion(message)], stream_mode=False).stored == {}
    assert observe([b"<html>oops</html>"], stream_mode=False).stored == {}


def test_a_failure_disables_the_observer_and_is_logged_once() -> None:
    def broken(key: str, text: str) -> None:
        raise RuntimeError("store exploded")

    observer = ResponseObserver(broken, SCOPE, stream=True)
    with capture_logs() as logs:
        observer.feed(stream())  # raises inside: contained
        observer.feed(stream())  # disabled: not even parsed
        observer.finish()
    assert [e["event"] for e in logs] == ["reasoning_observer_failed"]
    assert logs[0]["error"] == "RuntimeError"
    assert REASONING not in str(logs)


def test_an_unbounded_line_disables_the_observer() -> None:
    from proxy.stash import observer as module

    sink = Sink()
    observer = ResponseObserver(sink, SCOPE, stream=True)
    with capture_logs():
        for _ in range(module.MAX_LINE // (1 << 20) + 2):
            observer.feed(b"x" * (1 << 20))
    observer.feed(stream())
    observer.finish()
    assert sink.stored == {}


# --- issue 27: every dimension the observer stores is bounded --------------------------------


def _bounded(chunks: list[bytes]) -> tuple[Sink, list[str], ResponseObserver]:
    """Feed ``chunks`` to an observer that records the bounds it meets."""
    sink, bounds = Sink(), list[str]()
    observer = ResponseObserver(sink, SCOPE, stream=True, on_limit=bounds.append)
    for chunk in chunks:
        observer.feed(chunk)
    observer.finish()
    return sink, bounds, observer


def _reasoned(*more: bytes) -> list[bytes]:
    return [event([delta(reasoning_content="think")]) + b"\n\n", *more]


def test_one_character_argument_pieces_reach_the_bound_by_their_count() -> None:
    """Each kept piece costs its characters and PIECE_COST: a million one-character pieces
    (64 MiB of bookkeeping) would otherwise pass a bound on characters alone."""
    from proxy.stash.observer import MAX_OBSERVED, PIECE_COST

    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "a"}}
    piece = event([delta(tool_calls=[call])]) + b"\n\n"
    needed = MAX_OBSERVED // (1 + PIECE_COST) + 2
    sink, bounds, observer = _bounded(_reasoned(piece * needed))
    assert bounds == ["observed_bytes"] and sink.stored == {}
    assert observer._choices == {}  # everything held for it is let go


def test_too_many_choices_or_calls_stop_the_observation() -> None:
    from proxy.stash.observer import MAX_CALLS, MAX_CHOICES

    choices = [delta(index, reasoning_content="t") for index in range(MAX_CHOICES + 1)]
    assert _bounded([event(choices) + b"\n\n"])[1] == ["choices"]
    calls = [
        {"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}
        for i in range(MAX_CALLS + 1)
    ]
    sink, bounds, _ = _bounded(_reasoned(event([delta(tool_calls=calls)]) + b"\n\n"))
    assert bounds == ["calls"] and sink.stored == {}


def test_an_event_of_endless_data_lines_is_bounded() -> None:
    from proxy.stash.observer import MAX_LINE

    line = b"data: " + b"x" * (1 << 20) + b"\n"
    _, bounds, observer = _bounded([line] * (MAX_LINE // (1 << 20) + 2))
    assert bounds == ["line"] and observer._data == []


def test_a_turn_within_the_bounds_is_stored_as_before() -> None:
    sink, bounds, _ = _bounded([stream()])
    assert sink.stored == {KEY: REASONING} and bounds == []
