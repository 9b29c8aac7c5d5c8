"""messages-unsigned-thinking in the `anthropic` plan, beside the rules it meets: empty messages
and the merge (a turn of unsigned thinking only), thinking order (never moves a block that is
going), the tool loop's thinking (a loop whose only thinking was unsigned runs with thinking
off), and the placeholder rule it must never share a plan with."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rules.providers.contract.messages import violations
from rules.providers.planner import compile_messages_plan
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import sanitize_body

SIG = "EqQBCkYIBxgCKkBsig"
ON = {"type": "enabled", "budget_tokens": 2048}
ANTHROPIC = compile_messages_plan(PROFILES["anthropic"])
CALL = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def unsigned(value: str = "DeepSeek's reasoning") -> dict[str, Any]:
    return {"type": "thinking", "thinking": value}


def signed(value: str = "plan") -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": SIG}


def body(*messages: Any, **fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 4096, **fields, "messages": list(messages)}


def repaired(payload: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``payload`` through the `anthropic` plan: what is sent, and (rule, action) per change;
    Anthropic refuses it as it is and accepts what is sent."""
    assert violations(payload, ANTHROPIC.contract)
    result = sanitize_body(orjson.dumps(payload), ANTHROPIC, "messages")
    assert result.failures == ()
    sent = orjson.loads(result.body)
    assert violations(sent, ANTHROPIC.contract) == []
    return sent, [(change.rule, change.action) for change in result.changes]


def test_a_deepseek_tool_loop_sent_to_anthropic_runs_with_thinking_off() -> None:
    """The loop's last turn had only DeepSeek's unsigned thinking: the block goes, and with it
    the loop's thinking, so thinking is off for this request (the error's own advice); every
    text, call and result stays."""
    payload = body(
        user(text("list the files")),
        assistant(unsigned(), text("I'll look."), CALL),
        user(RESULT),
        thinking=ON,
    )
    sent, changes = repaired(payload)
    assert changes == [
        ("messages-unsigned-thinking", "dropped_thinking"),
        ("messages-tool-loop-thinking", "disabled_thinking"),
    ]
    assert "thinking" not in sent
    assert sent["messages"] == [
        user(text("list the files")),
        assistant(text("I'll look."), CALL),
        user(RESULT),
    ]


def test_an_unsigned_block_is_removed_not_moved() -> None:
    """Thinking after text: the unsigned block goes first, so thinking order moves only the
    signed block (one block, unchanged) to the front."""
    payload = body(
        user(text("go")),
        assistant(text("Looking."), unsigned(), signed(), CALL),
        user(RESULT),
        thinking=ON,
    )
    sent, changes = repaired(payload)
    assert changes == [
        ("messages-unsigned-thinking", "dropped_thinking"),
        ("messages-thinking-order", "moved_thinking"),
    ]
    assert sent["messages"][1] == assistant(signed(), text("Looking."), CALL)
    assert sent["thinking"] == ON


def test_a_turn_of_unsigned_thinking_only_goes_and_the_users_merge() -> None:
    payload = body(
        user(text("first")),
        assistant({"type": "thinking", "thinking": "", "signature": ""}),
        user(text("second")),
    )
    sent, changes = repaired(payload)
    assert [rule for rule, _ in changes] == [
        "messages-unsigned-thinking",
        "messages-empty-messages",
        "messages-consecutive-roles",
    ]
    assert sent["messages"] == [user(text("first"), text("second"))]


@pytest.mark.parametrize("name", ["deepseek", "kimi", "glm", "minimax", "qwen"])
def test_providers_that_take_unsigned_thinking_get_it_as_sent(name: str) -> None:
    """Minimal intervention: DeepSeek's own history goes back to DeepSeek (and to every other
    Anthropic-compatible endpoint) byte for byte."""
    plan = compile_messages_plan(PROFILES[name])
    payload = body(
        user(text("go")),
        assistant(unsigned(), CALL),
        user(RESULT),
        model="deepseek-v4-pro",
        thinking=ON,
    )
    raw = orjson.dumps(payload)
    result = sanitize_body(raw, plan, "messages")
    assert result.body is raw and result.changes == ()


@pytest.mark.parametrize("name", list(PROFILES))
def test_no_plan_removes_unsigned_thinking_and_adds_placeholders(name: str) -> None:
    """messages-missing-thinking adds exactly the blocks messages-unsigned-thinking removes:
    no profile switches both on."""
    names = {rule.name for rule, _ in compile_messages_plan(PROFILES[name]).steps}
    assert not {"messages-unsigned-thinking", "messages-missing-thinking"} <= names
