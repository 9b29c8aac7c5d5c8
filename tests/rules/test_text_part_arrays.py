"""text-part-arrays beyond the fixtures: options, edge cases, and its contract checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.chat.message_fields import ROLES
from rules.chat.text_part_arrays import NAME, RULE, apply, collapsible, text_of
from rules.providers.contract import CHECKS_BY_CODE, violations
from tests.strategies import arbitrary_messages, clean_transcripts

NOT_STRING = CHECKS_BY_CODE["content_not_string"]
OBJECT = CHECKS_BY_CODE["content_object"]
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

role_lists = st.lists(st.sampled_from(ROLES), unique=True).map(list)


def parts(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t} for t in texts]


def test_rule_record() -> None:
    assert RULE.name == NAME == "text-part-arrays"
    assert RULE.default is False and RULE.safety == "safe"
    assert RULE in RULES


def test_separator_joins_the_texts() -> None:
    messages = [{"role": "user", "content": parts("a", "b", "c")}]
    assert apply(messages, RULE.context()).messages[0]["content"] == "abc"
    out = apply(messages, RULE.context({"separator": "\n\n"})).messages
    assert out[0]["content"] == "a\n\nb\n\nc"


def test_empty_texts_and_whitespace_are_kept_in_place() -> None:
    messages = [{"role": "tool", "tool_call_id": "c1", "content": parts("", " x ", "")}]
    outcome = apply(messages, RULE.context({"separator": "|"}))
    assert outcome.messages[0]["content"] == "| x |"


def test_only_the_content_changes_and_other_keys_stay() -> None:
    message = {"role": "user", "name": "bob", "content": parts("hi"), "x_meta": {"a": 1}}
    out = apply([message], RULE.context()).messages[0]
    assert out == {"role": "user", "name": "bob", "content": "hi", "x_meta": {"a": 1}}
    assert out["x_meta"] is message["x_meta"]  # copy-on-write: untouched values are shared


def test_empty_list_by_role_and_calls() -> None:
    messages: list[Any] = [
        {"role": "assistant", "content": [], "tool_calls": [CALL]},
        {"role": "assistant", "content": [], "tool_calls": []},
        {"role": "assistant", "content": [], "tool_calls": [None]},
        {"role": "assistant", "content": []},
        {"role": "system", "content": []},
    ]
    out = apply(messages, RULE.context()).messages
    assert [m["content"] for m in out] == [None, "", "", "", ""]


def test_roles_limit_the_rule() -> None:
    messages = [
        {"role": "system", "content": parts("s")},
        {"role": "user", "content": parts("u")},
        {"role": "developer", "content": parts("d")},
    ]
    out = apply(messages, RULE.context({"roles": ["user"]})).messages
    assert [m["content"] for m in out] == [parts("s"), "u", parts("d")]
    assert apply(messages, RULE.context({"roles": []})).messages is messages
    assert apply(messages, RULE.context({"roles": "user"})).messages is messages  # junk option


def test_any_other_part_keeps_the_list() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:x"}}
    for content in (
        [*parts("a"), image],
        [{"type": "input_text", "text": "a"}],
        [{"type": "text", "text": 1}],
        [{"type": "text"}],
        ["a"],
        [None],
        {"type": "text"},
        {"text": "a"},
    ):
        messages = [{"role": "user", "content": content}]
        assert apply(messages, RULE.context()).messages is messages, content
        assert not collapsible(content)


def test_text_of() -> None:
    assert text_of({"type": "text", "text": ""}) == ""
    assert text_of({"type": "text", "text": None}) is None
    assert text_of("text") is None


def test_the_checks_texts() -> None:
    messages = [{"role": "system", "content": [image_part(), *parts("x")]}]
    (found,) = NOT_STRING.run(messages, {}, {})
    assert found.message == (
        "Failed to deserialize the JSON body into the target type: messages[0]: invalid type: "
        "sequence, expected a string"
    )
    # GLM names the part with the text field; Groq is checked on system messages only.
    glm = "message[{index}].content[{position}] has invalid field(s): text"
    assert NOT_STRING.run(messages, {}, {"text": glm})[0].message == (
        "message[0].content[1] has invalid field(s): text"
    )
    assert NOT_STRING.run(messages, {}, {"roles": ["user"]}) == []
    (obj,) = OBJECT.run([{"role": "user", "content": {"type": "text", "text": "x"}}], {}, {})
    assert obj.message.startswith("Invalid type for 'messages.[0].content'")


def image_part() -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "image_url" for p in content
    )


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), role_lists, st.sampled_from(["", "\n", " "]))
def test_junk_pure_idempotent_and_leaves_only_lists_it_may_not_collapse(
    junk: list[Any], roles: list[str], separator: str
) -> None:
    snapshot = copy.deepcopy(junk)
    ctx = RULE.context({"roles": roles, "separator": separator})
    outcome = apply(junk, ctx)
    assert junk == snapshot
    again = apply(outcome.messages, ctx)
    assert again.changes == () and again.messages is outcome.messages
    assert len(outcome.messages) == len(junk)
    assert len({c.index for c in outcome.changes}) == len(outcome.changes)
    # The checks, on the same roles, report only what the rule leaves by design: a list or an
    # object holding something other than text parts.
    for check in (NOT_STRING, OBJECT):
        for found in check.run(outcome.messages, {}, {"roles": roles}):
            assert found.index is not None
            assert not collapsible(outcome.messages[found.index]["content"])
    if not outcome.changes:
        assert outcome.messages is junk


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts())
def test_clean_transcripts_keep_only_image_lists_and_lose_no_text(clean: list[Any]) -> None:
    outcome = apply(clean, RULE.context())
    remaining = violations({"messages": outcome.messages}, {"content_not_string": {}})
    for found in remaining:
        assert found.index is not None
        assert has_image(outcome.messages[found.index]["content"])
    for before, after in zip(clean, outcome.messages, strict=True):
        content = before.get("content")
        if isinstance(content, list) and not has_image(content):
            assert after["content"] == "".join(p["text"] for p in content)
        elif "content" in before:
            assert after["content"] is content
