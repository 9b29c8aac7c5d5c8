"""image-parts beyond the fixtures: options, its two checks, relocation around tool blocks, and
hypothesis over junk (after the rule, the matching check finds nothing)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES, sanitize_messages
from rules.chat.image_parts import NAME, RULE, apply
from rules.providers.contract import CHECKS_BY_CODE, violations
from tests.budget import examples
from tests.rules.shape_helpers import shaped_messages
from tests.strategies import broken_transcripts, clean_transcripts

UNSUPPORTED = CHECKS_BY_CODE["image_unsupported"]
NOT_USER = CHECKS_BY_CODE["image_not_user"]
IMAGE = {"type": "image_url", "image_url": {"url": "https://x/1.png"}}


def test_rule_record() -> None:
    assert RULE.name == NAME == "image-parts"
    assert RULE.default is False
    assert RULE in RULES
    for option in RULE.options:
        assert option.validate(option.default) is None


def test_the_checks_in_deepseeks_and_openais_words() -> None:
    messages = [
        {"role": "user", "content": [IMAGE]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "t"}, IMAGE]},
    ]
    assert [v.message for v in UNSUPPORTED.run(messages, {}, {})] == [
        "Failed to deserialize the JSON body into the target type: messages[0]: data did not "
        "match any variant of untagged enum ChatCompletionRequestContent",
        "Failed to deserialize the JSON body into the target type: messages[2]: data did not "
        "match any variant of untagged enum ChatCompletionRequestContent",
    ]
    assert [v.message for v in NOT_USER.run(messages, {}, {})] == [
        "Invalid 'messages[2]'. Image URLs are only allowed for messages with role 'user', but "
        "this message with role 'tool' contains an image URL."
    ]
    other = [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]
    assert UNSUPPORTED.run(other, {}, {}) == []
    assert [v.index for v in UNSUPPORTED.run(other, {}, {"types": ["input_image"]})] == [0]


def test_strip_placeholder_and_types() -> None:
    messages = [{"role": "user", "content": [IMAGE, {"type": "input_image", "image_url": "u"}]}]
    out = apply(messages, RULE.context({"placeholder": "[no vision]"})).messages
    assert out[0]["content"] == [{"type": "text", "text": "[no vision]"}, messages[0]["content"][1]]
    both = RULE.context({"types": ["image_url", "input_image"]})
    assert [p["type"] for p in apply(messages, both).messages[0]["content"]] == ["text", "text"]
    # "text" is never an image type: the placeholders would be replaced again
    assert apply(messages, RULE.context({"types": ["text"]})).messages is messages


def test_relocation_never_splits_a_tool_block() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [call, {**call, "id": "d"}]},
        {"role": "tool", "tool_call_id": "c", "content": [IMAGE]},
        {"role": "tool", "tool_call_id": "d", "content": "ok"},
    ]
    out = apply(messages, RULE.context({"action": "relocate"})).messages
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert out[4]["content"][1] is IMAGE or out[4]["content"][1] == IMAGE
    assert violations({"messages": out}, {"unanswered_tool_call": {}, "image_not_user": {}}) == []


@pytest.mark.slow
@settings(deadline=None)
@given(shaped_messages(), st.sampled_from(["strip", "relocate"]))
def test_arbitrary_input(messages: list[Any], action: str) -> None:
    ctx = RULE.context({"action": action})
    snapshot = copy.deepcopy(messages)
    outcome = apply(messages, ctx)
    assert messages == snapshot
    again = apply(outcome.messages, ctx)
    assert again.changes == () and again.messages is outcome.messages
    check = UNSUPPORTED if action == "strip" else NOT_USER
    assert check.run(outcome.messages, {}, {}) == []
    touched = [c for c in outcome.changes if c.action in ("replaced_images", "moved_images")]
    assert [c.index for c in touched] == [v.index for v in check.run(messages, {}, {})]
    if action == "strip":
        assert len(outcome.messages) == len(messages)
        return
    # Nothing lost: every image is still there, in order; only user messages were added, and
    # never right before a tool message (a call's results stay right after it).
    assert _images(outcome.messages) == _images(messages)
    inserted = [c.index for c in outcome.changes if c.action == "inserted_message"]
    assert len(outcome.messages) == len(messages) + len(inserted)
    originals = [m for m in outcome.messages if any(m is o for o in messages)]
    assert len(originals) == len(messages) - len(touched)
    for k, at in enumerate(inserted):
        position = at + k
        assert outcome.messages[position]["role"] == "user"
        following = outcome.messages[position + 1 : position + 2]
        assert not (
            following and isinstance(following[0], dict) and following[0].get("role") == "tool"
        )


def _images(messages: list[Any]) -> list[Any]:
    return [
        part
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, dict) and part.get("type") == "image_url"
    ]


@settings(max_examples=examples(0.5), deadline=None)
@given(clean_transcripts())
def test_relocate_passes_clean_transcripts(messages: list[Any]) -> None:
    outcome = apply(messages, RULE.context({"action": "relocate"}))
    assert outcome.messages is messages and outcome.changes == ()


@pytest.mark.slow
@settings(max_examples=examples(0.5), deadline=None)
@given(broken_transcripts(), st.sampled_from(["strip", "relocate"]))
def test_after_the_pipeline_no_image_is_rejected(broken: Any, action: str) -> None:
    messages = copy.deepcopy(broken.messages)
    for message in messages:  # screenshots in tool results and an assistant's generated image
        if message.get("role") in ("tool", "assistant") and isinstance(message.get("content"), str):
            message["content"] = [{"type": "text", "text": message["content"]}, dict(IMAGE)]
    result = sanitize_messages(messages, {NAME: {"enabled": True, "action": action}})
    code = "image_unsupported" if action == "strip" else "image_not_user"
    contract: dict[str, dict[str, Any]] = {
        code: {},
        "unanswered_tool_call": {},
        "orphan_tool_result": {},
    }
    assert violations({"messages": result.messages}, contract) == []
    assert result.failures == ()
