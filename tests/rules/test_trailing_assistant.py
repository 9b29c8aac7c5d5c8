"""trailing-assistant beyond the fixtures: each action and option, prefix handling, robustness."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES_BY_NAME
from rules.chat.trailing_assistant import (
    ACTIONS,
    DEFAULT_CONTENT,
    NAME,
    RULE,
    apply,
    is_plain_assistant,
)
from rules.engine.base import RuleContext, TextOption
from rules.providers.contract import CHECKS_BY_CODE
from tests.builders import msg
from tests.strategies import arbitrary_messages, clean_transcripts

CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
CONTINUE = {"role": "user", "content": DEFAULT_CONTENT}


def run(messages: list[Any], **options: Any) -> Any:
    return apply(messages, RULE.context(options))


def open_end(messages: list[Any], **options: Any) -> list[tuple[int | None, str]]:
    found = CHECKS_BY_CODE["trailing_assistant"].run(messages, {"messages": messages}, options)
    return [(v.index, v.message) for v in found]


def test_rule_record_and_options() -> None:
    assert RULE.name == NAME == "trailing-assistant"
    assert RULE.default is False and RULE.safety_of("inserted_message") == "unsafe"
    assert RULE.safety_of("removed_message") == "lossy"
    assert RULES_BY_NAME[NAME] is RULE
    action, content, prefix_allowed = RULE.options
    assert (action.name, action.default, action.choices) == ("action", "continue", ACTIONS)
    assert ACTIONS == ("continue", "prefix", "drop")
    assert action.validate("drop") is None and action.validate("keep") is not None
    assert isinstance(content, TextOption)
    assert (content.name, content.default) == ("content", "Continue.")
    assert content.validate("Go on.") is None
    assert content.validate("") is not None and content.validate("\t") is not None
    assert (prefix_allowed.name, prefix_allowed.default) == ("prefix_allowed", True)
    assert prefix_allowed.validate(False) is None and prefix_allowed.validate("no") is not None


def test_what_counts_as_a_plain_assistant() -> None:
    assert is_plain_assistant(msg("assistant"))
    assert is_plain_assistant(msg("assistant", tool_calls=[]))
    assert is_plain_assistant(msg("assistant", tool_calls=None))
    assert is_plain_assistant(msg("assistant", tool_calls={"id": "c1"}))
    assert not is_plain_assistant(msg("assistant", tool_calls=[CALL]))
    assert not is_plain_assistant(msg("assistant", tool_calls=[7]))  # junk calls: pairing's
    assert not is_plain_assistant(msg("user"))
    assert not is_plain_assistant(["assistant"])


@pytest.mark.parametrize("action", ACTIONS)
def test_nothing_to_do_returns_the_list_itself(action: str) -> None:
    for messages in (
        [],
        [msg("user")],
        [msg("user"), msg("assistant", None, tool_calls=[CALL])],
        [msg("user"), msg("assistant", None, tool_calls=[CALL]), msg("tool", tool_call_id="c1")],
        [msg("user"), msg("assistant"), msg("system")],  # Mistral accepts a trailing system
        [msg("user"), msg("assistant"), 5],  # the schema's rejection, not this one
        [msg("user"), msg("assistant", prefix=True)],
    ):
        out = run(messages, action=action)
        assert out.messages is messages and out.changes == ()


def test_an_empty_content_given_through_the_library_falls_back_to_the_default() -> None:
    messages = [msg("user"), msg("assistant")]
    for bad in ("", "  ", None, 0):
        assert apply(messages, RuleContext(options={"content": bad})).messages[-1] == CONTINUE


def test_continue_keeps_every_message_and_shares_them() -> None:
    messages = [msg("user"), msg("assistant"), msg("assistant", [{"type": "text", "text": "y"}])]
    out = run(messages)
    assert out.messages == [*messages, CONTINUE]
    assert all(a is b for a, b in zip(messages, out.messages, strict=False))


def test_prefix_values_other_than_true_are_not_a_prefix_request() -> None:
    for value in (False, None, 1, "true"):
        messages = [msg("user"), msg("assistant", prefix=value)]
        assert run(messages).messages == [*messages, CONTINUE]  # and the key is kept as sent
        (change,) = run(messages, action="prefix").changes
        assert change.action == "set_prefix"
    assert run([msg("user"), msg("assistant")], action="prefix").changes[0].detail == {
        "was": "absent"
    }


def test_without_prefix_completion_a_prefix_assistant_is_repaired_by_every_action() -> None:
    messages = [msg("user"), msg("assistant", prefix=True)]
    assert open_end(messages) == []
    assert open_end(messages, prefix_allowed=False) == [
        (
            1,
            "Expected last role User or Tool (or Assistant with prefix True) for serving but got "
            "assistant",
        )
    ]
    cont = run(messages, prefix_allowed=False)
    assert cont.messages == [msg("user"), msg("assistant"), CONTINUE]
    drop = run(messages, action="drop", prefix_allowed=False)
    assert drop.messages == [msg("user")]
    # under `prefix` the option is moot: the assistant already asks for a prefix completion
    assert run(messages, action="prefix", prefix_allowed=False).messages is messages


def test_a_lone_prefix_assistant_is_no_prefix_request() -> None:
    """mistral-common: 'Conversation must start with a user message or system message'."""
    messages = [msg("assistant", prefix=True)]
    for action in ACTIONS:
        out = run(messages, action=action)
        assert out.messages == [msg("assistant"), CONTINUE]
        assert [c.action for c in out.changes] == ["dropped_fields", "inserted_message"]


def test_drop_stops_at_a_kept_prefix_assistant_and_at_tool_calls() -> None:
    kept = msg("assistant", "a", prefix=True)
    out = run([msg("user"), kept, msg("assistant", "b")], action="drop")
    assert out.messages == [msg("user"), kept]
    calls = msg("assistant", None, tool_calls=[CALL])
    out = run([msg("user"), calls, msg("assistant"), msg("assistant")], action="drop")
    assert out.messages == [msg("user"), calls]
    assert [c.index for c in out.changes] == [2, 3]


def test_drop_logs_length_and_the_text_only_with_log_content() -> None:
    messages = [msg("user"), msg("assistant", "secret", reasoning_content="why")]
    (change,) = run(messages, action="drop").changes
    assert change.as_dict() == {
        "rule": NAME,
        "index": 1,
        "action": "removed_message",
        "reason": "trailing_assistant",
        "content_length": 6,
    }
    ctx = RuleContext(options={"action": "drop"}, log_content=True)
    (change,) = apply(messages, ctx).changes
    assert change.detail["content"] == "secret"
    for content, length in ((None, 0), ([{"type": "text", "text": "ab"}], 29), (7, 1)):
        (change,) = run([msg("user"), msg("assistant", content)], action="drop").changes
        assert change.detail["content_length"] == length


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.sampled_from(ACTIONS), st.booleans())
def test_any_input_never_raises_never_mutates_and_is_idempotent(
    messages: list[Any], action: str, prefix_allowed: bool
) -> None:
    snapshot = copy.deepcopy(messages)
    ctx = RULE.context({"action": action, "prefix_allowed": prefix_allowed})
    out = apply(messages, ctx)
    assert messages == snapshot
    again = apply(out.messages, ctx)
    assert again.messages is out.messages and again.changes == ()
    assert (out.messages is messages) == (out.changes == ())
    assert open_end(out.messages, prefix_allowed=prefix_allowed or action == "prefix") == []
    assert out.messages or not messages  # never empties a request


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts(), st.sampled_from(ACTIONS))
def test_a_clean_transcript_ending_on_an_answer_is_repaired_as_asked(
    messages: list[Any], action: str
) -> None:
    out = run(messages, action=action).messages
    assert open_end(out) == []
    if messages[-1]["role"] != "assistant":
        assert out is messages
    elif action == "continue":
        assert out == [*messages, CONTINUE]
    elif action == "prefix":
        assert out[:-1] == messages[:-1] and out[-1] == {**messages[-1], "prefix": True}
    else:
        assert out == messages[:-1]
