"""developer-role beyond the fixtures: its record, its check in two providers' words, and
hypothesis over junk."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings

from rules.chat import RULES, sanitize_messages
from rules.chat.developer_role import NAME, RULE, apply
from rules.chat.unknown_roles import QWEN_ROLES
from rules.providers.contract import CHECKS_BY_CODE
from rules.providers.contract.fields import QWEN_ROLE_TEXT
from tests.budget import examples
from tests.rules.shape_helpers import shaped_messages
from tests.strategies import broken_transcripts

CHECK = CHECKS_BY_CODE["unknown_role"]


def test_rule_record() -> None:
    assert RULE.name == NAME == "developer-role"
    assert RULE.default is False and RULE.safety == "safe"
    assert RULE in RULES


def test_the_check_in_deepseeks_and_qwens_words() -> None:
    messages = [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}]
    assert [v.message for v in CHECK.run(messages, {}, {})] == [
        "Failed to deserialize the JSON body into the target type: messages[0].role: unknown "
        "variant `developer`, expected one of `system`, `user`, `assistant`, `tool`"
    ]
    qwen = {"text": QWEN_ROLE_TEXT, "roles": list(QWEN_ROLES)}
    assert [v.message for v in CHECK.run(messages, {}, qwen)] == [
        "developer is not one of ['system', 'assistant', 'user', 'tool', 'function']"
    ]
    # DeepSeek knows no `function` role (docs/providers.md#deepseek-roles,
    # crazyyanchao/llmcompiler#1); Qwen does.
    legacy = [{"role": "function", "name": "f", "content": "r"}]
    assert [v.index for v in CHECK.run(legacy, {}, {})] == [0]
    assert CHECK.run(legacy, {}, qwen) == []
    # A missing or non-string role is another deserialization error, not this one.
    assert CHECK.run([{"content": "x"}, {"role": 3}, None], {}, {}) == []


def test_nothing_but_the_role_changes() -> None:
    message = {"role": "developer", "content": [{"type": "text", "text": "t"}], "x": 1}
    out = apply([message], RULE.context()).messages
    assert out == [{"role": "system", "content": [{"type": "text", "text": "t"}], "x": 1}]
    assert out[0]["content"] is message["content"]
    assert list(out[0]) == list(message)  # key order kept: same bytes for the cache


@pytest.mark.slow
@settings(deadline=None)
@given(shaped_messages())
def test_arbitrary_input(messages: list[Any]) -> None:
    ctx = RULE.context()
    snapshot = copy.deepcopy(messages)
    before = CHECK.run(messages, {}, {})
    outcome = apply(messages, ctx)
    assert messages == snapshot
    again = apply(outcome.messages, ctx)
    assert again.changes == () and again.messages is outcome.messages
    after = CHECK.run(outcome.messages, {}, {})
    # Every developer rejection is gone; every other rejection is still there, in place.
    assert all("`developer`" not in v.message for v in after)
    assert after == [v for v in before if "`developer`" not in v.message]
    assert len(outcome.messages) == len(messages)
    assert len(outcome.changes) == len(before) - len(after)


@pytest.mark.slow
@settings(max_examples=examples(0.5), deadline=None)
@given(broken_transcripts())
def test_after_the_pipeline_no_developer_is_left(broken: Any) -> None:
    messages = [{"role": "developer", "content": "rules"}, *broken.messages]
    result = sanitize_messages(messages, {NAME: True})
    assert CHECK.run(result.messages, {}, {}) == []
    assert result.failures == ()
