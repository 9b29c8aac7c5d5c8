"""A clean Claude-Code-shaped Messages body reaches every profile's upstream byte for byte; the
same session carrying every defect is refused as it is and accepted once repaired, with every
user text, tool result and tool input kept."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from proxy.sanitize import sanitize_body
from rules.providers.contract.messages import violations
from rules.providers.planner import Planner, compile_messages_plan
from rules.providers.profiles import PROFILES
from tests.anthropic_bodies import (
    KEPT_INPUTS,
    KEPT_RESULTS,
    KEPT_USER_TEXTS,
    broken_session,
    clean_session,
)


@pytest.mark.parametrize("name", list(PROFILES))
@pytest.mark.parametrize("model", ["claude-sonnet-4-5-20250929", "deepseek-v4-pro", "kimi-k2.6"])
def test_a_clean_claude_code_body_goes_byte_for_byte(name: str, model: str) -> None:
    raw = orjson.dumps(clean_session(model))
    plan = compile_messages_plan(PROFILES[name])
    result = sanitize_body(raw, plan, "messages")
    assert result.body is raw
    assert result.changes == () and result.failures == ()
    assert violations(orjson.loads(raw), plan.contract) == []


def kept(body: dict[str, Any]) -> None:
    """Every user text, answered result and input of the broken session is in ``body``."""
    text = orjson.dumps(body["messages"]).decode()
    for value in (*KEPT_USER_TEXTS, *KEPT_RESULTS):
        assert json.dumps(value, ensure_ascii=False)[1:-1] in text, value
    inputs = [
        block["input"]
        for message in body["messages"]
        for block in message["content"]
        if isinstance(message["content"], list) and block.get("type") == "tool_use"
    ]
    for wanted in KEPT_INPUTS:
        assert wanted in inputs, wanted


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("anthropic", "claude-opus-4-6"),
        ("deepseek", "deepseek-v4-pro"),
        ("kimi", "kimi-k2.6"),
        ("glm", "glm-5.1"),
        ("minimax", "MiniMax-M2"),
        ("qwen", "qwen3-coder-plus"),
    ],
)
def test_a_broken_session_is_refused_then_repaired(name: str, model: str) -> None:
    plan = compile_messages_plan(PROFILES[name])
    raw = json.dumps(broken_session(model)).encode()  # the cut emoji: only the stdlib writes it
    assert violations(json.loads(raw), plan.contract)  # the provider refuses it as it is
    result = sanitize_body(raw, plan, "messages")
    assert result.skipped is None and result.failures == ()
    body = orjson.loads(result.body)
    assert violations(body, plan.contract) == []
    kept(body)


def test_the_planner_picks_the_messages_plan_by_model() -> None:
    planner = Planner(default="anthropic", models=[("deepseek-*", "deepseek")])
    assert planner.messages("deepseek-v4-pro").profile == "deepseek"
    assert planner.messages("deepseek-reasoner").profile == "deepseek-reasoner"
    assert planner.messages("claude-opus-4-6").profile == "anthropic"
    assert planner.messages("claude-opus-4-6").api == "messages"
