"""leading-user-message beyond the fixtures: option, junk, positions, and the contract."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from rules.chat import RULES
from rules.chat.leading_user_message import DEFAULT_CONTENT, NAME, RULE, apply
from tests.builders import msg
from tests.rules.sequence_helpers import found, run_pure
from tests.strategies import arbitrary_messages, clean_transcripts

CTX = RULE.context()
CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}


def test_rule_record() -> None:
    assert RULE.name == NAME == "leading-user-message"
    assert RULE.default is False
    assert RULE.safety == "unsafe"  # a user turn chatmend writes
    assert [(o.name, o.default) for o in RULE.options] == [("content", ".")]
    assert DEFAULT_CONTENT == "."
    assert RULE in RULES


def test_the_placeholder_is_an_option() -> None:
    out = apply([msg("assistant")], RULE.context({"content": "Continue."})).messages
    assert out == [msg("user", "Continue."), msg("assistant")]


def test_every_non_user_opening_role_gets_one() -> None:
    for role in ("assistant", "tool", "function", "model"):
        messages = [msg("system"), msg(role), msg("user")]
        outcome = apply(messages, CTX)
        assert outcome.messages == [msg("system"), msg("user", "."), msg(role), msg("user")]
        before = role if role != "model" else "other"
        assert [c.as_dict() for c in outcome.changes] == [
            {
                "rule": NAME,
                "index": 1,
                "action": "inserted_message",
                "role": "user",
                "before": before,
            }
        ]


def test_developer_counts_as_a_system_message() -> None:
    messages = [msg("developer"), msg("user")]
    assert apply(messages, CTX).messages is messages


def test_a_user_after_junk_and_systems_is_enough() -> None:
    messages = [None, msg("system"), [1], msg(None), msg("user"), msg("assistant")]
    assert apply(messages, CTX).messages is messages


def test_only_junk_gets_a_user_appended() -> None:
    messages: list[Any] = [None, 3, {"content": "no role"}]
    out = apply(messages, CTX).messages
    assert out == [*messages, msg("user", ".")]


def test_the_messages_are_the_clients_own_objects() -> None:
    messages = [msg("system"), msg("assistant", None, tool_calls=[CALL])]
    out = apply(messages, CTX).messages
    assert out[0] is messages[0] and out[2] is messages[1]


def test_check_texts() -> None:
    messages = [msg("system"), msg("assistant"), msg("user")]
    assert found("first_not_user", messages) == [
        (
            1,
            "The first message (except the system message) of deepseek-reasoner must be a user "
            "message, but an assistant message detected.",
        )
    ]
    # Gemini: only a function call turn must follow a user turn
    assert found("first_not_user", messages, tool_calls_only=True) == []
    calls = [msg("assistant", None, tool_calls=[CALL]), msg("tool", tool_call_id="c1")]
    assert found("first_not_user", calls, tool_calls_only=True) == [
        (
            0,
            "The first message (except the system message) of deepseek-reasoner must be a user "
            "message, but an assistant message detected.",
        )
    ]
    assert found("no_user_message", [msg("system")]) == [
        (
            None,
            "<400> InternalError.Algo.InvalidParameter: The input messages do not contain "
            "elements with the role of user",
        )
    ]
    assert found("no_user_message", []) == []
    assert found("first_not_user", [msg("system"), msg("user"), msg("assistant")]) == []


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages())
def test_junk_never_breaks_it_and_the_contract_holds_after(junk: list[Any]) -> None:
    outcome = run_pure(RULE, junk)
    out = outcome.messages
    assert found("first_not_user", out) == []
    assert found("first_not_user", out, tool_calls_only=True) == []
    assert found("no_user_message", out) == []
    # at most one message is added, and everything else stays, in order, as the same objects
    rest = out
    if outcome.changes:
        at = outcome.changes[0].index
        assert out[at] == msg("user", ".")
        rest = [*out[:at], *out[at + 1 :]]
    assert len(rest) == len(junk) and all(a is b for a, b in zip(rest, junk, strict=True))


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts())
def test_a_clean_transcript_opens_with_a_user(clean: list[Any]) -> None:
    assert run_pure(RULE, clean).messages is clean
    # cut off its opening: a history that starts mid-conversation gets a user again
    head = 1 if clean[0]["role"] == "system" else 0
    cut = [*clean[:head], *clean[head + 1 :]]
    out = run_pure(RULE, cut).messages
    assert found("first_not_user", out) == found("no_user_message", out) == []
