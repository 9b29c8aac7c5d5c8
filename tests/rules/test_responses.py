"""The Responses rules together: properties over random broken ``input`` lists, the planner's
Responses plan, config validation, and the rules' options.

The SPEC these check: after the Responses pipeline every function_call with a usable call_id is
answered by exactly one function_call_output after it, with no message item between them; every
output answers exactly one earlier call; call_ids are unique and at most 64 characters; item ids
are unique; the Responses contract reports nothing; the caller's input is untouched; a second
run changes nothing; no user text is lost (compaction aside, which leaves out by design).
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.config import ConfigError, parse_config
from rules.chat import RULES_BY_NAME
from rules.providers.contract.responses import RESPONSES_CONTRACT, violations
from rules.providers.planner import Planner, compile_responses_plan
from rules.responses import RESPONSES_RULES, RESPONSES_RULES_BY_NAME, sanitize_input
from rules.responses.items import call_id, is_call, is_message, is_output, item_id
from tests.budget import examples
from tests.strategies import arbitrary_messages

SETTINGS = settings(
    max_examples=examples(2),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

LONG_ID = "call_" + "L" * 70
CALL_IDS = st.sampled_from(["call_1", "call_2", "call_3", "functions.ls:0", LONG_ID])
ITEM_IDS = st.one_of(st.none(), st.sampled_from(["fc_1", "fc_2", "msg_1", "rs_1", "msg_123"]))
TEXTS = st.sampled_from(["hi", "turn 1", "turn 1 ", "done", "x\ny"])


def _with_id(item: dict[str, Any], item_id: str | None) -> dict[str, Any]:
    return item if item_id is None else {**item, "id": item_id}


@st.composite
def items(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["user", "message", "call", "output", "reasoning", "junk"]))
    if kind == "user":
        return {"role": "user", "content": draw(TEXTS)}
    if kind == "message":
        role = draw(st.sampled_from(["user", "developer", "assistant", "system"]))
        part = {"type": "output_text" if role == "assistant" else "input_text"}
        text = {**part, "text": draw(TEXTS)}
        return _with_id({"type": "message", "role": role, "content": [text]}, draw(ITEM_IDS))
    if kind == "call":
        call = {
            "type": "function_call",
            "call_id": draw(CALL_IDS),
            "name": draw(st.sampled_from(["ls", "cat"])),
            "arguments": draw(st.sampled_from(["{}", '{"a": 1}', '{"a":1}'])),
        }
        return _with_id(call, draw(ITEM_IDS))
    if kind == "output":
        output = {"type": "function_call_output", "call_id": draw(CALL_IDS), "output": "ok"}
        return _with_id(output, draw(ITEM_IDS))
    if kind == "reasoning":
        return _with_id({"type": "reasoning", "summary": []}, draw(ITEM_IDS))
    return draw(st.sampled_from([None, 3, "text", [], {"type": None}, {"call_id": 5}]))


@st.composite
def inputs(draw: st.DrawFn) -> list[Any]:
    """A broken input: random items, sometimes a doubled prefix (the issue's replay)."""
    base: list[Any] = draw(st.lists(items(), max_size=14))
    double: bool = draw(st.booleans())
    if base and double:
        cut: int = draw(st.integers(1, len(base)))
        base = [*base[:cut], *copy.deepcopy(base[:cut]), *base[cut:]]
    return base


def pairing_problems(out: list[Any]) -> list[str]:
    problems: list[str] = []
    calls = [cid for item in out if is_call(item) and (cid := call_id(item)) is not None]
    problems += [f"call_id {c} used by {n} calls" for c, n in Counter(calls).items() if n > 1]
    problems += [f"call_id {c} too long" for c in calls if len(c) > 64]
    answered: Counter[str] = Counter()
    open_calls: dict[str, int] = {}  # call_id -> index of its call, until answered
    for index, item in enumerate(out):
        if is_call(item) and call_id(item) is not None:
            open_calls[item["call_id"]] = index
        elif is_output(item):
            cid = call_id(item)
            if cid not in open_calls:
                problems.append(f"input[{index}] answers no open call: {cid!r}")
                continue
            assert cid is not None
            answered[cid] += 1
            between = out[open_calls.pop(cid) + 1 : index]
            if any(is_message(x) for x in between):
                problems.append(f"a message stands between call {cid} and its output")
    problems += [f"call {c} unanswered" for c in open_calls]
    ids = [item_id(item) for item in out if item_id(item) is not None]
    problems += [f"item id {i} twice" for i, n in Counter(ids).items() if n > 1]
    return problems


def user_texts(values: list[Any]) -> set[str]:
    return {
        " ".join(v["content"].split())
        for v in values
        if isinstance(v, dict) and v.get("role") == "user" and isinstance(v.get("content"), str)
    }


@pytest.mark.slow
@SETTINGS
@given(inputs())
def test_after_the_pipeline_every_call_is_paired_once_and_ids_are_unique(
    broken: list[Any],
) -> None:
    snapshot = copy.deepcopy(broken)
    result = sanitize_input(broken)
    assert broken == snapshot, "the caller's input is never mutated"
    assert result.failures == ()
    out = result.messages
    assert pairing_problems(out) == []
    assert violations({"input": out}, RESPONSES_CONTRACT) == []
    assert user_texts(out) == user_texts(broken), "no user text is lost"
    again = sanitize_input(out)
    assert again.changes == (), [c.as_dict() for c in again.changes]


@pytest.mark.slow
@SETTINGS
@given(arbitrary_messages(max_size=10), st.booleans())
def test_each_rule_alone_survives_junk(junk: list[Any], checkpoint: bool) -> None:
    if checkpoint:
        junk = [*junk, {"type": "compaction", "id": "cmp_1"}, *junk]
    for rule in RESPONSES_RULES:
        snapshot = copy.deepcopy(junk)
        ctx = rule.context()
        outcome = rule.apply(junk, ctx)
        assert junk == snapshot, rule.name
        assert rule.apply(outcome.messages, ctx).changes == (), rule.name


@pytest.mark.slow
@SETTINGS
@given(st.lists(items(), max_size=10), st.lists(items(), max_size=6))
def test_compaction_keeps_the_run_and_everything_after_it(
    before: list[Any], after: list[Any]
) -> None:
    checkpoint = {"type": "compaction", "id": "cmp_9", "encrypted_content": "e"}
    result = sanitize_input([*before, checkpoint, *after], {"responses-compaction": True})
    assert checkpoint in result.messages
    # every user message is still there: those before within the (large) budget, those after
    assert user_texts(result.messages) == user_texts([*before, *after])


def test_names_are_unique_across_chat_and_responses_rules() -> None:
    assert not set(RULES_BY_NAME) & set(RESPONSES_RULES_BY_NAME)
    assert all(name.startswith("responses-") for name in RESPONSES_RULES_BY_NAME)


def test_the_issue_example_passes_a_strict_upstream_after_repair() -> None:
    broken = [
        {"role": "user", "content": "list"},
        {"type": "function_call_output", "call_id": "call_gone", "output": "orphan"},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_a",
            "name": "ls",
            "arguments": "{}",
        },
        {"type": "message", "role": "developer", "content": "between"},
        {"type": "function_call_output", "call_id": "call_a", "output": "a.txt"},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_a",
            "name": "ls",
            "arguments": "{}",
        },
        {"type": "function_call", "call_id": LONG_ID, "name": "cat", "arguments": "{}"},
    ]
    codes = {v.code for v in violations({"input": broken})}
    assert codes == {
        "responses_orphan_output",
        "responses_interrupted_output",
        "responses_unanswered_call",
        "responses_duplicate_item",
        "responses_call_id_too_long",
    }
    out = sanitize_input(broken).messages
    assert violations({"input": out}) == []
    assert [x.get("type", "message") for x in out] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "function_call",
        "function_call_output",
    ]


