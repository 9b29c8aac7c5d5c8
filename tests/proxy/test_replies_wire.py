"""The reply rules on the wire (proxy/relay/replies.py, proxy/relay/replies_messages.py): an
upstream's bytes, cut anywhere, rewritten event by event.

Oracles written here: a client's reading of the stream (content, calls by index, the finish or
stop reason), rebuilt as the SDKs rebuild it; a stream with no markup comes back as the very
bytes that went in, whatever the cuts; a stream with markup reads as the whole response reads.
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

import orjson
import pytest

from proxy.relay.replies import ReplyStream, whole_reply
from proxy.relay.replies_messages import MessagesReply, MessagesStream, whole_messages_reply
from rules.engine.base import RuleContext
from rules.replies import REPLY_RULES
from rules.replies.pipeline import ReplyRun
from tools.emulate.text_calls import WRITERS

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
]
ARGUMENTS = {"path": 'a "quoted" <name>\nx', "lines": 3}


def run(formats: list[str], request: dict[str, Any] | None = None) -> ReplyRun:
    options = {"response-text-tool-calls": {"formats": formats}}
    steps = [
        (rule, RuleContext(options.get(rule.name, {})))
        for rule in REPLY_RULES
        if rule.default or rule.name in options
    ]
    counter = itertools.count()
    return ReplyRun(steps, request or {"tools": TOOLS}, new_id=lambda: f"call_{next(counter)}")


def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
    event: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        event["usage"] = usage
    return b"data: " + orjson.dumps(event) + b"\n\n"


def stream_of(text: str, size: int = 4) -> bytes:
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
    parts += [chunk({}, "stop", usage={"total_tokens": 9}), b"data: [DONE]\n\n"]
    return b"".join(parts)


def cut(body: bytes, seed: int) -> list[bytes]:
    rng, out, at = random.Random(seed), [], 0
    while at < len(body):
        size = rng.randint(1, 64)
        out.append(body[at : at + size])
        at += size
    return out


def through(stream: ReplyStream | MessagesStream, pieces: list[bytes]) -> bytes:
    return b"".join(stream.feed(piece) for piece in pieces) + stream.finish()


def read_chat(body: bytes) -> tuple[str, list[dict[str, Any]], str | None, int]:
    """What a client reads: content, calls by index (pieces joined), the last finish_reason,
    and how many events carried ``usage``."""
    content, finish, usages = "", None, 0
    calls: dict[int, dict[str, Any]] = {}
    for event in body.split(b"\n\n"):
        if not event.startswith(b"data: ") or event == b"data: [DONE]":
            continue
        data = orjson.loads(event[6:])
        usages += "usage" in data
        choice = data["choices"][0]
        content += choice["delta"].get("content") or ""
        for call in choice["delta"].get("tool_calls") or []:
            known = calls.setdefault(call["index"], {"name": "", "arguments": "", "id": None})
            known["id"] = known["id"] or call.get("id")
            known["name"] += call.get("function", {}).get("name") or ""
            known["arguments"] += call.get("function", {}).get("arguments") or ""
        finish = choice.get("finish_reason") or finish
    return content, [calls[i] for i in sorted(calls)], finish, usages


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_a_call_written_as_text_reads_as_a_call_whatever_the_cuts(fmt: str) -> None:
    text = "Let me read it.\n\n" + WRITERS[fmt]("read_file", ARGUMENTS, "call_00_abc") + "\nDone."
    for seed in range(8):
        out = through(ReplyStream(run([fmt])), cut(stream_of(text, 3 + seed), seed))
        content, calls, finish, usages = read_chat(out)
        assert content == "Let me read it.\n\n\nDone."
        assert len(calls) == 1 and calls[0]["name"] == "read_file"
        assert orjson.loads(calls[0]["arguments"]) == ARGUMENTS
        assert calls[0]["id"]
        assert finish == "tool_calls" and usages == 1
    whole = orjson.dumps(
        {
            "id": "chatcmpl-1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
    )
    fixed = whole_reply(run([fmt]), whole)
    assert fixed is not None
    message = orjson.loads(fixed[0])["choices"][0]
    assert message["finish_reason"] == "tool_calls"
    assert message["message"]["content"] == "Let me read it.\n\n\nDone."
    assert orjson.loads(message["message"]["tool_calls"][0]["function"]["arguments"]) == ARGUMENTS


@pytest.mark.parametrize(
    "text",
    [
        "A plain answer, with a < b and [brackets] and `code`.",
        '```\n<tool_call>{"name": "read_file", "arguments": {}}</tool_call>\n```',
        '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>',
        "Ends inside a marker <tool_ca",
    ],
)
def test_a_stream_without_a_call_comes_back_byte_for_byte(text: str) -> None:
    body = stream_of(text)
    for seed in range(8):
        out = through(ReplyStream(run(sorted(WRITERS))), cut(body, seed))
        assert read_chat(out)[:3] == (text, [], "stop")
        if "<" not in text and "[" not in text:
            assert out == body


def test_tool_choice_none_or_no_tools_arms_nothing() -> None:
    assert not run(["hermes"], {"tools": TOOLS, "tool_choice": "none"}).armed[1:]
    text = WRITERS["hermes"]("read_file", ARGUMENTS, "x")
    out = through(ReplyStream(run(["hermes"], {"tools": []})), [stream_of(text)])
    assert read_chat(out)[:2] == (text, [])


def test_a_real_call_first_leaves_the_text_alone() -> None:
    call = {"index": 0, "id": "call_real", "type": "function",
            "function": {"name": "read_file", "arguments": "{}"}}  # fmt: skip
    text = WRITERS["hermes"]("read_file", ARGUMENTS, "x")
    body = chunk({"tool_calls": [call]}) + stream_of(text)
    out = through(ReplyStream(run(["hermes"])), [body])
    content, calls, _, _ = read_chat(out)
    assert content == text and [c["id"] for c in calls] == ["call_real"]


def event(payload: dict[str, Any]) -> bytes:
    kind: str = payload["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def messages_stream(text: str) -> bytes:
    parts = [
        event(
            {"type": "message_start", "message": {"id": "m", "content": [], "stop_reason": None}}
        ),
        event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        ),
    ]
    parts += [
        event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text[i : i + 5]},
            }
        )
        for i in range(0, len(text), 5)
    ]
    parts += [
        event({"type": "content_block_stop", "index": 0}),
        event(
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "text", "text": ""},
            }
        ),
        event(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "After."},
            }
        ),
        event({"type": "content_block_stop", "index": 1}),
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            }
        ),
        event({"type": "message_stop"}),
    ]
    return b"".join(parts)


def read_messages(body: bytes) -> tuple[list[dict[str, Any]], Any]:
    """The message's blocks as the anthropic SDK accumulates them, and its stop_reason."""
    blocks: dict[int, dict[str, Any]] = {}
    stop = None
    for raw in body.split(b"\n\n"):
        if not raw:
            continue
        payload = orjson.loads(raw.split(b"data: ", 1)[1])
        if payload["type"] == "content_block_start":
            assert payload["index"] == len(blocks), "blocks start in order"
            blocks[payload["index"]] = dict(payload["content_block"])
        elif payload["type"] == "content_block_delta":
            delta, block = payload["delta"], blocks[payload["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                block["json"] = block.get("json", "") + delta["partial_json"]
        elif payload["type"] == "message_delta":
            stop = payload["delta"]["stop_reason"]
    return [blocks[i] for i in sorted(blocks)], stop


MESSAGES_TOOLS = {
    "tools": [{"name": "read_file", "input_schema": TOOLS[0]["function"]["parameters"]}]
}


@pytest.mark.parametrize("lead", ["", "Reading.\n"])
def test_a_messages_text_block_s_markup_becomes_a_tool_use_block(lead: str) -> None:
    text = lead + WRITERS["minimax"]("read_file", ARGUMENTS, "x")
    for seed in range(8):
        reply = MessagesReply(MESSAGES_TOOLS, RuleContext({"formats": ["minimax"]}))
        blocks, stop = read_messages(
            through(MessagesStream(reply), cut(messages_stream(text), seed))
        )
        kinds = [b["type"] for b in blocks]
        assert kinds == (["text"] if lead else []) + ["tool_use", "text"]
        assert blocks[-2]["name"] == "read_file" and orjson.loads(blocks[-2]["json"]) == ARGUMENTS
        assert all(b["text"] for b in blocks if b["type"] == "text")  # never an empty text block
        assert blocks[-1]["text"] == "After." and stop == "tool_use"
    whole = orjson.dumps({"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})
    fixed = whole_messages_reply(
        MessagesReply(MESSAGES_TOOLS, RuleContext({"formats": ["minimax"]})), whole
    )
    assert fixed is not None and orjson.loads(fixed)["stop_reason"] == "tool_use"


@pytest.mark.parametrize("text", ["Plain text, no markup.", "Plain text, a < b."])
def test_a_messages_stream_without_markup_comes_back_byte_for_byte(text: str) -> None:
    """Byte for byte, unless a text delta ends with what may begin a marker (``a <``): that
    delta waits for the next and both leave as one, the reading unchanged."""
    body = messages_stream(text)
    for seed in range(8):
        reply = MessagesReply(MESSAGES_TOOLS, RuleContext({"formats": ["minimax"]}))
        out = through(MessagesStream(reply), cut(body, seed))
        assert read_messages(out) == read_messages(body)
        if "<" not in text:
            assert out == body


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_rewriter_that_fails_mid_hold_loses_no_text(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rules hold a possible marker; the rewriter then fails: what they held still reaches
    the client, before the rest passes as it came."""
    text = "Checking now <minimax:tool_c"  # a marker's prefix: held
    stream: ReplyStream | MessagesStream
    if api == "chat":
        stream = ReplyStream(run(["minimax"]))
        body = stream_of(text)
    else:
        stream = MessagesStream(
            MessagesReply(MESSAGES_TOOLS, RuleContext({"formats": ["minimax"]}))
        )
        body = messages_stream(text)
    parts = [part + b"\n\n" for part in body.split(b"\n\n") if part]
    last = max(at for at, part in enumerate(parts) if b"_c" in part or b"tool" in part)
    out = stream.feed(b"".join(parts[: last + 1]))  # every text event: the marker's start held
    tail = b"".join(parts[last + 1 :])

    def broken(*args: Any) -> bytes:
        raise RuntimeError("a bug")

    monkeypatch.setattr(stream, "_event", broken)
    out += stream.feed(tail) + stream.finish()
    seen = (
        read_chat(out)[0]
        if api == "chat"
        else "".join(b.get("text", "") for b in read_messages(out)[0])
    )
    assert "<minimax:tool_c" in seen and seen.startswith("Checking now")


@pytest.mark.parametrize("ending", ["partial", "whole-block", "past-the-held-bound"])
def test_a_stream_cut_before_its_finish_keeps_what_the_rules_held(ending: str) -> None:
    """No finish_reason, no [DONE]: at the end of the body the rules let go of what they hold,
    a marker's start as text, a whole block as its call, an open block held past MAX_HELD
    (its events already written anew) as its text."""
    call = WRITERS["minimax"]("read_file", {"path": "a.txt"}, "")
    text = {
        "partial": "Reading <minimax:tool",
        "whole-block": "Reading " + call,
        "past-the-held-bound": "Reading <minimax:tool_call>" + "x" * 60_000,
    }[ending]
    body = stream_of(text)
    body = body[: body.index(b'"finish_reason":"stop"')]
    body = body[: body.rindex(b"data: ")]  # the events up to the last text, none after
    stream = ReplyStream(run(["minimax"]))
    out = through(stream, [body])
    content, calls, _, _ = read_chat(out)
    if ending != "whole-block":
        assert content == text and not calls
    else:
        assert content == "Reading " and [c["name"] for c in calls] == ["read_file"]


def test_a_long_held_block_costs_time_in_proportion_to_it() -> None:
    """8,000 one-character events held for an open block: each event is compared once with
    what the rules gave for it (a comparison of everything held at every event took 14 s)."""
    body = stream_of("A <minimax:tool_call>" + "x" * 8000, 1)
    started = time.perf_counter()
    stream = ReplyStream(run(["minimax"]))
    content = read_chat(stream.feed(body) + stream.finish())[0]
    assert time.perf_counter() - started < 3.0
    assert content == "A <minimax:tool_call>" + "x" * 8000
