"""The one walk of the clean path (rules/chat/scan.py): it never lets a rule with work be skipped.

For every profile, over clean, broken and arbitrary message lists (and an answer given twice
around an assistant, whose drop leaves two assistants to merge): a step whose ``woken_by`` the
walk did not set changes nothing when it runs anyway, and the whole pipeline gives the same list
and the same changes with the walk as without it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chat import scan
from rules.engine.pipeline import run_rules
from rules.providers.contract import violations
from rules.providers.planner import Planner
from rules.providers.profiles import PROFILES
from tests.budget import examples
from tests.client_shapes import SESSIONS
from tests.requests import broken_requests
from tests.strategies import arbitrary_messages, broken_transcripts, clean_transcripts

PLANNER = Planner()
EXAMPLES = settings(
    max_examples=examples(1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: The contents an assistant may come with, empty in every way the walk tells apart, or not.
CONTENTS = st.sampled_from(
    [None, "", [], [{"type": "text", "text": ""}], [{"type": "text", "text": "t"}], {"x": 1}, "t"]
)


@st.composite
def answered_twice(draw: st.DrawFn) -> list[Any]:
    """A call answered, an assistant, the same answer again, an assistant (with or without
    calls of its own, each content above or none) and its answers: dropping the second answer
    leaves two assistants side by side, which a rule may merge."""
    function = {"name": "f", "arguments": "{}"}
    calls = [{"id": name, "type": "function", "function": function} for name in ("X", "Y")]
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [calls[0]]},
        {"role": "tool", "tool_call_id": "X", "content": "r"},
    ]
    for index in range(2):
        message: dict[str, Any] = {"role": "assistant"}
        content = draw(st.one_of(st.just("absent"), CONTENTS))
        if content != "absent":
            message["content"] = content
        if draw(st.booleans()):
            message["tool_calls"] = [calls[1] if index else {**calls[1], "id": f"Z{index}"}]
        messages.append(message)
        if index == 0:
            messages.append({"role": "tool", "tool_call_id": "X", "content": "again"})
        answers = message.get("tool_calls", ())
        messages.extend({"role": "tool", "tool_call_id": c["id"], "content": "r"} for c in answers)
    return messages


MESSAGES = st.one_of(
    clean_transcripts(),
    broken_transcripts().map(lambda broken: broken.messages),
    broken_requests().map(lambda request: request.payload["messages"]),
    arbitrary_messages(),
    answered_twice(),
)


def steps_of(name: str) -> list[Any]:
    plan = PLANNER.plans[name]
    return list(plan.steps)


# Every profile judges the same drawn lists: one draw serves all of them (drawing is most of the
# cost), and each profile meets more lists than when each drew its own 60 (ci: 100).


@pytest.mark.slow
@EXAMPLES
@given(messages=MESSAGES)
def test_a_step_the_walk_leaves_asleep_has_nothing_to_do(messages: list[Any]) -> None:
    signals = scan.scan(messages)
    if signals is None:
        return  # every rule runs in full
    for name in PROFILES:
        for rule, ctx in steps_of(name):
            if ctx.woken_by is None or not ctx.woken_by.isdisjoint(signals) or rule.reads_request:
                continue
            outcome = rule.apply(messages, ctx)
            assert outcome.messages is messages and outcome.changes == (), (
                name,
                rule.name,
                signals,
            )


@pytest.mark.slow
@EXAMPLES
@given(messages=MESSAGES)
def test_the_pipeline_gives_the_same_result_with_the_walk(messages: list[Any]) -> None:
    for name in PROFILES:
        steps = steps_of(name)
        awake = [(rule, replace(ctx, woken_by=None)) for rule, ctx in steps]
        fast = run_rules(messages, steps)
        full = run_rules(messages, awake)
        assert fast.messages == full.messages, name
        assert fast.changes == full.changes, name
        assert fast.failures == full.failures == (), name


def test_client_shaped_sessions_set_no_signal_the_default_profile_acts_on() -> None:
    """The clean path: standard sessions wake no step of the default profile."""
    woken_by = [
        ctx.woken_by for _, ctx in PLANNER.plans["deepseek"].steps if ctx.woken_by is not None
    ]
    assert len(woken_by) >= 14
    for label in ("openai_sdk_null", "langchain_empty_string", "kimi_ids", "agent_100_null"):
        signals = scan.scan(SESSIONS[label])
        assert signals is not None, label
        assert all(w.isdisjoint(signals) for w in woken_by), (label, signals)


def test_anything_the_walk_does_not_model_runs_every_rule() -> None:
    assert scan.scan([{"role": "user", "content": "x"}, None]) is None
    assert scan.scan([{"role": 3, "content": "x"}]) is None
    assert scan.scan([{"role": "assistant", "content": None, "tool_calls": "x"}]) is None
    assert scan.scan([{"role": "assistant", "content": None, "tool_calls": ["x"]}]) is None
    assert scan.scan([{"role": "user", "content": 5}]) is None


def test_every_plan_pickles_for_the_worker_processes() -> None:
    """Big bodies are repaired in worker processes (proxy/relay/offload.py): the planner, every
    rule's ``woken_by`` included, must pickle (a lambda would not)."""
    import pickle

    again = pickle.loads(pickle.dumps(PLANNER))
    for name, plan in PLANNER.plans.items():
        assert [ctx.woken_by for _, ctx in again.plans[name].steps] == [
            ctx.woken_by for _, ctx in plan.steps
        ]