def test_the_planner_fills_direct_openai_from_the_upstream_and_the_operator_wins() -> None:
    def options(planner: Planner) -> dict[str, Any]:
        steps = {rule.name: ctx for rule, ctx in planner.responses.steps}
        return dict(steps["responses-context-management"].options)

    assert options(parse_config({}).planner())["direct_openai"] is False
    openai = parse_config({"upstream": {"url": "https://api.openai.com/v1"}})
    assert options(openai.planner())["direct_openai"] is True
    plan = openai.planner().responses
    # openai's own Responses settings (responses-reasoning-order) name the plan after it
    assert plan.api == "responses" and plan.profile == "responses:openai"
    assert plan.contract["responses_context_management"]["direct_openai"] is True
    relay = parse_config(
        {
            "upstream": {"url": "https://relay.example"},
            "rules": {"responses-context-management": {"direct_openai": True, "models": ["*"]}},
        }
    )
    assert options(relay.planner()) == {"direct_openai": True, "models": ["*"]}
    off = parse_config({"rules": {"responses-orphan-outputs": False}})
    assert "responses-orphan-outputs" not in {r.name for r, _ in off.planner().responses.steps}


def test_a_profile_without_responses_settings_gets_the_rules_defaults() -> None:
    planner = Planner("groq")
    defaults = [r.name for r in RESPONSES_RULES if r.default]
    assert [r.name for r, _ in planner.responses.steps] == defaults
    assert compile_responses_plan().contract.keys() == RESPONSES_CONTRACT.keys()


