"""A repaired body keeps the client's writing of every message no rule replaced
(rules/providers/writing.py): Go's ``\\u003c``, .NET's upper-case escapes, ``json.dumps``'
spacing and ``ensure_ascii``, PHP's ``\\/``, an indented body. The oracle reads the bodies
itself (``tests.writings.items_written``, member by member from the top), and judges a body of
another writing by the same body written by orjson: the same repair, the same values."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rules.providers.sanitize import sanitize_body
from tests.rules.test_nothing_lost import plan_of
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
