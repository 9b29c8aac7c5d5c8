"""Issue 24's Responses reproductions, through the whole Responses pipeline of each profile: the
k-th output naming call_id X answers the k-th call naming X; an output before its call is moved,
not dropped; a reused call_id is renamed in the call and in the output that answers it; a reused
item ``id`` loses the field, never the item. And issue 25 item 5: under the DeepSeek profiles
every output stands right after its call (deepseek-ai/awesome-deepseek-integration#740).

Each expectation is written out here from the client's body, not computed by the rules."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.config import parse_config
from rules.engine.pipeline import run_rules
from rules.providers.contract.responses import violations
from rules.providers.planner import Plan
from rules.providers.profiles import PROFILES


def call(cid: str, path: str, **extra: Any) -> dict[str, Any]:
    args = '{"path": "' + path + '"}'
    return {"type": "function_call", "call_id": cid, "name": "read", "arguments": args, **extra}


def output(cid: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


USER = {"role": "user", "content": "read them"}
PLANNER = parse_config({}).planner()
NAMES = [name for name in PROFILES if name != "passthrough"]


def plans() -> list[Plan]:
    """Every profile's Responses plan but passthrough's, which runs no rule."""
    return [PLANNER.responses_plans[name] for name in NAMES]


def run(plan: Plan, items: list[Any]) -> list[Any]:
    out = run_rules(items, plan.steps).messages
    assert violations({"input": out}, plan.contract) == [], plan.profile
    return out


def answered(items: list[Any]) -> list[tuple[str, str]]:
    """(arguments of the call, output text) for each output, by the (now unique) call_id."""
    calls = {i["call_id"]: i["arguments"] for i in items if i.get("type") == "function_call"}
    return [
        (calls[i["call_id"]], i["output"]) for i in items if i.get("type") == "function_call_output"
    ]


A = '{"path": "a.txt"}'
B = '{"path": "b.txt"}'


@pytest.mark.parametrize("plan", plans(), ids=NAMES)
def test_a_call_id_reused_in_one_parallel_batch_keeps_each_output_on_its_call(plan: Plan) -> None:
    sent = [
        USER,
        call("call_1", "a.txt"),
        call("call_1", "b.txt"),
        output("call_1", "contents of a"),
        output("call_1", "contents of b"),
    ]
    out = run(plan, sent)
    assert sorted(answered(out)) == [(A, "contents of a"), (B, "contents of b")]


@pytest.mark.parametrize("plan", plans(), ids=NAMES)
def test_an_output_before_its_call_is_moved_after_it(plan: Plan) -> None:
    sent = [USER, output("call_1", "contents of a"), call("call_1", "a.txt")]
    out = run(plan, sent)
    assert out == [USER, call("call_1", "a.txt"), output("call_1", "contents of a")]


@pytest.mark.parametrize("plan", plans(), ids=NAMES)
def test_a_reused_item_id_loses_the_field_not_the_item(plan: Plan) -> None:
    sent = [
        USER,
        call("call_a", "a.txt", id="fc_1"),
        output("call_a", "contents of a"),
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "p"}]},
        call("call_b", "b.txt", id="fc_1"),
        output("call_b", "contents of b"),
        {"type": "message", "role": "assistant", "id": "rs_1", "content": "done"},
    ]
    out = run(plan, sent)
    assert answered(out) == [(A, "contents of a"), (B, "contents of b")]
    assert len(out) == len(sent)
    assert [i.get("id") for i in out] == [None, "fc_1", None, "rs_1", None, None, None]


def test_deepseek_gets_every_output_right_after_its_call() -> None:
    reasoning = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text"}]}
    hook = {"type": "message", "role": "developer", "content": "hook"}
    sent = [
        USER,
        reasoning,
        call("call_a", "a.txt"),
        call("call_b", "b.txt"),
        hook,
        output("call_a", "a"),
        output("call_b", "b"),
    ]
    deepseek = PLANNER.responses_for("deepseek-v4-flash")
    assert deepseek.profile == "responses:deepseek"
    assert violations({"input": sent}, deepseek.contract) != []
    assert run(deepseek, sent) == [
        USER,
        reasoning,
        call("call_a", "a.txt"),
        output("call_a", "a"),
        call("call_b", "b.txt"),
        output("call_b", "b"),
        hook,
    ]
    # OpenAI pairs by call_id wherever the output stands: the parallel batch stays a batch.
    openai = parse_config({"upstream": {"url": "https://api.openai.com/v1"}}).planner()
    out = run(openai.responses_for("gpt-5"), sent)
    assert out == [USER, reasoning, *sent[2:4], *sent[5:7], hook]
