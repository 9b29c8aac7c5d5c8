"""The reply rules' pre-check (``rules.replies.base.may_act``, used by
``proxy.relay.rewrite.Rewrite.whole``): a whole answer that holds none of the armed rules'
needles is not parsed, since no rule could change it.

The oracle is the full path run on the same bytes: the same ``Rewrite`` armed the same way,
with the pre-check switched off (``may_act`` patched to say yes to every answer), so every
answer is parsed and run through the rules as before the pre-check existed. For every
profile's reply plan (as compiled, with ``response-think-tags`` on, and in report mode), over
generated answers (with and without each format's markup, think tags, tool calls of every
shape, content that is null, empty or a list), written by orjson, by ``json.dumps`` with
``ensure_ascii``, spaced or not, with Go's ``\\u003c`` escapes, with PHP's ``\\/`` and with
characters escaped at random: the bytes the client gets, the changes applied and the changes
reported are the same. Made ids are drawn from one counter, restarted for each path.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.relay import rewrite
from proxy.relay.replies_messages import MessagesReply
from rules.engine.base import Change
from rules.providers.planner import merge_settings
from rules.providers.profiles import PROFILES
from rules.replies import REPLY_RULES_BY_NAME
from rules.replies.base import plain
from rules.replies.pipeline import ReplyPlan, compile_reply_plan
from tests.budget import examples
from tests.writings import go
from tools.emulate.text_calls import WRITERS

ARGUMENTS = {"path": 'a "quoted" <name>/é\n', "lines": 3}
PARAMETERS = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
    "required": ["path"],
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "read_file", "parameters": PARAMETERS}},
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
]
MESSAGES_TOOLS = [
    {"name": "read_file", "input_schema": PARAMETERS},
    {"name": "bash", "input_schema": {"type": "object"}},
]


def _plans() -> list[ReplyPlan]:
    """Every profile's reply plan: as compiled, with think tags on, in report mode (every rule
    reported, or one: both the enforced and the reported needles are used), and each rule
    alone (its own needles decide, not the union with another rule's)."""
    every = frozenset(REPLY_RULES_BY_NAME)
    think = {"response-think-tags": {"enabled": True}}
    plans = []
    for profile in PROFILES.values():
        settings = merge_settings(profile.replies)
        plans.append(compile_reply_plan(settings))
        plans.append(compile_reply_plan(merge_settings(settings, think)))
        plans.append(compile_reply_plan(merge_settings(settings, think), report=every))
        half = frozenset({"response-text-tool-calls"})
        plans.append(compile_reply_plan(settings, report=half))
        for name in REPLY_RULES_BY_NAME:  # each rule alone: its own needles decide
            alone = {other: {"enabled": other == name} for other in REPLY_RULES_BY_NAME}
            plans.append(compile_reply_plan(merge_settings(settings, alone)))
    unique: dict[str, ReplyPlan] = {}
    for plan in plans:
        key = repr([(rule.name, dict(ctx.options)) for rule, ctx in plan.report or plan.steps])
        unique.setdefault(key + repr(plan.reported), plan)
    return list(unique.values())


PLANS = _plans()

# --- the answers ---------------------------------------------------------------------------

MARKUP = [WRITERS[fmt]("read_file", ARGUMENTS, "call_00_x") for fmt in sorted(WRITERS)]
MARKUP += [WRITERS[fmt]("nope", ARGUMENTS, "") for fmt in ("hermes", "minimax")]  # undeclared
PIECES = [
    "Let me read it. ",
    "done",
    "\n",
    "```\n",
    "`",
    "é日本",
    "a/b",
    '"q"',
    "\\",
    "<",
    ">",
    "&",
    "</think>",
    "</thinking>",
    "<think>",
    "<tool_",
    "<tool_call>",
    "[TOOL_CALLS]",
    "<\uff5cDSML\uff5c",
    "<|tool_calls_section_begin|>",
    "<minimax:tool_call>",
]
LEADS = ["", " ", "\n\t"]
TAGS = ["", "", "", "<think>", "<thinking>", "<think"]
PROSE = ["Let me read it. ", "done", "\n", "é日本", "a/b", '"q"', "\\", "<", ">", "&"]

#: Content: mostly prose around at most one marker (so that each rule's needle alone decides),
#: sometimes several markers, sometimes any text.
text = st.builds(
    lambda lead, tag, parts: lead + tag + "".join(parts),
    st.sampled_from(LEADS),
    st.sampled_from(TAGS),
    st.one_of(
        st.lists(st.sampled_from(PROSE), max_size=3),
        st.tuples(st.sampled_from(PROSE), st.sampled_from(PIECES + MARKUP)).map(list),
        st.lists(
            st.one_of(st.sampled_from(PIECES), st.sampled_from(MARKUP), st.text(max_size=6)),
            max_size=4,
        ),
    ),
)

WELL_FORMED = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read_file", "arguments": '{"path": "x"}'},
}
CALLS: list[Any] = [
    WELL_FORMED,
    {**WELL_FORMED, "index": 0},
    {k: v for k, v in WELL_FORMED.items() if k != "id"},
    {**WELL_FORMED, "id": ""},
    {**WELL_FORMED, "function": {"name": "read_file", "arguments": {"path": "x"}}},
    {**WELL_FORMED, "function": {"name": None, "arguments": "{}"}},
    {"id": "call_2", "type": "function"},
    "not a call",
]
call = st.sampled_from(CALLS)

