"""null-content beyond the fixtures: options, edge cases, and its contract checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.chat.message_fields import ROLES, has_calls
from rules.chat.null_content import NAME, RULE, apply
from rules.providers.contract import CHECKS_BY_CODE
from rules.providers.contract.content import REQUIRED_CONTENT_ROLES
from tests.strategies import arbitrary_messages, clean_transcripts

NULL = CHECKS_BY_CODE["content_null"]
MISSING = CHECKS_BY_CODE["content_missing"]
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

role_lists = st.lists(st.sampled_from(ROLES), unique=True).map(list)


def test_rule_record() -> None:
    assert RULE.name == NAME == "null-content"
    assert RULE.default is False and RULE.safety_of("filled_content") == "safe"
    assert RULE.safety_of("filled_tool_content") == "unsafe"  # "(no output)" is chatmend's
    assert RULE in RULES
    assert {o.name for o in RULE.options} == {"content", "tool_content", "roles"}


def test_never_touches_an_assistant_with_calls() -> None:
    messages: list[Any] = [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "assistant", "tool_calls": [{"id": "c2"}]},
    ]
    assert apply(messages, RULE.context()).messages is messages


def test_assistants_without_usable_calls_are_filled() -> None:
    messages: list[Any] = [
        {"role": "assistant", "content": None},
        {"role": "assistant", "tool_calls": None},
        {"role": "assistant", "content": None, "tool_calls": [None, 3]},
    ]
    out = apply(messages, RULE.context({"content": "-"})).messages
    assert [m["content"] for m in out] == ["-", "-", "-"]


def test_tool_and_other_roles_take_their_own_option() -> None:
    messages: list[Any] = [
        {"role": "developer", "content": None},
        {"role": "tool", "tool_call_id": "c1", "content": None},
    ]
    out = apply(messages, RULE.context({"content": "", "tool_content": ""})).messages
    assert [m["content"] for m in out] == ["", ""]
    out = apply(messages, RULE.context()).messages
    assert [m["content"] for m in out] == ["", "(no output)"]


def test_other_content_is_left() -> None:
    contents: tuple[Any, ...] = ("", " ", [], {}, 0, False, [None])
    for content in contents:
        messages = [{"role": "user", "content": content}]
        assert apply(messages, RULE.context()).messages is messages


def test_the_checks_texts() -> None:
    messages: list[Any] = [
        {"role": "tool", "tool_call_id": "c1", "content": None},
        {"role": "user"},
    ]
    (null,) = NULL.run(messages, {}, {})
    assert null.index == 0
    assert null.message == "Invalid value for 'content': expected a string, got null."
    (missing,) = MISSING.run(messages, {}, {})
    assert missing.message == (
        "Failed to deserialize the JSON body into the target type: messages[1]: missing field "
        "`content`"
    )
    older = "'content' is a required property - 'messages.{index}'"
    assert MISSING.run(messages, {}, {"text": older})[0].message == (
        "'content' is a required property - 'messages.1'"
    )
    # An assistant may omit content (DeepSeek reads it as optional) unless a profile says so.
    bare = [{"role": "assistant", "tool_calls": [CALL]}]
    assert MISSING.run(bare, {}, {}) == []
    assert len(MISSING.run(bare, {}, {"roles": ["assistant"]})) == 1
    # null next to calls is what OpenAI defines; without calls it is rejected.
    assert NULL.run([{"role": "assistant", "content": None, "tool_calls": [CALL]}], {}, {}) == []
    assert len(NULL.run([{"role": "assistant", "content": None}], {}, {})) == 1


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), role_lists)
def test_junk_pure_idempotent_and_no_null_or_missing_content_left(
    junk: list[Any], roles: list[str]
) -> None:
    snapshot = copy.deepcopy(junk)
    ctx = RULE.context({"roles": roles})
    outcome = apply(junk, ctx)
    assert junk == snapshot
    again = apply(outcome.messages, ctx)
    assert again.changes == () and again.messages is outcome.messages
    assert NULL.run(outcome.messages, {}, {"roles": roles}) == []
    required = [r for r in roles if r in REQUIRED_CONTENT_ROLES]
    assert MISSING.run(outcome.messages, {}, {"roles": required}) == []
    for before, after in zip(junk, outcome.messages, strict=True):
        if after is not before:  # only the content changed, and only on a message it may fill
            assert {k: v for k, v in after.items() if k != "content"} == {
                k: v for k, v in before.items() if k != "content"
            }
            assert before.get("content") is None and isinstance(after["content"], str)
            assert not (before["role"] == "assistant" and has_calls(before))


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts())
def test_clean_transcripts_are_left_alone(clean: list[Any]) -> None:
    # Clean agent loops carry null only next to tool calls.
    outcome = apply(clean, RULE.context())
    assert outcome.messages is clean and outcome.changes == ()