def test_passthrough_runs_no_rule_on_any_api() -> None:
    """Issue 35: under passthrough the Responses rules ran (their defaults); it relays only, on
    every API: recovery alone acts."""
    planner = Planner("passthrough")
    assert planner.plan("any").steps == []
    assert planner.responses.steps == []
    assert planner.messages("any").steps == []


def test_a_profile_adds_the_responses_repairs_its_provider_needs() -> None:
    planner = Planner("chat-template")
    names = [r.name for r, _ in planner.responses.steps]
    assert "responses-invalid-arguments" in names
    assert "responses_invalid_arguments" in planner.responses.contract
    options = {r.name: ctx.options for r, ctx in Planner("deepseek").responses.steps}
    assert options["responses-displaced-messages"]["adjacency"] == "strict"
    assert "responses-invalid-arguments" not in options


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"responses-nope": True}, "rules.responses-nope: unknown rule"),
        ({"responses-call-ids": {"max_length": "64"}}, "rules.responses-call-ids.max_length"),
        ({"responses-compaction": {"budget": 1}}, "rules.responses-compaction.budget"),
    ],
)
def test_config_validates_responses_rules(rules: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"rules": rules})


@st.composite
def clean_inputs(draw: st.DrawFn) -> list[Any]:
    """A valid Responses history: user turns, each with 0..2 rounds of calls and outputs."""
    out: list[Any] = []
    counter = 0
    for _ in range(draw(st.integers(1, 3))):
        out.append({"role": "user", "content": draw(TEXTS)})
        for _ in range(draw(st.integers(0, 2))):
            counter += 1
            cid = f"call_{counter}_{draw(st.sampled_from(['a', 'b']))}"
            out.append(
                {
                    "type": "function_call",
                    "id": f"fc_{counter}",
                    "call_id": cid,
                    "name": "ls",
                    "arguments": "{}",
                }
            )
            out.append({"type": "function_call_output", "call_id": cid, "output": draw(TEXTS)})
        out.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{len(out)}",
                "content": [{"type": "output_text", "text": draw(TEXTS)}],
            }
        )
    return out


@pytest.mark.slow
@SETTINGS
@given(clean_inputs(), st.integers(1, 3))
def test_a_doubled_responses_history_reaches_its_true_length(clean: list[Any], turns: int) -> None:
    stored, true = list(clean), list(clean)
    for turn in range(turns):
        new = {"role": "user", "content": f"new {turn}"}
        stored = [*stored, *({**x, "status": "completed"} for x in stored), new]
        true = [*true, new]
    out = sanitize_input(stored).messages
    assert violations({"input": out}) == []
    if any(is_call(x) for x in clean):
        assert len(out) == len(true)
        assert [{k: v for k, v in x.items() if k != "status"} for x in out] == true