_ABSENT = object()


def _message(content: Any, reasoning: Any, calls: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    if content is not _ABSENT:
        message["content"] = content
    if reasoning is not _ABSENT:
        message["reasoning_content"] = reasoning
    if calls is not _ABSENT:
        message["tool_calls"] = calls
    return message


message = st.builds(
    _message,
    st.one_of(
        text,
        text,
        text,
        st.sampled_from([None, "", _ABSENT]),
        text.map(lambda t: [{"type": "text", "text": t}]),
    ),
    st.sampled_from([_ABSENT, _ABSENT, _ABSENT, "", "thought", "<think>x"]),
    st.one_of(
        st.just(_ABSENT), st.just(_ABSENT), st.just([]), st.lists(call, min_size=1, max_size=2)
    ),
)
finish = st.sampled_from(["stop", "tool_calls", "length", None])


def _choice(index: Any, message: Any, finish: Any) -> dict[str, Any]:
    return {"index": index, "message": message, "logprobs": None, "finish_reason": finish}


choice = st.builds(
    _choice,
    st.sampled_from([0, 0, 0, 1, "0"]),
    st.one_of(message, message, message, st.just("not a message")),
    finish,
)


def _completion(choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": choices,
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }


completion = st.lists(choice, min_size=1, max_size=2).map(_completion)

block = st.one_of(
    text.map(lambda t: {"type": "text", "text": t}),
    st.just({"type": "thinking", "thinking": "<think>x", "signature": "s"}),
    st.just({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "x"}}),
    st.just({"type": "text", "text": None}),
)


def _messages_answer(blocks: list[Any], stop: Any) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": blocks,
        "stop_reason": stop,
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }


messages_answer = st.builds(
    _messages_answer,
    st.lists(block, max_size=3),
    st.sampled_from(["end_turn", "tool_use", "max_tokens", None]),
)

# --- the writers ---------------------------------------------------------------------------

#: Characters that occur only inside JSON strings here (no ``null``, ``true``, ``false``,
#: number or bracket holds them), so any of them may be written as ``\uXXXX`` anywhere.
ESCAPABLE = "<>|\uff5c\u2581_:TDSMLkighopcé日"


def _escape(value: Any, chars: frozenset[str]) -> bytes:
    written = orjson.dumps(value).decode()
    return "".join(f"\\u{ord(c):04x}" if c in chars else c for c in written).encode()


WRITES: list[Callable[[Any], bytes]] = [
    orjson.dumps,
    lambda value: json.dumps(value).encode(),  # ensure_ascii, spaced
    lambda value: json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(),
    go,
    lambda value: json.dumps(value, ensure_ascii=False).replace("/", "\\/").encode(),  # PHP
]
write = st.one_of(
    st.sampled_from(WRITES),
    st.frozensets(st.sampled_from(ESCAPABLE), min_size=1).map(
        lambda chars: lambda value: _escape(value, chars)
    ),
)

# --- the two paths -------------------------------------------------------------------------


@contextmanager
def _ids() -> Iterator[None]:
    """Made ids from one counter, restarted: both paths make the same ids."""
    counter = itertools.count()
    with (
        mock.patch("secrets.token_hex", lambda size: f"{next(counter):0{2 * size}x}"),
        mock.patch("secrets.choice", lambda seq: seq[next(counter) % len(seq)]),
    ):
        yield


Outcome = tuple[bytes | None, list[Change], list[Change], str | None]


