"""messages-missing-thinking beyond its fixtures: the turn key, restoring recalled thinking
blocks exactly, the lookup keys the proxy computes agreeing with the rule's, the plans that
recall, and properties over random Claude-Code-shaped requests with and without a stash hit."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import orjson
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from rules.engine.base import RequestFacts
from rules.engine.pipeline import run_rules
from rules.messages.blocks import THINKING_TYPES, block_type, content_list, tool_use_ids
from rules.messages.missing_thinking import (
    RULE,
    recalled_blocks,
    stored_form,
    turn_key,
    wanted_keys,
)
from rules.providers.contract.messages import violations
from rules.providers.planner import Planner
from rules.providers.sanitize import sanitize_body
from tests.anthropic_strategies import requests
from tests.budget import examples

SCOPE = "https://api.deepseek.com/anthropic\nabc"
TOOL = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
BLOCK = {"type": "thinking", "thinking": "List first.\n  «indented»", "signature": "Eq/+=="}
REQUEST = {"model": "deepseek-v4-pro", "thinking": {"type": "enabled"}}
PLANNER = Planner()


def conversation(*assistant: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "List."},
        {"role": "assistant", "content": [*assistant, TOOL]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]


def context(recalled: dict[str, str], request: dict[str, Any] = REQUEST) -> Any:
    return replace(RULE.context(), request=request, given=RequestFacts(SCOPE, recalled))


def test_the_key_is_a_sha256_hex_of_scope_and_tool_use_blocks() -> None:
    key = turn_key(SCOPE, [TOOL])
    assert key is not None and len(key) == 64 and int(key, 16) >= 0
    # Thinking and text blocks are not part of it: the turn as sent back, without them, matches.
    assert turn_key(SCOPE, [BLOCK, {"type": "text", "text": "x"}, TOOL]) == key
    other = {**TOOL, "id": "toolu_2"}
    assert turn_key(SCOPE, [TOOL, other]) != turn_key(SCOPE, [other, TOOL])  # order
    assert turn_key(SCOPE, [{**TOOL, "input": {"command": "rm"}}]) != key  # reused ids
    assert turn_key(SCOPE, [{**TOOL, "name": "Read"}]) != key
    assert turn_key(SCOPE, [{**TOOL, "input": '{ "command" : "ls" }'}]) == key  # text input
    for broken in ([], [BLOCK], [{**TOOL, "id": ""}], [{**TOOL, "id": 7}], "no list"):
        assert turn_key(SCOPE, broken) is None


def test_the_stored_form_round_trips_exactly() -> None:
    redacted = {"type": "redacted_thinking", "data": "EmwK/+=="}
    unsigned = {"type": "thinking", "thinking": "no signature field"}
    blocks = [BLOCK, redacted, unsigned]
    assert recalled_blocks(stored_form(blocks)) == blocks
    for bad in (None, 3, "", "[]", "{}", "not json", '[{"type": "text", "text": "x"}]'):
        assert recalled_blocks(bad) is None
    assert recalled_blocks('[{"type": "thinking", "thinking": 1}]') is None
    assert recalled_blocks('[{"type": "thinking", "thinking": "", "signature": 1}]') is None
    assert recalled_blocks('[{"type": "redacted_thinking"}]') is None


def test_recalled_blocks_are_restored_exactly_and_first_without_touching_the_input() -> None:
    messages = conversation({"type": "text", "text": "Listing."})
    snapshot = copy.deepcopy(messages)
    key = turn_key(SCOPE, [TOOL])
    assert key is not None
    outcome = RULE.apply(messages, context({key: stored_form([BLOCK])}))
    assert messages == snapshot
    assert outcome.messages[1]["content"] == [BLOCK, {"type": "text", "text": "Listing."}, TOOL]
    [change] = outcome.changes
    assert change.action == "restored_thinking"
    assert change.detail == {"ids": ["toolu_1"], "blocks": 1, "length": len(BLOCK["thinking"])}
    assert BLOCK["thinking"] not in str(change.as_dict())  # never the text
    again = RULE.apply(outcome.messages, context({key: stored_form([BLOCK])}))
    assert again.changes == () and again.messages is outcome.messages


def test_tool_turns_recalled_for_another_turn_or_scope_are_not_used() -> None:
    other = turn_key(SCOPE, [{**TOOL, "id": "toolu_9"}])
    foreign = turn_key("https://api.deepseek.com/anthropic\nother-client", [TOOL])
    assert other is not None and foreign is not None
    recalled = {other: stored_form([BLOCK]), foreign: stored_form([BLOCK])}
    outcome = RULE.apply(conversation(), context(recalled))
    assert outcome.messages[1]["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "signature": "",
    }
    assert outcome.changes[0].action == "added_thinking"


def test_not_in_thinking_mode_nothing_is_restored_or_looked_up() -> None:
    key = turn_key(SCOPE, [TOOL])
    assert key is not None
    off = {"model": "deepseek-v4-pro", "thinking": {"type": "disabled"}}
    messages = conversation()
    outcome = RULE.apply(messages, context({key: stored_form([BLOCK])}, off))
    assert outcome.messages is messages and outcome.changes == ()
    assert wanted_keys({**off, "messages": messages}, RULE.context(), SCOPE) == []


def test_the_proxy_looks_up_exactly_the_keys_the_rule_reads() -> None:
    second = {**TOOL, "id": "toolu_2"}
    kept = {**TOOL, "id": "toolu_3"}
    messages = [
        *conversation(),
        {"role": "assistant", "content": [{"type": "text", "text": "more"}, second]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2"}]},
        {"role": "assistant", "content": [BLOCK, kept]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_3"}]},
    ]
    ctx = RULE.context()
    adaptive = {"model": "x", "thinking": {"type": "adaptive"}, "messages": messages}
    keys = wanted_keys(adaptive, ctx, SCOPE)
    assert keys == [turn_key(SCOPE, [TOOL]), turn_key(SCOPE, [second])]
    by_model = wanted_keys({"model": "deepseek-reasoner", "messages": messages}, ctx, SCOPE)
    assert by_model == keys
    recalled = {key: stored_form([{**BLOCK, "signature": f"s{n}"}]) for n, key in enumerate(keys)}
    outcome = RULE.apply(messages, context(recalled, adaptive))
    assert [c.action for c in outcome.changes] == ["restored_thinking"] * 2
    assert outcome.messages[3]["content"][0]["signature"] == "s1"


def test_the_deepseek_plans_recall_and_the_anthropic_plan_does_not() -> None:
    for model in ("deepseek-v4-pro", "deepseek-reasoner"):
        recalling = PLANNER.messages(model).recalling()
        assert recalling is not None and recalling[0] is RULE.recall
    assert PLANNER.messages_plans["anthropic"].recalling() is None
    assert PLANNER.messages_plans["passthrough"].recalling() is None


def test_sanitize_body_hands_the_recalled_blocks_to_the_rule() -> None:
    key = turn_key(SCOPE, [TOOL])
    assert key is not None
    raw = orjson.dumps({**REQUEST, "max_tokens": 64, "messages": conversation()})
    plan = PLANNER.messages("deepseek-v4-pro")
    given_blocks = RequestFacts(SCOPE, {key: stored_form([BLOCK])})
    out = sanitize_body(raw, plan, "messages", parsed=orjson.loads(raw), given=given_blocks)
    sent = orjson.loads(out.body)
    assert sent["messages"][1]["content"] == [BLOCK, TOOL]
    assert violations(sent, plan.contract) == []
    plain = orjson.loads(sanitize_body(raw, plan, "messages").body)
    assert plain["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "signature": "",
    }


# --- properties -----------------------------------------------------------------------------

PROPERTIES = settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def bare_turns(messages: list[Any]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if tool_use_ids(m)
        and not any(block_type(b) in THINKING_TYPES for b in content_list(m) or ())
    ]


@PROPERTIES
@given(request=requests(), hits=st.lists(st.booleans(), max_size=20), adaptive=st.booleans())
def test_under_the_deepseek_plan_every_hit_is_restored_exactly(
    request: dict[str, Any], hits: list[bool], adaptive: bool
) -> None:
    """For random Claude-Code-shaped histories: nothing mutated, the contract holds, a second
    run changes nothing, and every turn the stash knows (as the rules leave it) carries exactly
    its stored blocks at its front."""
    payload = {**request, "thinking": {"type": "adaptive" if adaptive else "enabled"}}
    plan = PLANNER.messages("deepseek-v4-pro")
    step = next(ctx for rule, ctx in plan.steps if rule.name == RULE.name)
    keys = wanted_keys(payload, step, SCOPE)
    stored = {
        key: stored_form([{**BLOCK, "signature": f"sig-{n}"}])
        for n, key in enumerate(keys)
        if n < len(hits) and hits[n]
    }
    snapshot = copy.deepcopy(payload)
    result = sanitize_body(
        orjson.dumps(payload), plan, "messages", given=RequestFacts(SCOPE, stored)
    )
    assert payload == snapshot
    assert result.failures == ()
    out = orjson.loads(result.body)
    note(orjson.dumps(out).decode())
    assert violations(out, plan.contract) == []
    restored = [c for c in result.changes if c.action == "restored_thinking"]
    for change in restored:
        message = out["messages"][change.index]
        key = turn_key(SCOPE, message["content"])
        assert key in stored
        blocks = recalled_blocks(stored[key])
        assert blocks is not None
        assert message["content"][: len(blocks)] == blocks
    # every stored turn that reaches the rule unrenamed is restored, not given a placeholder
    placeholders = [c for c in result.changes if c.action == "added_thinking"]
    for change in placeholders:
        key = turn_key(SCOPE, out["messages"][change.index]["content"])
        assert key not in stored
    assert not bare_turns(out["messages"])
    again = run_rules(out["messages"], plan.steps, request=out)
    assert again.changes == ()
