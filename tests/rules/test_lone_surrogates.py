"""lone-surrogates: as a rule on messages, and in the proxy's reading of a body orjson refuses."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from rules.chat import RULES, lone_surrogates
from rules.engine.base import RuleContext
from rules.engine.pipeline import default_steps
from rules.providers.sanitize import sanitize_body
from tests.fake_upstream import strict_errors

CTX = RuleContext()
STEPS = default_steps(RULES)
# hermes R26, docs/providers.md#encoding: an emoji cut between its two halves
CUT = "done \U0001f600"[:-1] + "\ud83d"


def test_lone_halves_become_replacement_characters_pairs_stay() -> None:
    messages = [
        {"role": "user", "content": "a\ud83dz"},
        {"role": "tool", "tool_call_id": "c", "content": "\ude00 start"},
        {"role": "user", "content": "ok \U0001f600"},
    ]
    outcome = lone_surrogates.apply(messages, CTX)
    assert outcome.messages[0]["content"] == "a\ufffdz"
    assert outcome.messages[1]["content"] == "\ufffd start"
    assert outcome.messages[2] is messages[2]
    assert [c.index for c in outcome.changes] == [0, 1]
    assert outcome.changes[0].detail == {"count": 1, "paths": ["content"]}
    assert messages[0]["content"] == "a\ud83dz"  # the input is untouched


def test_clean_messages_come_back_as_the_same_list() -> None:
    messages: list[Any] = [{"role": "user", "content": "plain \U0001f600 text"}]
    assert lone_surrogates.apply(messages, CTX).messages is messages


def test_keys_and_nested_values_are_repaired() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "x\udbff"}], "k\ud800": 1}]
    fixed = lone_surrogates.apply(messages, CTX).messages[0]
    assert fixed["content"][0]["text"] == "x\ufffd"
    assert "k\ufffd" in fixed


@given(st.text())
def test_the_result_always_encodes_and_keeps_every_valid_character(text: str) -> None:
    messages = [{"role": "user", "content": text}]
    fixed = lone_surrogates.apply(messages, CTX).messages[0]["content"]
    fixed.encode("utf-8")  # never raises
    assert len(fixed) == len(text)
    assert all(a == b for a, b in zip(fixed, text, strict=True) if b != "\ufffd" and a != "\ufffd")


def body_with_lone_surrogates() -> bytes:
    # json.dumps writes the lone half as an escape (ensure_ascii), as a Python agent does.
    payload = {
        "model": "deepseek-chat",
        "messages": [
            {"role": "user", "content": "summarise"},
            {"role": "assistant", "content": CUT},
            {"role": "user", "content": "go on"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "description": "d\udc00"}}],
    }
    return json.dumps(payload).encode()


def test_the_proxy_repairs_a_body_orjson_refuses() -> None:
    raw = body_with_lone_surrogates()
    try:
        orjson.loads(raw)
        raise AssertionError("orjson must refuse this body")
    except orjson.JSONDecodeError:
        pass
    result = sanitize_body(raw, STEPS)
    assert result.skipped is None
    sent = orjson.loads(result.body)
    assert sent["messages"][1]["content"] == "done \ufffd"
    assert sent["tools"][0]["function"]["description"] == "d\ufffd"
    assert strict_errors(sent) == []
    rules = [(c.rule, c.index) for c in result.changes]
    assert (lone_surrogates.NAME, -1) in rules  # the tools field
    assert (lone_surrogates.NAME, 1) in rules  # the message


def test_surrogate_bytes_are_repaired_too() -> None:
    raw = b'{"model": "m", "messages": [{"role": "user", "content": "x\xed\xa0\xbd"}]}'
    sent = orjson.loads(sanitize_body(raw, STEPS).body)
    assert sent["messages"][0]["content"] == "x\ufffd"


def test_with_the_rule_off_the_body_goes_as_it_came() -> None:
    raw = body_with_lone_surrogates()
    steps = default_steps(RULES, {lone_surrogates.NAME: False})
    result = sanitize_body(raw, steps)
    assert result.body is raw
    assert result.skipped == "body_not_json"


def test_nan_is_still_not_ours_to_fix() -> None:
    raw = b'{"model": "m", "messages": [], "temperature": NaN}'
    result = sanitize_body(raw, STEPS)
    assert result.body is raw and result.skipped == "body_not_json"
