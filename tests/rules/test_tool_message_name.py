"""tool-message-name beyond the fixtures: options, its check, and the three id rules together."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES, sanitize_messages
from rules.chat.tool_message_name import NAME, RULE, apply, call_names
from rules.engine.pipeline import default_steps, run_rules
from rules.providers.contract import CHECKS_BY_CODE, violations
from tests.budget import examples
from tests.builders import call, result, turn
from tests.strategies import arbitrary_messages, broken_transcripts

CHECK = CHECKS_BY_CODE["tool_message_name"]


def test_rule_record() -> None:
    assert RULE.name == NAME == "tool-message-name"
    assert RULE.default is False and RULE.safety == "safe"
    assert RULE in RULES


def test_add_missing_decides_only_for_absent_names() -> None:
    messages = [turn(call("a", "f"), call("b", "g")), result("a"), result("b", name="x")]
    on = apply(messages, RULE.context({"add_missing": True})).messages
    off = apply(messages, RULE.context()).messages
    assert [m.get("name") for m in on[1:]] == ["f", "g"]
    assert off[1] is messages[1] and off[2]["name"] == "g"


def test_the_block_wins_over_an_earlier_call_with_the_same_id() -> None:
    messages = [turn(call("k:0", "old")), result("k:0"), turn(call("k:0", "new")), result("k:0")]
    assert call_names(messages) == [(1, "old", "k:0"), (3, "new", "k:0")]


def test_the_check_in_geminis_words_and_its_missing_option() -> None:
    messages = [
        {"role": "user"},
        turn(call("a", "f"), call("b", "g")),
        result("a"),
        result("b", name="x"),
    ]
    found = CHECK.run(messages, {}, {})
    assert [v.message for v in found] == [
        "* GenerateContentRequest.contents[2].parts[0].function_response.name: "
        "Name cannot be empty.\n",
        "* GenerateContentRequest.contents[3].parts[1].function_response.name: "
        "Name cannot be empty.\n",
    ]
    assert [v.index for v in CHECK.run(messages, {}, {"missing": False})] == [3]
    # no call to derive a name from: a missing name fails whatever the option (pydantic-ai#1879)
    assert [v.index for v in CHECK.run([result("zz")], {}, {"missing": False})] == [0]
    assert CHECK.run([result("zz", name="f")], {}, {}) == []


def _unfixable(messages: list[Any]) -> set[int]:
    """Tool messages the rule cannot name: no call with a usable name (the orphan rules' and
    the missing-name rules' business)."""
    return {index for index, name, _ in call_names(messages) if name is None}


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.booleans())
def test_arbitrary_input(messages: list[Any], add_missing: bool) -> None:
    ctx = RULE.context({"add_missing": add_missing})
    snapshot = copy.deepcopy(messages)
    outcome = apply(messages, ctx)
    assert messages == snapshot
    again = apply(outcome.messages, ctx)
    assert again.changes == () and again.messages is outcome.messages
    left = {v.index for v in CHECK.run(outcome.messages, {}, {"missing": add_missing})}
    assert left <= _unfixable(outcome.messages)
    assert [m for m in outcome.messages if not isinstance(m, dict)] == [
        m for m in messages if not isinstance(m, dict)
    ]


@pytest.mark.slow
@settings(deadline=None)
@given(broken_transcripts(), st.booleans())
def test_after_the_pipeline_no_name_is_missing_or_wrong(broken: Any, add_missing: bool) -> None:
    repaired = sanitize_messages(broken.messages).messages
    out = apply(repaired, RULE.context({"add_missing": add_missing})).messages
    assert CHECK.run(out, {}, {"missing": add_missing}) == []


ALL_THREE: dict[str, Any] = {
    "tool-call-ids": {"enabled": True, "format": "mistral9"},
    "function-names": True,
    "tool-message-name": {"enabled": True, "add_missing": True},
}
CONTRACT: dict[str, dict[str, Any]] = {
    "tool_call_id_format": {},
    "function_name_invalid": {},
    "tool_message_name": {},
}


@pytest.mark.slow
@settings(max_examples=examples(0.5), deadline=None)
@given(broken_transcripts(), st.lists(st.sampled_from(["a.b", "a_b", "bash", "x" * 70])))
def test_the_three_rules_together_satisfy_the_three_checks(broken: Any, names: list[str]) -> None:
    request = {"tools": [{"type": "function", "function": {"name": n}} for n in names]}
    result = run_rules(broken.messages, default_steps(RULES, ALL_THREE), request=request)
    fields = result.request if result.request is not None else request
    assert violations({**fields, "messages": result.messages}, CONTRACT) == []
    assert result.failures == ()
