"""A repaired body keeps the client's writing of every message no rule replaced
(rules/providers/writing.py): Go's ``\\u003c``, .NET's upper-case escapes, ``json.dumps``'
spacing and ``ensure_ascii``, PHP's ``\\/``, an indented body; in chat completions
(``messages``), the Responses API (``input``) and Anthropic Messages (``messages``, a kept turn's
signed thinking block as it was written). The oracle reads the bodies itself
(``tests.writings.items_written``, member by member from the top), writes out what a rule makes
and what orjson writes outside the list, and judges a body of another writing by the same body
written by orjson: the same repair, the same values."""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson
import pytest

from rules.providers.sanitize import sanitize_body
from tests.rules.test_nothing_lost import plan_of
from tests.sessions import api_session
from tests.sessions import session as bench_session
from tests.writings import WRITINGS, items_written, same_json

BODY: dict[str, Any] = {
    "model": "deepseek-chat",
    "messages": [
        {"role": "user", "content": "Fix <div> & the café/path \U0001f600"},
        {"role": "assistant", "content": "Looking", "tool_calls": []},  # refused: repaired
        {"role": "user", "content": "next: é / < > &"},
    ],
    "temperature": 0.5,
}


@pytest.mark.parametrize("writing", sorted(WRITINGS))
def test_a_repaired_body_keeps_each_message_no_rule_replaced_as_the_client_wrote_it(
    writing: str,
) -> None:
    raw = WRITINGS[writing](BODY)
    out = sanitize_body(raw, plan_of("chat", "deepseek"), "chat")
    assert [change.rule for change in out.changes] == ["empty-tool-calls"]
    sent, written = items_written(out.body, "messages"), items_written(raw, "messages")
    assert sent[0] == written[0]
    assert sent[1] == orjson.dumps({"role": "assistant", "content": "Looking"})
    assert sent[2] == written[2]
    compact = sanitize_body(orjson.dumps(BODY), plan_of("chat", "deepseek"), "chat")
    assert same_json(orjson.loads(out.body), orjson.loads(compact.body))
    # Outside the list, and between its items, the body is orjson's writing.
    assert out.body.startswith(b'{"model":"deepseek-chat","messages":[')
    assert out.body.endswith(b'],"temperature":0.5}')


def test_list_items_orjson_shares_are_written_as_orjson_writes_them() -> None:
    """orjson gives one object for every small integer (``0`` and ``-0``), ``null``, ``true``,
    ``false`` and ``""`` of a body: a list item that is one (no message, but a client may send
    it) is written as orjson writes it, so that no other item's bytes stand for it (a review's
    case: the client's ``0`` was sent as the ``-0`` written after it)."""
    raw = (
        b'{"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}, 0, -0, null,'
        b' "", true, {"role": "assistant", "content": "Looking", "tool_calls": []}, 0, -0]}'
    )
    out = sanitize_body(raw, plan_of("chat", "deepseek"), "chat")
    assert [change.rule for change in out.changes] == ["empty-tool-calls"]
    sent = items_written(out.body, "messages")
    assert sent[0] == b'{"role": "user", "content": "hi"}'
    assert sent[1:] == [b"0", b"0", b"null", b'""', b"true", sent[6], b"0", b"0"]


def test_a_body_nothing_repaired_goes_as_it_came() -> None:
    raw = WRITINGS["indented"]({**BODY, "messages": BODY["messages"][::2]})
    assert sanitize_body(raw, plan_of("chat", "deepseek"), "chat").body is raw


