"""tool-user-bridge beyond the fixtures: the option, what is and is not bridged, robustness."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings

from rules.chat import RULES_BY_NAME
from rules.chat.tool_user_bridge import DEFAULT_CONTENT, NAME, RULE, apply
from rules.engine.base import RuleContext, TextOption
from rules.providers.contract import CHECKS_BY_CODE
from tests.builders import msg, result, turn
from tests.strategies import arbitrary_messages, clean_transcripts
from tests.work import assert_linear

BRIDGE = {"role": "assistant", "content": DEFAULT_CONTENT}


def order_errors(messages: list[Any]) -> list[Any]:
    return CHECKS_BY_CODE["unexpected_role_order"].run(messages, {"messages": messages}, {})


def test_rule_record_and_option() -> None:
    assert RULE.name == NAME == "tool-user-bridge"
    assert RULE.default is False and RULE.safety == "unsafe"
    assert RULES_BY_NAME[NAME] is RULE
    (option,) = RULE.options
    assert isinstance(option, TextOption)
    assert (option.name, option.default) == ("content", DEFAULT_CONTENT)
    assert DEFAULT_CONTENT == "I have processed the tool results."
    assert option.validate("Ok, I understand.") is None
    assert option.validate("") is not None
    assert option.validate("  \n") is not None
    assert option.validate(None) is not None
    assert option.validate(3) is not None


def test_an_empty_content_given_through_the_library_falls_back_to_the_default() -> None:
    messages = [msg("user"), turn("c1"), result("c1"), msg("user")]
    for bad in ("", " ", None, 5):
        out = apply(messages, RuleContext(options={"content": bad})).messages
        assert out[3] == BRIDGE


def test_a_bare_context_bridges_with_new_objects_and_shares_the_rest() -> None:
    messages = [
        msg("user"),
        turn("c1"),
        result("c1"),
        msg("user"),
        turn("c1"),
        result("c1"),
        msg("user"),
    ]
    out = apply(messages, RuleContext()).messages
    assert out == [*messages[:3], BRIDGE, *messages[3:6], BRIDGE, messages[6]]
    assert out[3] is not out[7]
    assert all(any(m is o for o in out) for m in messages)


def test_only_a_user_after_a_tool_is_bridged() -> None:
    # system after a tool: no bridge helps (system may only follow system or user)
    for role in ("assistant", "tool", "system", "developer", "function", None, 3):
        messages = [msg("user"), turn("c1"), result("c1"), msg(role)]
        assert apply(messages, RuleContext()).messages is messages
    # junk between them, or a tool role that is not the string "tool", is not a tool message
    junk: list[list[Any]] = [
        [msg("user"), turn("c1"), result("c1"), None, msg("user")],
        [msg("user"), turn("c1"), msg(["tool"]), msg("user")],
        ["tool", msg("user")],
    ]
    for entries in junk:
        assert apply(entries, RuleContext()).messages is entries


def test_an_orphan_tool_first_in_the_request_is_bridged_too() -> None:
    """Position 0 is no exception: the orphan is orphan-tool-results' (which runs earlier)."""
    messages = [result("c1"), msg("user")]
    out = apply(messages, RuleContext())
    assert out.messages == [result("c1"), BRIDGE, msg("user")]
    assert [c.as_dict() for c in out.changes] == [
        {
            "rule": NAME,
            "index": 1,
            "action": "inserted_message",
            "role": "assistant",
            "after": "tool",
            "before": "user",
        }
    ]


def test_tool_then_user_is_what_the_order_check_reports_and_the_bridge_clears() -> None:
    messages = [msg("user"), turn("c1"), result("c1"), msg("user")]
    (violation,) = order_errors(messages)
    assert (violation.index, violation.message) == (3, "Unexpected role 'user' after role 'tool'")
    assert order_errors(apply(messages, RuleContext()).messages) == []


def gaps(n: int) -> list[Any]:
    """``n`` times a user, a call and its result, then a user: ``n`` tool -> user gaps."""
    messages: list[Any] = []
    for i in range(n):
        messages += [msg("user"), turn("c1"), result(f"c{i}")]
    return [*messages, msg("user")]


def test_a_thousand_gaps_are_linear() -> None:
    messages = gaps(1000)
    out = apply(messages, RuleContext())
    assert len(out.messages) == len(messages) + 1000
    assert len(out.changes) == 1000
    assert_linear(gaps, lambda messages: apply(messages, RuleContext()), 250)


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages())
def test_any_input_never_raises_never_mutates_and_is_idempotent(messages: list[Any]) -> None:
    snapshot = copy.deepcopy(messages)
    out = apply(messages, RuleContext())
    assert messages == snapshot
    again = apply(out.messages, RuleContext())
    assert again.messages is out.messages and again.changes == ()
    assert (out.messages is messages) == (out.changes == ())
    # after the bridge no user message follows a tool message
    for before, after in zip(out.messages, out.messages[1:], strict=False):
        if isinstance(before, dict) and before.get("role") == "tool" and isinstance(after, dict):
            assert after.get("role") != "user"


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts())
def test_a_clean_transcript_is_only_bridged(messages: list[Any]) -> None:
    out = apply(messages, RuleContext()).messages
    assert [m for m in out if m is not BRIDGE and m != BRIDGE] == messages
    assert order_errors(out) == []
