"""unknown-message-fields beyond the fixtures: options, its check in four providers' words, and
hypothesis over junk (the check, written apart from the rule, finds nothing after it)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES, sanitize_messages
from rules.chat.unknown_message_fields import NAME, RULE, apply
from rules.providers.contract import CHECKS_BY_CODE
from rules.providers.contract.fields import (
    AZURE_FIELD_TEXT,
    CEREBRAS_FIELD_TEXT,
    MISTRAL_FIELD_TEXT,
)
from tests.budget import examples
from tests.rules.shape_helpers import KEYS, shaped_messages
from tests.strategies import broken_transcripts, clean_transcripts

CHECK = CHECKS_BY_CODE["unknown_field"]


def test_rule_record() -> None:
    assert RULE.name == NAME == "unknown-message-fields"
    assert RULE.default is False and RULE.safety == "unsafe"
    assert RULE in RULES
    assert {o.name for o in RULE.options} == {"allow", "deny", "drop_null"}
    for option in RULE.options:
        assert option.validate(option.default) is None


MESSAGES: list[Any] = [
    {"role": "user", "content": "u", "timestamp": 1},
    {
        "role": "assistant",
        "content": "a",
        "refusal": None,
        "parsed": {},
        "tool_calls": [{"id": "c", "type": "function", "index": 0, "function": {"name": "f"}}],
    },
]


def test_the_check_in_groqs_words_and_the_others() -> None:
    assert [v.message for v in CHECK.run(MESSAGES, {}, {})] == [
        "'messages.0' : for 'role:user' the following must be satisfied[('messages.0' : property "
        "'timestamp' is unsupported)]",
        "'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : "
        "property 'refusal' is unsupported)]",
    ]
    azure = [v.message for v in CHECK.run(MESSAGES, {}, {"text": AZURE_FIELD_TEXT})]
    assert azure == [
        "Additional properties are not allowed ('timestamp' was unexpected) - 'messages.0'",
        "Additional properties are not allowed ('refusal', 'parsed', 'tool_calls.0.index' were "
        "unexpected) - 'messages.1'",
    ]
    mistral = CHECK.run(MESSAGES[1:], {}, {"text": MISTRAL_FIELD_TEXT, "status": 422})
    assert [(v.status, v.message) for v in mistral] == [
        (
            422,
            '{"type":"extra_forbidden","loc":["body","messages",0,"assistant","refusal"],'
            '"msg":"Extra inputs are not permitted"}',
        )
    ]
    cerebras = CHECK.run(MESSAGES[:1], {}, {"text": CEREBRAS_FIELD_TEXT})
    assert [v.message for v in cerebras] == [
        "messages.0.user.timestamp: property 'messages.0.user.timestamp' is unsupported"
    ]


def test_the_check_takes_the_rules_options() -> None:
    messages = [{"role": "assistant", "content": "a", "reasoning_content": "r", "name": None}]
    assert [v.index for v in CHECK.run(messages, {}, {})] == [0]
    assert CHECK.run(messages, {}, {"allow": ["reasoning_content"], "drop_null": False}) == []
    tool = [{"role": "tool", "tool_call_id": "c", "content": "r", "name": "f"}]
    assert CHECK.run(tool, {}, {}) == []
    assert [v.index for v in CHECK.run(tool, {}, {"deny": ["name"]})] == [0]
    # role, content and tool_call_id cannot be denied
    assert CHECK.run(tool, {}, {"deny": ["role", "content", "tool_call_id"]}) == []


def test_allow_reaches_calls_and_functions() -> None:
    call = {"id": "c", "type": "function", "extra_content": {}, "function": {"name": "f", "x": 1}}
    messages = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    kept = apply(messages, RULE.context({"allow": ["extra_content", "x"]}))
    assert kept.messages is messages and kept.changes == ()
    out = apply(messages, RULE.context()).messages
    assert out[0]["tool_calls"][0] == {"id": "c", "type": "function", "function": {"name": "f"}}
    assert call == {
        "id": "c",
        "type": "function",
        "extra_content": {},
        "function": {"name": "f", "x": 1},
    }


def test_only_what_changes_is_copied() -> None:
    clean = {"id": "d", "type": "function", "function": {"name": "g", "arguments": "{}"}}
    dirty = {"id": "c", "type": "function", "index": 1, "function": clean["function"]}
    messages = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "tool_calls": [clean, dirty]},
    ]
    out = apply(messages, RULE.context()).messages
    assert out[0] is messages[0]
    assert out[1]["tool_calls"][0] is clean
    assert out[1]["tool_calls"][1]["function"] is clean["function"]


def test_odd_option_values_are_tolerated() -> None:
    messages = [{"role": "user", "content": "u", "timestamp": 1}]
    for options in ({"allow": "timestamp"}, {"allow": None}, {"deny": 3}, {"allow": [1, None]}):
        assert apply(messages, RULE.context(options)).messages == [{"role": "user", "content": "u"}]


OPTIONS = st.fixed_dictionaries(
    {
        "allow": st.lists(st.sampled_from([*KEYS, "index", "extra_content", "parsed"]), max_size=3),
        "deny": st.lists(st.sampled_from(["name", "prefix", "content", "tool_calls"]), max_size=2),
        "drop_null": st.booleans(),
    }
)


@pytest.mark.slow
@settings(deadline=None)
@given(shaped_messages(), OPTIONS)
def test_arbitrary_input(messages: list[Any], options: dict[str, Any]) -> None:
    ctx = RULE.context(options)
    snapshot = copy.deepcopy(messages)
    outcome = apply(messages, ctx)
    assert messages == snapshot
    again = apply(outcome.messages, ctx)
    assert again.changes == () and again.messages is outcome.messages
    assert CHECK.run(outcome.messages, {}, options) == []
    # One change per message the check rejected; nothing removed, no value but keys touched.
    assert [c.index for c in outcome.changes] == [v.index for v in CHECK.run(messages, {}, options)]
    assert len(outcome.messages) == len(messages)
    for old, new in zip(messages, outcome.messages, strict=True):
        if isinstance(old, dict):
            assert set(new) <= set(old)
            assert all(new[k] == old[k] for k in new if k != "tool_calls")


@pytest.mark.slow
@settings(max_examples=examples(0.5), deadline=None)
@given(clean_transcripts())
def test_clean_transcripts_pass_when_reasoning_is_allowed(messages: list[Any]) -> None:
    outcome = apply(messages, RULE.context({"allow": ["reasoning_content"]}))
    assert outcome.messages is messages and outcome.changes == ()


@pytest.mark.slow
@settings(max_examples=examples(0.5), deadline=None)
@given(broken_transcripts(), st.booleans())
def test_after_the_pipeline_no_unknown_field_is_left(broken: Any, drop_null: bool) -> None:
    options = {"enabled": True, "drop_null": drop_null}
    result = sanitize_messages(broken.messages, {NAME: options})
    assert CHECK.run(result.messages, {}, {"drop_null": drop_null}) == []
    assert result.failures == ()