@pytest.mark.parametrize("writing", sorted(set(WRITINGS) - {"orjson"}))
@pytest.mark.parametrize(
    ("name", "workload"),
    [("deepseek", "stuck"), ("mistral", "broken"), ("gemini-openai", "stuck-split")],
)
def test_agent_sessions_keep_the_client_writing_of_what_no_rule_replaced(
    writing: str, name: str, workload: str
) -> None:
    """The bodies of an agent's session (each the last plus a turn), repaired: the same values
    as the orjson client's, and every message either the client's bytes of one of its messages
    or orjson's writing of a message a rule made; each change makes at most one message, so all
    the others are the client's."""
    plan = plan_of("chat", name)
    repaired = 0
    for number, compact in enumerate(bench_session(24, workload, seed=5)[::3]):
        raw = WRITINGS[writing](orjson.loads(compact))
        out, reference = sanitize_body(raw, plan, "chat"), sanitize_body(compact, plan, "chat")
        assert same_json(orjson.loads(out.body), orjson.loads(reference.body)), number
        assert len(out.changes) == len(reference.changes), number
        if not out.changes:
            assert out.body is raw
            continue
        repaired += 1
        clients = set(items_written(raw, "messages"))
        sent = items_written(out.body, "messages")
        kept = [piece in clients for piece in sent]
        for piece, theirs in zip(sent, kept, strict=True):
            assert theirs or piece == orjson.dumps(orjson.loads(piece)), number
        assert kept.count(False) <= len(out.changes), number
        assert kept.count(True) >= len(sent) - len(out.changes) > 0, number
    assert repaired >= 3


# The Responses API (its list is ``input``) and Anthropic Messages (``messages``, with
# ``system`` a top-level field and each message a list of content blocks).

#: Anthropic-shaped signatures (base64), with a ``/`` PHP writes ``\/``.
SIGNATURE = "EqQBCkYIBxgCKkB/sig+0000000000000000000000000000000000000000000000=="
SIGNATURE_2 = "EqQBCkYIBxgCKkB+sig/1111111111111111111111111111111111111111111111=="
_TEXT = "Answer <briefly> & in café style / \U0001f600"
_ASK = "Fix <div> & the café/path \U0001f600"
_NEXT = "next: é / < > &"

RESPONSES_BODY: dict[str, Any] = {
    "model": "qwen3-coder",
    "instructions": _TEXT,
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _ASK}]},
        {  # refused by vLLM (a trailing comma): responses-invalid-arguments repairs it
            "type": "function_call",
            "call_id": "call_1",
            "name": "read_file",
            "arguments": '{"path": "src/<a>&b.py",}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "é / < > & \U0001f600"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _NEXT}]},
    ],
    "store": False,
}
#: What responses-invalid-arguments makes of the call: its object's text, the comma gone,
#: compacted (the chat rule's repair).
REPAIRED_CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "read_file",
    "arguments": '{"path":"src/<a>&b.py"}',
}
#: The message between the call and its output: DeepSeek refuses any item between them
#: (responses-displaced-messages, ``adjacency: strict``, moves the output up to its call).
DISPLACED_BODY: dict[str, Any] = {
    **RESPONSES_BODY,
    "input": [
        RESPONSES_BODY["input"][0],
        {**REPAIRED_CALL, "arguments": '{"path": "src/<a>&b.py"}'},
        RESPONSES_BODY["input"][3],
        RESPONSES_BODY["input"][2],
    ],
}

_SYSTEM = [{"type": "text", "text": _TEXT}]
_DONE = {"role": "assistant", "content": [{"type": "text", "text": "Done <ok> & é/\U0001f600"}]}
MESSAGES_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": _SYSTEM,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": _ASK}]},
        {  # refused: the input is text, not an object (messages-tool-input parses it)
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading <it> & é"},
                {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": '{"p": "a/<b>",}'},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "é / < > & \U0001f600",
                },
                {"type": "text", "text": _NEXT},
            ],
        },
    ],
    "stream": True,
}
REPAIRED_INPUT = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Reading <it> & é"},
        {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"p": "a/<b>"}},
    ],
}
#: Two user turns in a row (Anthropic: "roles must alternate"): messages-consecutive-roles
#: merges them into the first, one block list in order; the second goes.
SPLIT_BODY: dict[str, Any] = {
    **MESSAGES_BODY,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": _ASK}]},
        {"role": "user", "content": [{"type": "text", "text": "and </b> & é too"}]},
        _DONE,
        {"role": "user", "content": [{"type": "text", "text": _NEXT}]},
    ],
}
MERGED = {
    "role": "user",
    "content": [{"type": "text", "text": _ASK}, {"type": "text", "text": "and </b> & é too"}],
}
#: An empty assistant turn, not the last (Anthropic: "all messages must have non-empty
#: content"): messages-empty-messages drops it; the turns on both sides are kept.
EMPTY_TURN_BODY: dict[str, Any] = {
    **MESSAGES_BODY,
    "messages": [
        SPLIT_BODY["messages"][0],
        {"role": "assistant", "content": []},
        *SPLIT_BODY["messages"][2:],
    ],
}
#: Claude Code with extended thinking: each assistant turn opens with a signed thinking block;
#: the second turn's input is text (refused), the first turn is kept, signature and all.
THINKING_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 32000,
    "system": _SYSTEM,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": _ASK}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Read <it> & é/\U0001f600",
                    "signature": SIGNATURE,
                },
                {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"p": "a/<b>"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "é/<&>"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Now <grep> & é", "signature": SIGNATURE_2},
                {"type": "tool_use", "id": "toolu_02", "name": "Grep", "input": '{"q": "<&>",}'},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": "none/é"}],
        },
    ],
    "thinking": {"type": "enabled", "budget_tokens": 16000},
}
REPAIRED_THINKING_TURN = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "Now <grep> & é", "signature": SIGNATURE_2},
        {"type": "tool_use", "id": "toolu_02", "name": "Grep", "input": {"q": "<&>"}},
    ],
}


