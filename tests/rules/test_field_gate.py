"""The request-level rules' gate (rules/engine/wake.py ``fields``): a request-level step whose
``woken_by`` names none of the request's top-level keys is skipped, and it never had work.

For every profile and every API (its plans), over requests drawn with any subset of the
top-level fields the rules read (with values that would wake them and values that would not): a
step the gate leaves asleep changes nothing when it runs anyway, and the pipeline gives the same
list, the same changes and the same request fields with the gate as without it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.engine.pipeline import run_rules
from rules.providers.planner import Planner
from tests.budget import examples

PLANNER = Planner()
EXAMPLES = settings(
    max_examples=examples(1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "model": st.sampled_from(["deepseek-reasoner", "kimi-k2-thinking", "glm-4.6", "claude-x", 3]),
    "tools": st.sampled_from([[], None, [TOOL], [TOOL, TOOL], [{"type": "web_search_20250305"}]]),
    "tool_choice": st.sampled_from(
        ["auto", "required", {"type": "function", "function": {"name": "f"}}, {"type": "any"}]
    ),
    "parallel_tool_calls": st.booleans(),
    "temperature": st.sampled_from([0.2, 1.0, 0]),
    "top_p": st.sampled_from([0.5, 1.0]),
    "thinking": st.sampled_from(
        [{"type": "enabled", "budget_tokens": 2048}, {"type": "disabled"}, {"type": "adaptive"}]
    ),
    "max_tokens": st.sampled_from([100, 4096]),
    "metadata": st.sampled_from([{"user_id": "x" * 300}, {"user_id": "u1"}]),
    "context_management": st.just({"edits": []}),
    "reasoning_effort": st.sampled_from(["low", "high"]),
}
REQUESTS = st.fixed_dictionaries({}, optional=VALUES)
ITEMS: list[Any] = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "again"},
]


PLANS = [
    (f"{api}:{name}", plan)
    for api, plans in (
        ("chat", PLANNER.plans),
        ("messages", PLANNER.messages_plans),
        ("responses", PLANNER.responses_plans),
    )
    for name, plan in plans.items()
]


def _request_steps(plan: Any) -> list[Any]:
    return [
        (rule, ctx)
        for rule, ctx in plan.steps
        if rule.reads_request and rule.scan is None and ctx.woken_by is not None
    ]


def test_request_level_rules_declare_a_gate() -> None:
    gated = {rule.name for _, plan in PLANS for rule, _ in _request_steps(plan)}
    assert {
        "empty-tools",
        "duplicate-tool-names",
        "thinking-tool-choice",
        "messages-thinking-tool-choice",
        "messages-metadata-user-id",
    } <= gated


@EXAMPLES
@given(request=REQUESTS)
def test_a_request_step_the_gate_leaves_asleep_has_nothing_to_do(request: dict[str, Any]) -> None:
    present = {f"field:{key}" for key in request}
    for name, plan in PLANS:
        for rule, ctx in _request_steps(plan):
            if not ctx.woken_by.isdisjoint(present):
                continue
            outcome = rule.apply(ITEMS, replace(ctx, request={**request, "messages": ITEMS}))
            assert outcome.changes == () and outcome.request is None, (name, rule.name)


@EXAMPLES
@given(request=REQUESTS)
def test_the_pipeline_gives_the_same_result_with_the_gate(request: dict[str, Any]) -> None:
    body = {**request, "messages": ITEMS}
    for name, plan in PLANS:
        steps = list(plan.steps)
        awake = [(rule, replace(ctx, woken_by=None)) for rule, ctx in steps]
        fast = run_rules(ITEMS, steps, request=body)
        full = run_rules(ITEMS, awake, request=body)
        assert (fast.messages, fast.changes, fast.request) == (
            full.messages,
            full.changes,
            full.request,
        ), name


def test_a_context_with_the_request_keeps_everything_else() -> None:
    for _, plan in PLANS:
        for _, ctx in plan.steps:
            request = {"model": "m"}
            assert ctx.with_request(request) == replace(ctx, request=request)