@pytest.mark.parametrize("role", ["user", "tool", "system", "function"])
def test_calls_on_a_role_that_has_none_still_wake_the_key_rules(role: str) -> None:
    """bookkeeping-keys drops a call's `call_id` whatever the message's role: the walk must
    not let it sleep (a review found `tool_calls` read on assistants only)."""
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": role, "content": "x", "tool_calls": [{**call, "call_id": "x"}]}
    messages: list[Any] = [{"role": "user", "content": "go"}, message]
    if role == "tool":
        message["tool_call_id"] = "c"
    out = run_rules(messages, steps_of("deepseek"))
    assert out.changes  # dropped the key, or (`function`) the message DeepSeek cannot read
    left = violations({"messages": out.messages}, PLANNER.plans["deepseek"].contract)
    assert "bookkeeping_field" not in [v.code for v in left]


#: The chat rules that say what their change may set (``Rule.introduces``), in any profile.
DECLARING = {
    rule.name: rule
    for plan in PLANNER.plans.values()
    for rule, _ in plan.steps
    if rule.introduces is not None and rule.scan is scan.scan
}


def test_the_rules_that_change_stuck_sessions_say_what_they_may_set() -> None:
    assert {"invalid-tool-arguments", "bookkeeping-keys", "developer-role"} <= DECLARING.keys()
    assert "reasoning-content" in DECLARING  # what a thinking session changes on every turn
    assert "duplicate-tool-call-ids" in DECLARING  # issue 39's stuck session: a repeated call


#: The fields a rule that reads the request is given below: thinking mode on (reasoning-content
#: acts), as a DeepSeek thinking session sends them.
THINKING = {"model": "deepseek-reasoner", "thinking": {"type": "enabled"}}


@pytest.mark.slow
@EXAMPLES
@given(messages=MESSAGES)
def test_a_change_sets_no_signal_its_rule_did_not_declare(messages: list[Any]) -> None:
    """After a rule with ``introduces`` changed the list, the pipeline keeps the walk's signals
    (with those added): the changed list must set no other, and still be one the walk models."""
    signals = scan.scan(messages)
    if signals is None:
        return  # every rule runs in full
    for name in PROFILES:
        for rule, ctx in steps_of(name):
            if rule.name not in DECLARING:
                continue
            fields = {**THINKING, "messages": messages}
            outcome = rule.apply(messages, ctx.with_request(fields) if rule.reads_request else ctx)
            if outcome.messages is messages:
                continue
            after = scan.scan(outcome.messages)
            assert after is not None, (name, rule.name)
            assert after <= signals | rule.introduces, (name, rule.name, after - signals)


def test_assistants_merged_after_a_dropped_answer_still_wake_the_content_rules() -> None:
    """duplicate-tool-call-ids drops a second answer that stood between two assistants and
    merges them: the merged message may hold calls with an empty content (and two contents that
    cannot join stay side by side), which the walk did not see before. Declared as setting no
    signal, the rule once let `tool-call-content` sleep under kimi, and Kimi refuses the body
    sent (a hostile review found it; `test_a_change_sets_no_signal_its_rule_did_not_declare`'s
    histories never make this shape)."""
    call = {"id": "X", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    later = {**call, "id": "Y"}
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "X", "content": "r"},
        {"role": "assistant", "content": ""},
        {"role": "tool", "tool_call_id": "X", "content": "r again"},
        {"role": "assistant", "tool_calls": [later]},
        {"role": "tool", "tool_call_id": "Y", "content": "r"},
    ]
    out = run_rules(messages, steps_of("kimi"))
    assert "merged_assistants" in [change.action for change in out.changes]
    left = violations({"messages": out.messages}, PLANNER.plans["kimi"].contract)
    assert [v.code for v in left] == []