class Case(NamedTuple):
    api: str
    profile: str
    body: dict[str, Any]
    #: The rules that change it, in order.
    rules: list[str]
    #: What its list becomes: an ``int``, the client's item at that place (kept, wherever it
    #: now stands); a dict, an item a rule made.
    sent: list[Any]
    #: orjson's writing of what stands before the list's ``[`` and after its ``]``.
    head: str
    tail: str


#: orjson writes the texts as they are (UTF-8, no escapes: they hold no ``"``, ``\\`` or
#: control character).
_R_HEAD = f'{{"model":"qwen3-coder","instructions":"{_TEXT}","input":'
_M_HEAD = (
    '{"model":"claude-sonnet-4-5","max_tokens":1024,'
    f'"system":[{{"type":"text","text":"{_TEXT}"}}],"messages":'
)
_T_HEAD = (
    '{"model":"claude-sonnet-4-5","max_tokens":32000,'
    f'"system":[{{"type":"text","text":"{_TEXT}"}}],"messages":'
)
_T_TAIL = ',"thinking":{"type":"enabled","budget_tokens":16000}}'
CASES: dict[str, Case] = {
    "responses, a call repaired": Case(
        "responses",
        "chat-template",
        RESPONSES_BODY,
        ["responses-invalid-arguments"],
        [0, REPAIRED_CALL, 2, 3],
        _R_HEAD,
        ',"store":false}',
    ),
    "responses, an output moved up": Case(
        "responses",
        "deepseek",
        DISPLACED_BODY,
        ["responses-displaced-messages"],
        [0, 1, 3, 2],
        _R_HEAD,
        ',"store":false}',
    ),
    "messages, an input repaired": Case(
        "messages",
        "deepseek",
        MESSAGES_BODY,
        ["messages-tool-input"],
        [0, REPAIRED_INPUT, 2],
        _M_HEAD,
        ',"stream":true}',
    ),
    "messages, two turns merged": Case(
        "messages",
        "deepseek",
        SPLIT_BODY,
        ["messages-consecutive-roles"],
        [MERGED, 2, 3],
        _M_HEAD,
        ',"stream":true}',
    ),
    "messages, an empty turn dropped": Case(
        "messages",
        "deepseek",
        EMPTY_TURN_BODY,
        ["messages-empty-messages"],
        [0, 2, 3],
        _M_HEAD,
        ',"stream":true}',
    ),
    "messages, signed thinking kept": Case(
        "messages",
        "anthropic",
        THINKING_BODY,
        ["messages-tool-input"],
        [0, 1, 2, REPAIRED_THINKING_TURN, 4],
        _T_HEAD,
        _T_TAIL,
    ),
}
FIELD = {"responses": "input", "messages": "messages"}


