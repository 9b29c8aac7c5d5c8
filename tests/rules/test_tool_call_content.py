"""tool-call-content beyond the fixtures, and the three content rules together per provider."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.chat.message_fields import has_calls, has_content
from rules.chat.text_part_arrays import collapsible
from rules.chat.tool_call_content import KINDS, NAME, RULE, SHAPES, apply
from rules.engine.pipeline import default_steps, run_rules
from rules.providers.contract import CHECKS_BY_CODE, violations
from tests.strategies import arbitrary_messages, clean_transcripts

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
CONTENT_RULES = ("text-part-arrays", "null-content", "tool-call-content")
#: Per shape: the checks the three rules together must leave empty (``roles`` default).
CLEARS = {
    # DeepSeek / OpenAI: strings everywhere, null only next to calls.
    "null": ("content_null", "content_missing"),
    # xAI: every message has a content element.
    "empty": ("no_content_element", "content_null", "content_missing"),
    # Kimi: no empty content key next to calls.
    "omit": ("tool_call_content_empty", "content_null"),
}


def steps(shape: str) -> Any:
    rules = [r for r in RULES if r.name in CONTENT_RULES]
    return default_steps(
        rules,
        {
            "text-part-arrays": True,
            "null-content": True,
            "tool-call-content": {"enabled": True, "shape": shape},
        },
    )


def with_calls(content: Any = None, *, absent: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "tool_calls": [CALL]}
    if not absent:
        message["content"] = content
    return message


def test_rule_record() -> None:
    assert RULE.name == NAME == "tool-call-content"
    assert RULE.default is False and RULE.safety == "safe"
    assert RULE in RULES
    shape, kinds = RULE.options
    assert shape.choices == SHAPES and shape.default == "null"
    assert shape.validate("omit") is None and shape.validate("none") is not None
    assert kinds.default == list(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_only_the_kinds_named_are_rewritten(kind: str) -> None:
    """A profile names the empty shapes its provider refuses: every other one stays as sent."""
    by_kind = {
        "absent": with_calls(absent=True),
        "null": with_calls(None),
        "empty_string": with_calls(""),
        "empty_list": with_calls([]),
        "empty_parts": with_calls([{"type": "text", "text": ""}]),
    }
    messages = list(by_kind.values())
    ctx = RULE.context({"shape": "omit", "kinds": [kind]})
    outcome = apply(messages, ctx)
    changed = [
        i for i, (a, b) in enumerate(zip(messages, outcome.messages, strict=True)) if a is not b
    ]
    expected = [] if kind == "absent" else [list(by_kind).index(kind)]
    assert changed == expected
    assert [c.detail["was"] for c in outcome.changes] == [kind] * len(expected)


@pytest.mark.parametrize("shape", SHAPES)
def test_non_empty_content_is_never_touched(shape: str) -> None:
    image = {"type": "image_url", "image_url": {"url": "x"}}
    contents: tuple[Any, ...] = (" ", "x", [{"type": "text", "text": "x"}], [image], {}, 0, False)
    for content in contents:
        messages = [with_calls(content)]
        assert apply(messages, RULE.context({"shape": shape})).messages is messages


@pytest.mark.parametrize("shape", SHAPES)
def test_every_empty_shape_ends_in_the_asked_one(shape: str) -> None:
    empties = [with_calls(c) for c in (None, "", [], [{"type": "text", "text": ""}])]
    messages = [*empties, with_calls(absent=True)]
    out = apply(messages, RULE.context({"shape": shape})).messages
    for message in out:
        if shape == "omit":
            assert "content" not in message
        else:
            assert message["content"] == (None if shape == "null" else "")
            assert type(message["content"]) is (type(None) if shape == "null" else str)
    assert all(m["tool_calls"] == [CALL] for m in out)


def test_an_unknown_shape_changes_nothing() -> None:
    messages = [with_calls("")]
    assert apply(messages, RULE.context({"shape": "nothing"})).messages is messages


def test_has_calls() -> None:
    assert has_calls(with_calls())
    assert not has_calls({"tool_calls": []})
    assert not has_calls({"tool_calls": [None, "x"]})
    assert has_calls({"tool_calls": [None, {}]})
    assert not has_calls({"tool_calls": {"id": "x"}})


def test_the_checks_texts() -> None:
    (kimi,) = CHECKS_BY_CODE["tool_call_content_empty"].run([with_calls("")], {}, {})
    assert kimi.message == "text content is empty"
    (xai,) = CHECKS_BY_CODE["no_content_element"].run([with_calls(absent=True)], {}, {})
    assert xai.message == (
        '{"code":"Client specified an invalid argument","error":"Invalid request content: Each '
        'message must have at least one content element."}'
    )
    assert CHECKS_BY_CODE["no_content_element"].run([with_calls("")], {}, {}) == []
    # Kimi keeps a preamble; null and [] are empty too.
    assert CHECKS_BY_CODE["tool_call_content_empty"].run([with_calls("Looking.")], {}, {}) == []
    assert len(CHECKS_BY_CODE["tool_call_content_empty"].run([with_calls([])], {}, {})) == 1


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.sampled_from(SHAPES))
def test_junk_each_shape_pure_idempotent_and_clears_its_check(junk: list[Any], shape: str) -> None:
    snapshot = copy.deepcopy(junk)
    ctx = RULE.context({"shape": shape})
    outcome = apply(junk, ctx)
    assert junk == snapshot
    again = apply(outcome.messages, ctx)
    assert again.changes == () and again.messages is outcome.messages
    for index, message in enumerate(outcome.messages):
        if not (isinstance(message, dict) and message.get("role") == "assistant"):
            continue
        if not has_calls(message) or has_content(message):
            assert message is junk[index]  # only empty content next to calls is rewritten
        elif shape == "omit":
            assert "content" not in message
        else:
            assert message["content"] == (None if shape == "null" else "")
    if shape == "omit":
        check = CHECKS_BY_CODE["tool_call_content_empty"]
        assert check.run(outcome.messages, {}, {}) == []


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.sampled_from(SHAPES))
def test_the_three_rules_together_clear_each_providers_checks(junk: list[Any], shape: str) -> None:
    codes = CLEARS[shape]
    result = run_rules(junk, steps(shape), private=False)
    assert result.failures == ()
    payload = {"messages": result.messages}
    assert violations(payload, {code: {} for code in codes}) == [], shape
    # Lists and objects left are those holding something other than text parts.
    for found in violations(payload, {"content_not_string": {}, "content_object": {}}):
        assert found.index is not None
        assert not collapsible(result.messages[found.index]["content"])


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts(), st.sampled_from(SHAPES))
def test_clean_transcripts_take_each_shape(clean: list[Any], shape: str) -> None:
    codes = CLEARS[shape]
    result = run_rules(clean, steps(shape), private=False)
    assert violations({"messages": result.messages}, {code: {} for code in codes}) == []
    assert len(result.messages) == len(clean)  # no message removed or added
