"""The sequence checks (rules/providers/contract/sequence.py), and the three sequence rules
together:
after them the checks they answer for report nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES, RULES_BY_NAME
from rules.engine.pipeline import default_steps, run_rules
from rules.providers.contract import CHECKS_BY_CODE, DEFAULT_CONTRACT
from rules.providers.contract.sequence import CHECKS
from tests.builders import msg
from tests.rules.sequence_helpers import found
from tests.strategies import arbitrary_messages, clean_transcripts, user_contents

SEQUENCE_RULES = ("system-messages", "consecutive-user-messages", "leading-user-message")
#: The checks the three rules answer for alone, on any input.
REPAIRED = (
    "system_not_first",
    "multiple_system",
    "successive_user",
    "first_not_user",
    "no_user_message",
)
CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
ALTERNATE = "Conversation roles must alternate user/assistant/user/assistant/..."


def steps(names: tuple[str, ...], later: str = "hoist") -> list[Any]:
    out = []
    for name in names:
        rule = RULES_BY_NAME[name]
        out.append((rule, rule.context({"later": later} if name == "system-messages" else {})))
    return out


def test_the_checks_are_registered_and_not_in_the_default_contract() -> None:
    codes = [check.code for check in CHECKS]
    assert codes == [
        "system_not_first",
        "multiple_system",
        "first_not_user",
        "no_user_message",
        "successive_user",
        "roles_not_alternating",
    ]
    assert all(CHECKS_BY_CODE[code] is check for code, check in zip(codes, CHECKS, strict=True))
    assert not set(codes) & set(DEFAULT_CONTRACT)


def test_system_check_texts() -> None:
    messages = [msg("system"), msg("user"), msg("system"), msg("system")]
    assert found("system_not_first", messages) == [
        (2, "System message must be at the beginning."),
        (3, "System message must be at the beginning."),
    ]
    minimax = "invalid params, chat content has invalid message role: system (2013)"
    assert found("multiple_system", messages) == [(2, minimax), (3, minimax)]
    assert found("multiple_system", [msg("user"), msg("system")]) == []


def test_alternation_follows_the_tool_aware_template() -> None:
    ok = [
        msg("system"),
        msg("user"),
        msg("assistant", None, tool_calls=[CALL]),
        msg("tool", tool_call_id="c1"),
        msg("assistant"),
        msg("user"),
    ]
    assert found("roles_not_alternating", ok) == []
    # an opening tool-call turn is skipped by the template, as it skips every call and result
    assert found("roles_not_alternating", ok[2:4] + ok[5:]) == []
    # a second leading system message is inside the loop: not a user where one is due
    assert found("roles_not_alternating", [msg("system"), msg("system"), msg("user")]) == [
        (1, ALTERNATE)
    ]
    # tool -> user: the template sees user, user (the tool-user bridge's case); first break only
    broken = [msg("user"), *ok[2:4], msg("user"), msg("user")]
    assert found("roles_not_alternating", broken) == [(3, ALTERNATE)]
    assert found("roles_not_alternating", [msg("assistant"), msg("user")]) == [(0, ALTERNATE)]
    assert found("roles_not_alternating", [None, msg("user"), 3, msg("assistant")]) == []


@st.composite
def sequence_defects(draw: st.DrawFn) -> list[Any]:
    """A clean transcript with role-order defects: system messages anywhere, user turns split
    in two or more, the opening user turn cut off (a history resumed mid-way)."""
    messages: list[Any] = list(draw(clean_transcripts()))
    if draw(st.booleans()):
        head = 1 if messages[0]["role"] == "system" else 0
        del messages[head]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for i in reversed(draw(st.lists(st.sampled_from(users), unique=True)) if users else []):
        messages.insert(i + 1, msg("user", draw(user_contents)))
    for n in range(draw(st.integers(0, 3))):
        messages.insert(draw(st.integers(0, len(messages))), msg("system", f"note {n}"))
    return messages


@pytest.mark.slow
@settings(deadline=None)
@given(sequence_defects(), st.sampled_from(["hoist", "user"]))
def test_after_the_sequence_rules_only_the_bridge_case_is_left(
    messages: list[Any], later: str
) -> None:
    # The whole pipeline, as a profile runs it: the pairing rules first put back the results a
    # system message was inserted before (a `later: user` message must not split a block).
    toggles: dict[str, Mapping[str, Any] | bool] = dict.fromkeys(SEQUENCE_RULES, True)
    toggles["system-messages"] = {"enabled": True, "later": later}
    result = run_rules(messages, default_steps(RULES, toggles))
    out = result.messages
    assert result.failures == ()
    for code in (*REPAIRED, "successive_assistant"):
        assert found(code, out) == [], code
    # The template's alternation then breaks only where a user follows a tool result directly:
    # tool-user-bridge's repair (an assistant between them), not a sequence rule's.
    for index, _ in found("roles_not_alternating", out):
        assert out[index]["role"] == "user" and out[index - 1]["role"] == "tool", out


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.sampled_from(["hoist", "user"]))
def test_after_the_sequence_rules_junk_passes_their_checks(junk: list[Any], later: str) -> None:
    result = run_rules(junk, steps(SEQUENCE_RULES, later))
    assert result.failures == ()
    for code in REPAIRED:
        if code == "no_user_message" and not junk:
            continue
        assert found(code, result.messages) == [], code
    again = run_rules(result.messages, steps(SEQUENCE_RULES, later))
    assert again.changes == ()