@pytest.mark.parametrize("writing", sorted(WRITINGS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_repaired_responses_or_messages_body_keeps_the_client_writing_of_each_kept_item(
    case: str, writing: str
) -> None:
    """The client's bytes for each item no rule replaced (moved or not), orjson's for each item
    a rule made, for the top-level fields and for the ``,`` between items; the values those of
    the compact (orjson) client's repaired body."""
    api, profile, body, rules, layout, head, tail = CASES[case]
    field, plan = FIELD[api], plan_of(api, profile)
    raw = WRITINGS[writing](body)
    out = sanitize_body(raw, plan, api)
    assert [change.rule for change in out.changes] == rules
    written = items_written(raw, field)
    sent = [written[item] if type(item) is int else orjson.dumps(item) for item in layout]
    assert items_written(out.body, field) == sent
    assert out.body == b"".join((head.encode(), b"[", b",".join(sent), b"]", tail.encode()))
    compact = sanitize_body(orjson.dumps(body), plan, api)
    assert same_json(orjson.loads(out.body), orjson.loads(compact.body))


@pytest.mark.parametrize("writing", sorted(WRITINGS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_responses_or_messages_body_nothing_repaired_goes_as_it_came(
    case: str, writing: str
) -> None:
    """The case's body as its rules leave it: what the provider accepts goes as it came."""
    api, profile, body, _, layout, _, _ = CASES[case]
    field = FIELD[api]
    repaired = [body[field][item] if type(item) is int else item for item in layout]
    raw = WRITINGS[writing]({**body, field: repaired})
    out = sanitize_body(raw, plan_of(api, profile), api)
    assert not out.changes
    assert out.body is raw


@pytest.mark.parametrize("writing", sorted(WRITINGS))
def test_a_signed_block_that_repeats_a_key_sends_the_body_as_it_came(writing: str) -> None:
    """Written back, a kept signed thinking block whose key is written twice would keep one
    value under a signature that may cover the other: the body goes as the client wrote it."""
    raw = WRITINGS[writing](THINKING_BODY)
    twice = raw.replace(b'"signature"', b'"thinking":"again","signature"', 1)
    out = sanitize_body(twice, plan_of("messages", "anthropic"), "messages")
    assert out.skipped == "duplicate_signed_keys"
    assert out.body is twice


@pytest.mark.parametrize("writing", sorted(set(WRITINGS) - {"orjson"}))
@pytest.mark.parametrize(
    ("api", "profile", "workload", "thinking"),
    [
        ("responses", "chat-template", "broken", False),  # calls' arguments repaired
        ("responses", "deepseek", "stuck-split", False),  # a replayed run of items dropped
        ("messages", "deepseek", "stuck", False),  # an input repaired
        ("messages", "kimi", "broken", True),  # inputs repaired, signed thinking kept
        ("messages", "anthropic", "stuck-split", True),  # turns merged, ids renamed, stubs
    ],
)
def test_responses_and_messages_sessions_keep_the_client_writing_of_what_no_rule_replaced(
    writing: str, api: str, profile: str, workload: str, thinking: bool
) -> None:
    """A Codex (Responses) or Claude Code (Messages) session's bodies, each the last plus a
    turn, repaired: the same values as the orjson client's; outside the list, and between its
    items, the orjson client's bytes; every item either the client's bytes of one of its items
    or orjson's writing of an item a rule made; each change makes at most one item, so all the
    others are the client's (signed thinking blocks among them)."""
    field, plan = FIELD[api], plan_of(api, profile)
    repaired = signed = 0
    for number, compact in enumerate(api_session(api, 24, workload, seed=5, thinking=thinking)):
        raw = WRITINGS[writing](orjson.loads(compact))
        out, reference = sanitize_body(raw, plan, api), sanitize_body(compact, plan, api)
        assert same_json(orjson.loads(out.body), orjson.loads(reference.body)), number
        assert len(out.changes) == len(reference.changes), number
        if not out.changes:
            assert out.body is raw
            continue
        repaired += 1
        sent = items_written(out.body, field)
        listed = b"[" + b",".join(items_written(reference.body, field)) + b"]"
        assert reference.body.count(listed) == 1, number
        head, tail = reference.body.split(listed)
        assert out.body == head + b"[" + b",".join(sent) + b"]" + tail, number
        clients = set(items_written(raw, field))
        kept = [piece for piece in sent if piece in clients]
        for piece in sent:
            assert piece in clients or piece == orjson.dumps(orjson.loads(piece)), number
        assert len(sent) - len(out.changes) <= len(kept) > 0, number
        signed += sum(b'"signature"' in piece for piece in kept)
    assert repaired >= 6  # of the session's 10 bodies
    assert signed >= 30 * thinking  # kept items with a signed block, as the client wrote them