def _run(arm: rewrite.Arm, plan: ReplyPlan, request: dict[str, Any], body: bytes) -> Outcome:
    with _ids():
        rewriter = arm(plan, request)
        assert rewriter is not None
        out = rewriter.whole(body)
        header = rewriter.header() if out is not None else None
        return out, rewriter.changes, rewriter.reported, header


def _full(arm: rewrite.Arm, plan: ReplyPlan, request: dict[str, Any], body: bytes) -> Outcome:
    """The oracle: the full path, every answer parsed and read by the rules."""
    with mock.patch("proxy.relay.rewrite.may_act", lambda needles, body: True):
        return _run(arm, plan, request, body)


def _same_for_every_plan(arm: rewrite.Arm, request: dict[str, Any], body: bytes) -> int:
    """Both paths agree under every plan; how many plans armed."""
    armed = 0
    for plan in PLANS:
        if arm(plan, request) is None:
            continue
        armed += 1
        assert _run(arm, plan, request, body) == _full(arm, plan, request, body), plan
    return armed


CHAT_REQUESTS: list[dict[str, Any]] = [
    {"tools": CHAT_TOOLS},
    {"tools": CHAT_TOOLS, "tool_choice": "auto"},
    {"tools": CHAT_TOOLS, "tool_choice": {"type": "function", "function": {"name": "bash"}}},
]
MESSAGES_REQUESTS: list[dict[str, Any]] = [
    {"tools": MESSAGES_TOOLS},
    {"tools": MESSAGES_TOOLS, "tool_choice": {"type": "tool", "name": "read_file"}},
]


