"""A clean Claude-Code-shaped Messages body reaches every profile's upstream byte for byte; the
same session carrying every defect is refused as it is and accepted once repaired, with every
user text, tool result and tool input kept."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import orjson
import pytest

from rules.engine.base import RequestFacts
from rules.providers.contract.messages import violations
from rules.providers.planner import Planner, compile_messages_plan
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import sanitize_body
from tests.anthropic_bodies import (
    KEPT_INPUTS,
    KEPT_RESULTS,
    KEPT_USER_TEXTS,
    broken_session,
    clean_session,
)


@pytest.mark.parametrize("name", list(PROFILES))
@pytest.mark.parametrize(
    "model", ["claude-sonnet-4-5-20250929", "deepseek-v4-pro", "kimi-k2.6", "kimi-k2.7-code"]
)
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
        ("kimi", "kimi-k2.7-code"),
        ("glm", "glm-5.1"),
        ("minimax", "MiniMax-M2"),
        ("qwen", "qwen3-coder-plus"),
    ],
)
def test_a_broken_session_is_refused_then_repaired(name: str, model: str) -> None:
    plan = compile_messages_plan(PROFILES[name])
    session = broken_session(model)
    session["thinking"] = {"type": "adaptive"}  # what Claude Code sends for Claude 4.6
    raw = json.dumps(session).encode()  # the cut emoji: only the stdlib writes it
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


EDITS = {"edits": [{"type": "clear_tool_uses_20250919"}]}
BETA = "context-management-2025-06-27"


def test_context_management_with_its_beta_goes_byte_for_byte() -> None:
    """Claude Code sends `context_management` with its beta header: untouched; the same body
    without the header loses the field, and nothing else (anthropics/claude-code#14135)."""
    plan = compile_messages_plan(PROFILES["anthropic"])
    body = {**clean_session(), "context_management": EDITS}
    raw = orjson.dumps(body)
    betas = frozenset({"claude-code-20250219", BETA})
    result = sanitize_body(raw, plan, "messages", given=RequestFacts(betas=betas))
    assert result.body is raw and result.changes == ()
    assert violations(body, plan.contract, betas=betas) == []
    # Without the header: refused as it is, the field removed by the rule.
    assert [v.code for v in violations(body, plan.contract)] == ["messages_context_management"]
    result = sanitize_body(
        raw, plan, "messages", given=RequestFacts(betas=frozenset({"other-beta"}))
    )
    sent = orjson.loads(result.body)
    assert [c.rule for c in result.changes] == ["messages-context-management"]
    assert sent == {k: v for k, v in body.items() if k != "context_management"}
    assert violations(sent, plan.contract) == []


def test_verify_judges_a_kept_context_management_with_the_request_betas() -> None:
    """``verify`` checks the rewritten body with the betas the rules saw: a field kept for its
    header is not reported as refused (review finding)."""
    plan = replace(compile_messages_plan(PROFILES["anthropic"]), verify=True)
    body = clean_session()
    first = body["messages"][0]
    blank = {**first, "content": [{"type": "text", "text": " "}, *content_of(first)]}
    body = {**body, "messages": [blank, *body["messages"][1:]], "context_management": EDITS}
    betas = frozenset({BETA})
    result = sanitize_body(orjson.dumps(body), plan, "messages", given=RequestFacts(betas=betas))
    assert [c.rule for c in result.changes] == ["messages-empty-text-blocks"]
    assert "context_management" in orjson.loads(result.body)
    assert result.violations == ()


def content_of(message: dict[str, Any]) -> list[Any]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def test_a_plan_is_given_only_to_the_rules_that_read_it() -> None:
    """`Plan.given` rebuilds the contexts of the steps whose rule reads `RequestFacts` and no other;
    a plan none of whose rules reads it is returned as it is (the clean path stays cheap)."""
    given = RequestFacts(betas=frozenset({BETA}))
    plan = compile_messages_plan(PROFILES["anthropic"])
    with_given = plan.given(given)
    for (rule, ctx), (_, new) in zip(plan.steps, with_given.steps, strict=True):
        assert (new.given is given) == rule.gets_facts, rule.name
        assert (new is ctx) != rule.gets_facts, rule.name
    assert [r.name for r, _ in plan.steps if r.gets_facts] == ["messages-context-management"]
    glm = compile_messages_plan(PROFILES["glm"])
    assert glm.given(given) is glm
