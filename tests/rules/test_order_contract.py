"""Mistral's order contract (rules/providers/contract/order.py), and the rules that answer it:
after the
pipeline with tool-user-bridge, trailing-assistant and system-messages on, the checks report
nothing that those rules or the pairing rules could repair."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.chat.trailing_assistant import ACTIONS
from rules.engine.pipeline import default_steps, run_rules
from rules.providers.contract import CHECKS_BY_CODE, DEFAULT_CONTRACT, violations
from rules.providers.contract.order import CHECKS, NEXT_ROLES
from tests.builders import msg
from tests.strategies import arbitrary_messages, broken_transcripts, clean_transcripts

CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
LAST = (
    "Expected last role User or Tool (or Assistant with prefix True) for serving but got assistant"
)
START = "Conversation must start with a user message or system message"


def found(code: str, messages: list[Any], **overrides: Any) -> list[tuple[int | None, str]]:
    check = CHECKS_BY_CODE[code]
    return [(v.index, v.message) for v in check.run(messages, {"messages": messages}, overrides)]


def test_the_checks_are_registered_and_not_in_the_default_contract() -> None:
    codes = [check.code for check in CHECKS]
    assert codes == ["conversation_start", "trailing_assistant", "unexpected_role_order"]
    assert all(CHECKS_BY_CODE[code] is check for code, check in zip(codes, CHECKS, strict=True))
    assert not set(codes) & set(DEFAULT_CONTRACT)


def test_the_order_table_is_mistral_commons() -> None:
    allowed = {(a, b) for a, nexts in NEXT_ROLES.items() for b in nexts}
    rejected = set(itertools.product(NEXT_ROLES, repeat=2)) - allowed
    assert rejected == {
        ("system", "tool"),
        ("user", "tool"),
        ("assistant", "system"),
        ("tool", "user"),
        ("tool", "system"),
    }
    for previous, role in sorted(rejected):
        assert found("unexpected_role_order", [msg("user"), msg(previous), msg(role)])[-1] == (
            2,
            f"Unexpected role '{role}' after role '{previous}'",
        )


def test_every_break_is_reported_and_unknown_roles_are_passed_over() -> None:
    messages = [
        msg("user"),
        msg("assistant", None, tool_calls=[CALL]),
        msg("tool", tool_call_id="c1"),
        msg("user"),
        msg("developer"),
        msg("tool"),
        7,
        msg("user"),
        msg("tool"),
    ]
    assert found("unexpected_role_order", messages) == [
        (3, "Unexpected role 'user' after role 'tool'"),
        (8, "Unexpected role 'tool' after role 'user'"),
    ]
    assert found("unexpected_role_order", []) == []
    assert found("unexpected_role_order", [msg(None), msg(["tool"]), msg("tool")]) == []


def test_conversation_start_judges_a_one_message_request_only() -> None:
    assert found("conversation_start", [msg("assistant")]) == [(0, START)]
    assert found("conversation_start", [msg("tool", tool_call_id="c1")]) == [(0, START)]
    for alone in ([msg("user")], [msg("system")], [msg("developer")], [5], []):
        assert found("conversation_start", alone) == []
    # two messages: the order table and the last-message rule take over
    assert found("conversation_start", [msg("assistant"), msg("user")]) == []


def test_trailing_assistant_with_prefix_and_its_option() -> None:
    assert found("trailing_assistant", [msg("user"), msg("assistant")]) == [(1, LAST)]
    assert found("trailing_assistant", [msg("assistant")]) == [(0, LAST)]
    prefix = [msg("user"), msg("assistant", prefix=True)]
    assert found("trailing_assistant", prefix) == []
    assert found("trailing_assistant", prefix, prefix_allowed=False) == [(1, LAST)]
    assert found("trailing_assistant", [msg("assistant", prefix=True)]) == [(0, LAST)]
    for fine in (
        [msg("user")],
        [msg("user"), msg("assistant", None, tool_calls=[CALL])],  # unanswered_tool_call's
        [msg("user"), msg("assistant"), msg("system")],  # Mistral serves it
        [msg("user"), msg("assistant"), None],  # a schema rejection
        [],
    ):
        assert found("trailing_assistant", fine) == []


def test_provider_wordings_are_overrides() -> None:
    reasoner = (
        "The last message of deepseek-reasoner must be a user message, or an assistant message "
        "with prefix mode on (refer to https://api-docs.deepseek.com/guides/chat_prefix_completion)."
    )
    llama = "Assistant response prefill is incompatible with enable_thinking."
    messages = [msg("user"), msg("assistant", prefix=True)]
    contract = {"trailing_assistant": {"text": llama, "prefix_allowed": False}}
    (violation,) = violations({"messages": messages}, contract)
    assert (violation.index, violation.message, violation.status) == (1, llama, 400)
    contract = {"trailing_assistant": {"text": reasoner}}
    assert violations({"messages": messages}, contract) == []
    assert violations({"messages": [*messages[:1], msg("assistant")]}, contract)[0].message == (
        reasoner
    )


@pytest.mark.parametrize("later", ["hoist", "user"])
def test_mistrals_reported_shapes_pass_after_the_pipeline(later: str) -> None:
    messages = [
        msg("system"),
        msg("user"),
        msg("assistant", None, tool_calls=[CALL]),
        msg("tool", tool_call_id="c1"),
        msg("system", "reminder"),
        msg("user"),
        msg("assistant", None, tool_calls=[{**CALL, "id": "c2"}]),
        msg("tool", tool_call_id="c2"),
        msg("user"),
        msg("assistant", "partial"),
    ]
    contract: dict[str, dict[str, Any]] = {check.code: {} for check in CHECKS}
    assert len(violations({"messages": messages}, contract)) == 3
    out = pipeline(messages, "continue", later)
    assert violations({"messages": out}, contract) == []


def pipeline(messages: list[Any], action: str, later: str) -> list[Any]:
    settings_: dict[str, Any] = {
        "system-messages": {"enabled": True, "later": later},
        "tool-user-bridge": True,
        "trailing-assistant": {"enabled": True, "action": action},
    }
    return run_rules(messages, default_steps(RULES, settings_)).messages


def assert_order_clean(messages: list[Any], action: str, later: str) -> None:
    out = pipeline(messages, action, later)
    left = [v for check in CHECKS for v in check.run(out, {"messages": out}, {})]
    if left:
        # A lone assistant whose calls the pairing rules could not answer (calls without ids):
        # unanswered_tool_call reports it as well, and no order rule adds results.
        assert [v.code for v in left] == ["conversation_start"], left
        assert CHECKS_BY_CODE["unanswered_tool_call"].run(out, {"messages": out}, {})


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts(), st.sampled_from(ACTIONS), st.sampled_from(["hoist", "user"]))
def test_clean_transcripts_pass_the_order_contract_after_the_pipeline(
    messages: list[Any], action: str, later: str
) -> None:
    assert_order_clean(messages, action, later)


@pytest.mark.slow
@settings(deadline=None)
@given(broken_transcripts(), st.sampled_from(ACTIONS), st.sampled_from(["hoist", "user"]))
def test_broken_transcripts_pass_the_order_contract_after_the_pipeline(
    broken: Any, action: str, later: str
) -> None:
    assert_order_clean(broken.messages, action, later)


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.sampled_from(ACTIONS), st.sampled_from(["hoist", "user"]))
def test_any_input_passes_the_order_contract_after_the_pipeline(
    messages: list[Any], action: str, later: str
) -> None:
    assert_order_clean(messages, action, later)