@settings(max_examples=examples(3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    completion,
    write,
    st.sampled_from(CHAT_REQUESTS),
    st.sampled_from([None] * 9 + [b"", b"not json", b'{"choices": 1}', b"[1]"]),
)
def test_a_chat_answer_the_pre_check_passes_is_one_no_rule_changes(
    answer: dict[str, Any],
    writer: Callable[[Any], bytes],
    request: dict[str, Any],
    garbage: bytes | None,
) -> None:
    body = writer(answer) if garbage is None else garbage
    assert _same_for_every_plan(rewrite.chat, request, body)


@pytest.mark.parametrize("writer", WRITES, ids=["orjson", "ensure_ascii", "compact", "go", "php"])
def test_a_choice_no_rule_changed_passes_as_it_came(writer: Callable[[Any], bytes]) -> None:
    """Found by the property above: think-tags held the content's leading blank (a tag may
    follow it) and let it go; the message rebuilt from what it let go lost its empty
    ``tool_calls``, and the full path wrote a body with no change counted ("0; rules=").
    A choice whose rules changed nothing now passes as it came on both paths."""
    message = {"role": "assistant", "content": " ", "tool_calls": []}
    body = writer(_completion([_choice(0, message, None)]))
    assert _same_for_every_plan(rewrite.chat, CHAT_REQUESTS[0], body)
    for plan in PLANS:
        armed = rewrite.chat(plan, CHAT_REQUESTS[0])
        assert armed is None or _full(rewrite.chat, plan, CHAT_REQUESTS[0], body)[0] is None


@settings(max_examples=examples(2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages_answer, write, st.sampled_from(MESSAGES_REQUESTS))
def test_a_messages_answer_the_pre_check_passes_is_one_no_rule_changes(
    answer: dict[str, Any], writer: Callable[[Any], bytes], request: dict[str, Any]
) -> None:
    assert _same_for_every_plan(rewrite.messages, request, writer(answer))


def _never_read(*args: Any) -> Any:
    raise AssertionError("the answer was parsed")


@pytest.mark.parametrize("writer", WRITES[:3], ids=["orjson", "ensure_ascii", "spaced"])
def test_a_plain_answer_is_not_parsed(writer: Callable[[Any], bytes]) -> None:
    """The fixed-cost case: a completion without markup, think tags or tool calls, under
    every plan, never reaches the parse (nor does a Messages answer with only text)."""
    answer = _completion([_choice(0, _message("The test passes now.", _ABSENT, _ABSENT), "stop")])
    texts = _messages_answer([{"type": "text", "text": "The test passes now."}], "end_turn")
    with (
        mock.patch("proxy.relay.rewrite.whole_reply", _never_read),
        mock.patch("proxy.relay.rewrite.whole_messages_reply", _never_read),
    ):
        for plan in PLANS:
            chat = rewrite.chat(plan, {"tools": CHAT_TOOLS})
            if chat is not None:  # a rule alone may arm for nothing (text calls, no format)
                assert chat.whole(writer(answer)) is None
                assert chat.changes == [] and chat.reported == []
            messages = rewrite.messages(plan, {"tools": MESSAGES_TOOLS})
            if messages is not None:
                assert messages.whole(writer(texts)) is None


@pytest.mark.parametrize("writer", [WRITES[1], go, WRITES[4]], ids=["ensure_ascii", "go", "php"])
def test_an_escaped_marker_is_still_read(writer: Callable[[Any], bytes]) -> None:
    """Markup written with escapes (``\\u003c``, ``\\uff5c``, ``\\/``) is found by the full read:
    the needles are not trusted on such a body."""
    plan = compile_reply_plan(
        merge_settings(
            PROFILES["chat-template"].replies, {"response-think-tags": {"enabled": True}}
        )
    )
    content = "<think>a/b</think>" + WRITERS["deepseek-dsml"]("read_file", ARGUMENTS, "c")
    body = writer(_completion([_choice(0, _message(content, _ABSENT, _ABSENT), "stop")]))
    assert not plain(body)  # each marker has more than one written form: none is trusted
    rewriter = rewrite.chat(plan, {"tools": CHAT_TOOLS})
    assert rewriter is not None and rewriter.whole(body) is not None
    assert {change.rule for change in rewriter.changes} == {
        "response-think-tags",
        "response-text-tool-calls",
        "response-finish-reason",
    }


#: One marker per answer, in plain prose: each rule's needles alone decide whether it is read.
ALONE: list[dict[str, Any]] = [
    *(
        _message(f"{lead}<{tag}>why</{tag}>so", _ABSENT, _ABSENT)
        for lead in LEADS
        for tag in ("think", "thinking")
    ),
    _message("\n<think>cut off", _ABSENT, _ABSENT),
    *(_message("Sure.\n" + markup, _ABSENT, _ABSENT) for markup in MARKUP),
    *(_message(markup, _ABSENT, _ABSENT) for markup in MARKUP),
    *(_message(content, _ABSENT, [shape]) for content in (None, "", "ok") for shape in CALLS),
]


@pytest.mark.parametrize("writer", [*WRITES, lambda value: _escape(value, frozenset("<T"))])
def test_each_marker_alone_is_read_as_the_full_path_reads_it(
    writer: Callable[[Any], bytes],
) -> None:
    changed = 0
    for index, one in enumerate(ALONE):
        body = writer(_completion([_choice(0, one, "stop")]))
        for request in CHAT_REQUESTS:
            assert _same_for_every_plan(rewrite.chat, request, body), index
        changed += _full(rewrite.chat, PLANS[-1], CHAT_REQUESTS[0], body)[0] is not None
        if isinstance(one.get("content"), str):
            texts = _messages_answer([{"type": "text", "text": one["content"]}], "end_turn")
            assert _same_for_every_plan(rewrite.messages, MESSAGES_REQUESTS[0], writer(texts))
    assert changed  # the markers are ones the rules act on


SERVER_TOOL = {"type": "web_search_20250305", "name": "web_search"}
ARMING_REQUESTS: list[dict[str, Any]] = [
    {},
    {"tools": None},
    {"tools": []},
    {"tools": [SERVER_TOOL]},
    {"tools": [SERVER_TOOL, *MESSAGES_TOOLS]},
    {"tools": [{"name": 3}, {"type": "custom", "name": "x"}]},
    {"tools": MESSAGES_TOOLS, "tool_choice": {"type": "none"}},
    {"tools": MESSAGES_TOOLS, "tool_choice": {"type": "any"}},
    {"tools": MESSAGES_TOOLS, "tool_choice": {"type": "tool", "name": "bash"}},
    {"tools": MESSAGES_TOOLS, "tool_choice": {"type": "tool", "name": "missing"}},
    {"tools": [SERVER_TOOL], "tool_choice": {"type": "tool", "name": "web_search"}},
]


@pytest.mark.parametrize("request_", ARMING_REQUESTS)
def test_a_messages_answer_is_armed_as_the_rules_would_read_it(request_: dict[str, Any]) -> None:
    """Arming asks the request without building the rules' reader: it arms exactly when a
    ``MessagesReply`` for the request would have something to read."""
    for plan in PLANS:
        ctx = plan.context("response-text-tool-calls")
        reads = ctx is not None and bool(MessagesReply(request_, ctx))
        assert (rewrite.messages(plan, request_) is not None) == reads
