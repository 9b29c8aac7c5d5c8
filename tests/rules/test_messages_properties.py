"""Properties of every profile's Messages plan over random broken Claude-Code-shaped requests.

After the plan: every ``tool_use`` is answered exactly once at the head of the next user
message and no ``tool_result`` stands anywhere else, ``tool_use`` ids are unique, no text block
is blank and no message empty (but a final assistant), every input is an object, the profile's
Messages contract reports nothing, no rule failed, a second run changes nothing, no rule wrote
into its argument, and every user text, every tool input and every result that answered a call
is still there.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from rules.engine import memo
from rules.engine.base import RequestFacts
from rules.engine.pipeline import run_rules
from rules.messages import MESSAGES_RULES, scan
from rules.messages.blocks import content_list, role, tool_result_id, tool_use_ids
from rules.providers.contract.messages import violations
from rules.providers.planner import Plan, compile_messages_plan
from rules.providers.profiles import PROFILES
from tests.anthropic_strategies import BETAS, requests
from tests.budget import examples

CACHE_CONTROL = "messages-tool-result-cache-control"
CACHE_CONTROL_CHECK = "messages_tool_result_cache_control"
MAIN = settings(
    max_examples=examples(1.5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PLANS = {name: compile_messages_plan(p) for name, p in PROFILES.items() if name != "passthrough"}
#: A relay in front of Anthropic that refuses `cache_control` inside a result (GitHub Copilot):
#: Anthropic's plan with the rule an operator enables by name, and the relay's check.
PLANS["anthropic-relay"] = replace(
    compile_messages_plan(PROFILES["anthropic"], {CACHE_CONTROL: True}),
    contract={**PROFILES["anthropic"].messages_contract, CACHE_CONTROL_CHECK: {}},
)


def run(
    plan: Plan, request: dict[str, Any], betas: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], Any]:
    """``plan`` over ``request`` as the proxy runs it for a request with these
    ``anthropic-beta`` values."""
    steps = plan.given(RequestFacts(betas=betas)).steps if betas else plan.steps
    result = run_rules(request["messages"], steps, request=request)
    out = {**(result.request or request), "messages": result.messages}
    return out, result


def check_invariants(messages: list[Any]) -> None:
    seen: set[str] = set()
    for index, message in enumerate(messages):
        blocks = content_list(message) or []
        for block in blocks:
            if block.get("type") == "tool_use":
                assert block["id"] not in seen, ("duplicate id", index)
                seen.add(block["id"])
                assert isinstance(block.get("input"), dict), ("input", index)
            if block.get("type") == "text":
                assert block["text"].strip(), ("blank text", index)
        ids = tool_use_ids(message)
        if ids:
            after = messages[index + 1]
            assert role(after) == "user", ("no user after tool_use", index)
            head = (content_list(after) or [])[: len(ids)]
            assert Counter(tool_result_id(b) for b in head) == Counter(ids), ("pairing", index)
        elif role(message) == "user" and index > 0:
            previous = tool_use_ids(messages[index - 1])
            results = [b for b in blocks if b.get("type") == "tool_result"]
            assert len(results) == len(previous), ("orphan results", index)


def user_texts(messages: list[Any]) -> list[str]:
    found: list[str] = []
    for message in messages:
        if role(message) != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            found.append(content)
        found.extend(b["text"] for b in content_list(message) or () if b.get("type") == "text")
    return [text for text in found if text.strip()]


def inputs(messages: list[Any]) -> Counter[bytes]:
    return Counter(
        orjson.dumps(block["input"], option=orjson.OPT_SORT_KEYS)
        for message in messages
        for block in content_list(message) or ()
        if block.get("type") == "tool_use" and isinstance(block.get("input"), dict)
    )


def result_content(block: dict[str, Any]) -> bytes:
    """A result's content as JSON, its cache breakpoints aside (messages-tool-result-cache-control
    moves them onto the result: they are no content)."""
    content = block.get("content")
    if isinstance(content, list):
        content = [
            {k: v for k, v in part.items() if k != "cache_control"}
            if isinstance(part, dict)
            else part
            for part in content
        ]
    return orjson.dumps(content)


def answering_results(messages: list[Any]) -> Counter[bytes]:
    """The contents of results that answer a call of the nearest assistant before them."""
    found: Counter[bytes] = Counter()
    calls: Counter[str] = Counter()
    for message in messages:
        if role(message) == "assistant":
            calls = Counter(tool_use_ids(message))
            continue
        for block in content_list(message) or ():
            tid = tool_result_id(block)
            if tid and calls[tid] > 0:
                calls[tid] -= 1
                found[result_content(block)] += 1
    return found


@pytest.mark.parametrize("name", list(PLANS))
@given(request=requests(), betas=st.sampled_from(BETAS))
@MAIN
def test_the_plan_leaves_nothing_its_contract_refuses(
    name: str, request: dict[str, Any], betas: frozenset[str]
) -> None:
    plan = PLANS[name]
    snapshot = copy.deepcopy(request)
    out, result = run(plan, request, betas)
    note(orjson.dumps(out).decode())
    assert request == snapshot  # the caller's data is untouched
    assert result.failures == ()
    check_invariants(out["messages"])
    assert violations(out, plan.contract, betas=betas) == []
    # Nothing the client sent is lost: user texts, tool inputs, results that answered a call.
    joined = "\n".join(user_texts(out["messages"]))
    for text in user_texts(request["messages"]):
        assert text in joined
    assert not inputs(request["messages"]) - inputs(out["messages"])
    assert not answering_results(request["messages"]) - Counter(
        result_content(b)
        for m in out["messages"]
        for b in content_list(m) or ()
        if b.get("type") == "tool_result"
    )
    # Idempotent: a second run changes nothing.
    _, again = run(plan, out, betas)
    assert again.changes == () and again.request is None


@given(request=requests())
@MAIN
def test_no_rule_writes_into_its_argument(request: dict[str, Any]) -> None:
    plan = PLANS["anthropic"]
    messages = copy.deepcopy(request["messages"])
    fields: dict[str, Any] = request
    steps = [*plan.steps, *PLANS["deepseek"].steps, *PLANS["kimi"].steps]
    for rule, ctx in [*steps, *PLANS["anthropic-relay"].steps]:
        snapshot = copy.deepcopy((messages, fields))
        step_ctx = replace(ctx, request=fields) if rule.reads_request else ctx
        outcome = rule.apply(messages, step_ctx)
        assert (messages, fields) == snapshot, rule.name
        messages = outcome.messages
        if outcome.request is not None:
            fields = outcome.request


#: The shared-walk signal each rule waits for (rules/messages/scan.py).
SIGNALS = {
    "messages-empty-text-blocks": scan.BLANK_TEXT,
    "messages-empty-messages": scan.EMPTY_MESSAGE,
    "messages-consecutive-roles": scan.ADJACENT,
    "messages-tool-input": scan.BAD_INPUT,
    "messages-tool-use-id-charset": scan.BAD_ID,
    "messages-duplicate-tool-use-ids": scan.DUP_ID,
    "messages-tool-result-pairing": scan.UNPAIRED,
    "messages-thinking-order": scan.MISPLACED_THINKING,
    "messages-unsigned-thinking": scan.UNSIGNED_THINKING,
    "messages-missing-thinking": scan.BARE_TOOL_USE,
}


@given(request=requests())
@MAIN
def test_the_shared_walk_never_misses_a_rule_s_work(request: dict[str, Any]) -> None:
    """Soundness: whenever a rule changes a list, the walk over that list set its signal
    (each rule run alone on the client's list, and on the list the rules before it left)."""
    messages: list[Any] = request["messages"]
    for rule in MESSAGES_RULES:
        ctx = replace(rule.context(), request=request)
        for given_list in (request["messages"], messages):
            with memo.run():  # a run of its own: the walk is done afresh
                with_signal = scan.signals(given_list)
            with memo.run():
                outcome = rule.apply(given_list, ctx)
            if outcome.changes and rule.name in SIGNALS:
                assert SIGNALS[rule.name] in with_signal, rule.name
            if not outcome.changes:
                assert outcome.messages is given_list, rule.name
        messages = rule.apply(messages, replace(rule.context(), request=request)).messages


#: Ends the property above found where the anthropic plans left thinking in a final turn: a
#: thinking-only final message, and an empty prefill (Claude 4.6+), each hiding a tool loop's
#: last turn, which became final once it was removed.
_THINKING = {"type": "thinking", "thinking": "plan", "signature": "sig"}
_BASH = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}
HIDDEN_FINAL_TURNS = {
    "thinking-only final message": [
        {"role": "assistant", "content": [_THINKING]},
        {"role": "assistant", "content": [_BASH]},
        {"role": "user", "content": []},
        {"role": "assistant", "content": [_THINKING]},
    ],
    "empty prefill": [
        {"role": "assistant", "content": [_THINKING, _BASH]},
        {"role": "user", "content": []},
        {"role": "assistant", "content": ""},
    ],
}


@pytest.mark.parametrize("end", sorted(HIDDEN_FINAL_TURNS))
@pytest.mark.parametrize("name", ["anthropic", "anthropic-relay"])
def test_a_tool_loop_turn_left_final_loses_its_thinking(name: str, end: str) -> None:
    request = {"model": "claude-opus-4-6", "max_tokens": 1024, "messages": HIDDEN_FINAL_TURNS[end]}
    out, _ = run(PLANS[name], request)
    assert violations(out, PLANS[name].contract, betas=frozenset()) == []
    blocks = [b for m in out["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert _BASH in blocks  # the call stays, answered
