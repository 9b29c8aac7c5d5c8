"""reasoning-content beyond its fixtures: the turn key, restoring recalled text, the lookup keys
the proxy computes agreeing with the rule's, properties over random requests, and the strict
profiles stripping every reasoning field."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chat.reasoning_content import RULE, turn_key, wanted_keys
from rules.engine.base import RequestFacts
from rules.engine.recall import canonical_text
from rules.providers.contract import violations
from rules.providers.planner import Planner
from rules.providers.sanitize import sanitize_body
from tests.budget import examples
from tests.requests import BrokenRequest, broken_requests

SCOPE = "https://api.deepseek.com\nabc"
CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"a": 1}'}}
PLANNER = Planner()


def conversation(**assistant: Any) -> list[dict[str, Any]]:
    turn = {"role": "assistant", "content": None, "tool_calls": [CALL], **assistant}
    return [
        {"role": "user", "content": "List."},
        turn,
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
    ]


def context(recalled: dict[str, str], model: str = "deepseek-v4-pro") -> Any:
    ctx = RULE.context()
    return replace(ctx, request={"model": model}, given=RequestFacts(SCOPE, recalled))


# --- the key --------------------------------------------------------------------------------


def test_the_key_is_a_sha256_hex_of_scope_and_calls() -> None:
    key = turn_key(SCOPE, [CALL])
    assert key is not None and len(key) == 64 and int(key, 16) >= 0
    assert turn_key(SCOPE, [CALL]) == key  # deterministic
    assert turn_key("other scope", [CALL]) != key
    other_id = {**CALL, "id": "call_2"}
    assert turn_key(SCOPE, [CALL, other_id]) != turn_key(SCOPE, [other_id, CALL])  # order
    other_args = {**CALL, "function": {"name": "ls", "arguments": '{"a": 2}'}}
    assert turn_key(SCOPE, [other_args]) != key  # Kimi reuses ids: arguments tell turns apart


def test_the_key_survives_a_client_re_serializing_the_arguments() -> None:
    spaced = {**CALL, "function": {"name": "ls", "arguments": '{ "a" : 1 }'}}
    as_object = {**CALL, "function": {"name": "ls", "arguments": {"a": 1}}}
    no_type = {"id": "call_1", "function": {"name": "ls", "arguments": '{"a":1}'}}
    key = turn_key(SCOPE, [CALL])
    assert turn_key(SCOPE, [spaced]) == turn_key(SCOPE, [as_object]) == key
    assert turn_key(SCOPE, [no_type]) == key
    assert canonical_text('{"b": 1, "a": [1, 2]}') == '{"a":[1,2],"b":1}'
    assert canonical_text("{not json") == "{not json"


@pytest.mark.parametrize("calls", [[{"type": "function"}], [{"id": ""}], ["call_1"], [{"id": 7}]])
def test_no_key_without_string_ids(calls: list[Any]) -> None:
    assert turn_key(SCOPE, calls) is None


# --- restoring ------------------------------------------------------------------------------


def test_a_recalled_text_is_restored_exactly() -> None:
    messages = conversation()
    key = turn_key(SCOPE, [CALL])
    assert key is not None
    text = "I should list the files first.\n  (indented)"
    outcome = RULE.apply(messages, context({key: text}))
    assert outcome.messages[1]["reasoning_content"] == text
    [change] = outcome.changes
    assert change.action == "restored_reasoning"
    assert change.detail == {"tool_call_ids": ["call_1"], "length": len(text)}
    assert text not in str(change.as_dict())  # never the text itself
    assert "reasoning_content" not in messages[1]  # the input is untouched
    again = RULE.apply(outcome.messages, context({key: text}))
    assert again.changes == () and again.messages is outcome.messages


def test_a_blank_placeholder_is_upgraded_but_real_text_is_kept() -> None:
    key = turn_key(SCOPE, [CALL])
    assert key is not None
    blank = RULE.apply(conversation(reasoning_content=" "), context({key: "real"}))
    assert blank.messages[1]["reasoning_content"] == "real"
    kept = conversation(reasoning_content="the client's own")
    outcome = RULE.apply(kept, context({key: "stored"}))
    assert outcome.messages is kept and outcome.changes == ()


def test_a_recalled_text_for_another_turn_is_not_used() -> None:
    other = turn_key(SCOPE, [{**CALL, "id": "call_9"}])
    assert other is not None
    outcome = RULE.apply(conversation(), context({other: "not this turn's"}))
    assert outcome.messages[1]["reasoning_content"] == " "
    assert outcome.changes[0].action == "inserted_placeholder"


def test_the_proxy_looks_up_exactly_the_keys_the_rule_reads() -> None:
    messages = [
        *conversation(),
        {"role": "assistant", "content": "ok", "tool_calls": [{**CALL, "id": "call_2"}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "b"},
        {"role": "assistant", "reasoning_content": "kept", "tool_calls": [{**CALL, "id": "c3"}]},
        {"role": "tool", "tool_call_id": "c3", "content": "c"},
    ]
    ctx = RULE.context()
    request = {"model": "deepseek-reasoner", "messages": messages}
    keys = wanted_keys(request, ctx, SCOPE)
    expected = [turn_key(SCOPE, [CALL]), turn_key(SCOPE, [{**CALL, "id": "call_2"}])]
    assert keys == expected
    assert wanted_keys({"model": "deepseek-chat", "messages": messages}, ctx, SCOPE) == []
    recalled = {key: f"text {n}" for n, key in enumerate(keys)}
    outcome = RULE.apply(messages, replace(context(recalled), request=request))
    assert [c.action for c in outcome.changes] == ["restored_reasoning"] * 2


def test_sanitize_body_hands_the_recalled_texts_to_the_rule() -> None:
    key = turn_key(SCOPE, [CALL])
    assert key is not None
    raw = orjson.dumps({"model": "deepseek-v4-flash", "messages": conversation()})
    plan = PLANNER.plan("deepseek-v4-flash")
    out = sanitize_body(raw, plan, parsed=orjson.loads(raw), given=RequestFacts(SCOPE, {key: "T"}))
    assert orjson.loads(out.body)["messages"][1]["reasoning_content"] == "T"
    assert not out.violations
    plain = sanitize_body(raw, plan)
    assert orjson.loads(plain.body)["messages"][1]["reasoning_content"] == " "


# --- properties -----------------------------------------------------------------------------

THINKING = settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.slow
@THINKING
@given(
    request=broken_requests(),
    profile=st.sampled_from(["deepseek", "deepseek-reasoner", "kimi"]),
    thinking=st.sampled_from(["enabled", "model"]),
    hit=st.booleans(),
)
def test_in_thinking_mode_the_profile_contract_holds_and_nothing_is_mutated(
    request: BrokenRequest, profile: str, thinking: str, hit: bool
) -> None:
    payload = dict(request.payload)
    if thinking == "enabled":
        payload["thinking"] = {"type": "enabled"}
    else:
        payload["model"] = "kimi-k2.5" if profile == "kimi" else "deepseek-v4-pro"
    plan = PLANNER.plans[profile]
    step = next(ctx for rule, ctx in plan.steps if rule.name == RULE.name)
    keys = wanted_keys(payload, step, SCOPE)
    recalled = {key: f"recalled {n}" for n, key in enumerate(keys)} if hit else {}
    snapshot = copy.deepcopy(payload)

    outcome = RULE.apply(
        payload["messages"], replace(step, request=payload, given=RequestFacts(SCOPE, recalled))
    )
    assert payload == snapshot, "the rule wrote into its input"
    again = RULE.apply(
        outcome.messages, replace(step, request=payload, given=RequestFacts(SCOPE, recalled))
    )
    assert again.changes == () and again.messages is outcome.messages

    result = sanitize_body(orjson.dumps(payload), plan, given=RequestFacts(SCOPE, recalled))
    assert result.failures == ()
    out = orjson.loads(result.body)
    left = [v for v in violations(out, plan.contract) if v.code == "reasoning_content_missing"]
    assert not left, out
    # A turn whose thinking parts thinking-parts moved into reasoning_content has its reasoning
    # already: only a history without such parts must see the stash's text restored.
    carried = any(
        type(m) is dict
        and type(m.get("content")) is list
        and any(
            type(p) is dict and p.get("type") in ("thinking", "redacted_thinking")
            for p in m["content"]
        )
        for m in payload["messages"]
    )
    if hit and keys and not carried:
        assert any(c.action == "restored_reasoning" for c in result.changes)


# --- the profiles that reject the fields ----------------------------------------------------


@pytest.mark.parametrize("profile", ["groq", "cerebras", "mistral", "azure"])
def test_strict_profiles_strip_every_reasoning_field(profile: str) -> None:
    fields = {
        "reasoning_content": "thought",
        "reasoning": "thought",
        "reasoning_details": [{"type": "reasoning.text", "text": "thought"}],
    }
    messages = [
        {"role": "user", "content": "List."},
        {"role": "assistant", "content": "Listing.", "tool_calls": [CALL], **fields},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {"role": "assistant", "content": "Done.", **fields},
        {"role": "user", "content": "Thanks."},
    ]
    plan = PLANNER.plans[profile]
    raw = orjson.dumps({"model": "m", "messages": messages})
    out = orjson.loads(sanitize_body(raw, plan).body)
    for message in out["messages"]:
        assert not set(fields) & set(message), (profile, message)
    assert not violations(out, plan.contract)
    # and the provider's own rejection names the field when it is left in
    left = violations(orjson.loads(raw), plan.contract)
    assert any(v.code == "unknown_field" for v in left)


def test_thinking_profiles_keep_the_field() -> None:
    raw = orjson.dumps(
        {"model": "deepseek-v4-pro", "messages": conversation(reasoning_content="r")}
    )
    for profile in ("deepseek", "deepseek-reasoner", "kimi"):
        result = sanitize_body(raw, PLANNER.plans[profile])
        assert orjson.loads(result.body)["messages"][1]["reasoning_content"] == "r"
