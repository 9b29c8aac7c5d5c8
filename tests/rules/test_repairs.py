"""The repair table (rules/providers/contract/repairs.py): every catalogued class a rule can
repair has a
repair, and that repair, enforced over a plan with every rule off, makes the class's check pass
on the check's own example (tests/proxy/test_catalogue_rows.py's cases)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.sanitize import sanitize_body
from rules.chat import RULES
from rules.providers.contract import CHECKS_BY_CODE
from rules.providers.contract import responses as responses_contract
from rules.providers.contract.messages import MESSAGES_CHECKS_BY_CODE
from rules.providers.contract.repairs import REPAIRS, UNREPAIRABLE, repair_for
from rules.providers.planner import (
    Plan,
    compile_messages_plan,
    compile_plan,
    compile_responses_plan,
    with_repair,
)
from rules.providers.profiles import PASSTHROUGH, PROFILES
from tests.proxy.test_catalogue_rows import CASES

CALL = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
USER = {"type": "message", "role": "user", "content": "Go on."}
RESPONSES_CASES: dict[str, dict[str, Any]] = {
    "responses_orphan_output": {"input": [USER, {**OUTPUT, "call_id": "call_9"}]},
    "responses_interrupted_output": {"input": [USER, CALL, USER, OUTPUT]},
    # deepseek-ai/awesome-deepseek-integration#740: a reasoning item between call and output
    "responses_nonadjacent_output": {
        "input": [USER, CALL, {"type": "reasoning", "summary": []}, OUTPUT]
    },
    "responses_unanswered_call": {"input": [USER, CALL, USER]},
    # issue 24 / OpenHands/software-agent-sdk#2887: Python quotes in a historical call
    "responses_invalid_arguments": {"input": [USER, {**CALL, "arguments": "{'a': 1}"}, OUTPUT]},
    "responses_duplicate_item": {
        "input": [USER, {**CALL, "id": "fc_1"}, OUTPUT, {**CALL, "id": "fc_1"}, OUTPUT]
    },
    "responses_call_id_too_long": {
        "input": [USER, {**CALL, "call_id": "c" * 80}, {**OUTPUT, "call_id": "c" * 80}]
    },
    "responses_context_management": {
        "input": [USER],
        "context_management": [{"type": "compaction", "compact_threshold": 1000}],
    },
    # continuedev/continue#11994: the message item replayed after its call
    "responses_reasoning_order": {
        "input": [
            USER,
            {"type": "reasoning", "id": "rs_1", "summary": []},
            CALL,
            {"type": "message", "id": "msg_1", "role": "assistant", "content": "Reading."},
            OUTPUT,
        ]
    },
    # anomalyco/opencode#4445: a reasoning item replayed by id with store false
    "responses_unpersisted_item": {
        "store": False,
        "input": [USER, {"type": "reasoning", "id": "rs_1", "summary": []}, USER],
    },
}


def _off(api: str) -> Plan:
    """A plan where every rule is off (the passthrough profile)."""
    if api == "responses":
        off = dict.fromkeys(REPAIRS_RULES_RESPONSES, False)
        return compile_responses_plan(off)
    return compile_plan(PASSTHROUGH)


REPAIRS_RULES_RESPONSES = sorted(
    {name for repair in REPAIRS["responses"].values() for name in repair.rules}
    | {"responses-lone-surrogates", "responses-replayed-history", "responses-compaction"}
)


def test_every_catalogued_check_has_a_repair_or_a_reason() -> None:
    assert set(CHECKS_BY_CODE) == set(REPAIRS["chat"]) | set(UNREPAIRABLE)
    assert set(responses_contract.CHECKS_BY_CODE) == set(REPAIRS["responses"])
    assert repair_for("chat", "nonexistent") is None
    assert repair_for("messages", "empty_tool_calls") is None


@pytest.mark.parametrize(
    ("api", "code"),
    [("chat", code) for code in sorted(REPAIRS["chat"])]
    + [("responses", code) for code in sorted(REPAIRS["responses"])],
)
def test_each_repair_makes_its_check_pass_on_its_example(api: str, code: str) -> None:
    case = CASES[code] if api == "chat" else RESPONSES_CASES[code]
    payload = {"model": "some-model", **case}
    if api == "chat":
        check = CHECKS_BY_CODE[code]
        field = "messages"
    else:
        check = responses_contract.CHECKS_BY_CODE[code]
        field = "input"
    assert check.run(payload[field], payload, {}), "the example must break the check"
    plan = _off(api)
    raw = orjson.dumps(payload)
    assert sanitize_body(raw, plan, api).body == raw  # nothing runs without the repair
    repair = REPAIRS[api][code]
    result = sanitize_body(raw, with_repair(plan, repair.rules), api)
    assert result.changed
    assert {change.rule for change in result.changes} <= set(repair.rules)
    repaired = orjson.loads(result.body)
    assert check.run(repaired[field], repaired, {}) == []


def test_with_repair_keeps_the_plan_and_enforces_the_repair_in_registry_order() -> None:
    plan = compile_plan(PROFILES["deepseek"], report=frozenset({"orphan-tool-results"}))
    assert "orphan-tool-results" in plan.reported
    repaired = with_repair(
        plan, {"orphan-tool-results": {}, "tool-call-content": {"shape": "omit"}}
    )
    names = [rule.name for rule, _ in repaired.steps]
    assert names == [rule.name for rule in RULES if rule.name in {*names}]  # registry order
    assert {rule.name for rule, _ in plan.steps} | {"orphan-tool-results"} == set(names)
    options = {rule.name: ctx.options for rule, ctx in repaired.steps}
    # the plan's own options stay under the repair's (deepseek's kinds, the repair's shape)
    assert options["tool-call-content"]["shape"] == "omit"
    assert options["tool-call-content"]["kinds"] == ["empty_list", "empty_parts"]
    assert repaired.report is None and repaired.reported == frozenset()
    assert (repaired.profile, repaired.contract) == (plan.profile, plan.contract)


def test_with_repair_switches_on_a_rule_the_plan_has_off_with_its_defaults() -> None:
    repaired = with_repair(compile_plan(PASSTHROUGH), {"reasoning-content": {"models": ["*"]}})
    [(rule, ctx)] = repaired.steps
    assert rule.name == "reasoning-content"
    assert ctx.options == {"placeholder": " ", "models": ["*"], "plain_turns": False}


@pytest.mark.parametrize("name", [name for name in PROFILES if name != "passthrough"])
def test_each_repair_works_over_every_profiles_own_plan(name: str) -> None:
    """Recovery runs the repair over the request's plan, whose options may be narrower than
    the provider that answered (a mis-profiled upstream is what recovery is for): every class
    the profile's plan leaves rejected, its repair clears."""
    plan = compile_plan(PROFILES[name])
    for code, repair in sorted(REPAIRS["chat"].items()):
        payload = {"model": "some-model", **CASES[code]}
        check = CHECKS_BY_CODE[code]
        out = orjson.loads(sanitize_body(orjson.dumps(payload), plan).body)
        if not check.run(out["messages"], out, {}):
            continue  # the profile repairs it already
        fixed = sanitize_body(orjson.dumps(payload), with_repair(plan, repair.rules))
        repaired = orjson.loads(fixed.body)
        assert check.run(repaired["messages"], repaired, {}) == [], (name, code)


#: An example per Messages check (Anthropic Messages bodies), each breaking that check only.
_UTU = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
_RES = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
_TH = {"type": "thinking", "thinking": "t", "signature": "s"}
_ON = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


def _u(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def _a(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


_GO = {"type": "text", "text": "go"}
MESSAGES_CASES: dict[str, dict[str, Any]] = {
    "messages_unanswered_tool_use": {"messages": [_u(_GO), _a(_UTU), _u(_GO)]},
    "messages_orphan_tool_result": {"messages": [_u(_GO), _a(_GO), _u(_RES, _GO)]},
    "messages_duplicate_tool_use_id": {
        "messages": [_u(_GO), _a(_UTU), _u(_RES), _a(_UTU), _u(_RES)]
    },
    "messages_tool_use_id_pattern": {
        "messages": [_u(_GO), _a({**_UTU, "id": "a.b"}), _u({**_RES, "tool_use_id": "a.b"})]
    },
    "messages_tool_use_input": {"messages": [_u(_GO), _a({**_UTU, "input": "[]"}), _u(_RES)]},
    "messages_empty_text_block": {"messages": [_u(_GO, {"type": "text", "text": ""})]},
    "messages_empty_message": {"messages": [_u(_GO), _a(), _u(_GO)]},
    "messages_roles_alternate": {"messages": [_u(_GO), _u(_GO)]},
    "messages_first_not_user": {"messages": [_a(_GO), _u(_GO)]},
    "messages_thinking_not_first": {"messages": [_u(_GO), _a(_GO, _TH), _u(_GO)]},
    "messages_tool_loop_thinking": {"messages": [_u(_GO), _a(_UTU), _u(_RES)], **_ON},
    "messages_thinking_disabled": {"messages": [_u(_GO), _a(_TH, _GO)]},
    "messages_thinking_missing": {"messages": [_u(_GO), _a(_UTU), _u(_RES)], **_ON},
    "messages_user_id_pattern": {"messages": [_u(_GO)], "metadata": {"user_id": "a@b"}},
    "messages_thinking_tool_choice": {
        "messages": [_u(_GO)],
        "tool_choice": {"type": "any"},
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        **_ON,
    },
    "messages_prefill": {"messages": [_u(_GO), _a(_GO)]},
    "messages_server_tool": {"messages": [_u(_GO)], "tools": [{"type": "web_search_20250305"}]},
    "messages_duplicate_tool_names": {
        "messages": [_u(_GO)],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}] * 2,
    },
    "messages_thinking_signature": {
        "messages": [_u(_GO), _a({"type": "thinking", "thinking": "t"}, _UTU), _u(_RES)],
        **_ON,
    },
    "messages_tool_result_cache_control": {
        "messages": [
            _u(_GO),
            _a(_UTU),
            _u({**_RES, "content": [{**_GO, "cache_control": {"type": "ephemeral"}}]}),
        ]
    },
    "messages_context_management": {"messages": [_u(_GO)], "context_management": {"edits": []}},
    "messages_thinking_type": {"messages": [_u(_GO)], "thinking": {"type": "adaptive"}},
    # deepseek-ai/awesome-deepseek-agent#167: a system message Claude Code injects
    "messages_system_role": {"messages": [_u(_GO), {"role": "system", "content": "Skills: pdf"}]},
    # griffinmartin/opencode-claude-auth#123: five breakpoints
    "messages_cache_markers": {
        "messages": [_u(*[{**_GO, "cache_control": {"type": "ephemeral"}}] * 5)],
    },
}


def test_every_messages_check_has_a_repair() -> None:
    assert set(MESSAGES_CHECKS_BY_CODE) == set(REPAIRS["messages"]) == set(MESSAGES_CASES)


@pytest.mark.parametrize("code", sorted(MESSAGES_CASES))
def test_each_messages_repair_makes_its_check_pass_on_its_example(code: str) -> None:
    payload = {"model": "some-model", "max_tokens": 64, **MESSAGES_CASES[code]}
    check = MESSAGES_CHECKS_BY_CODE[code]
    options = {"models": ["*"]} if "models" in check.options else {}
    assert check.run(payload["messages"], payload, options), "the example must break the check"
    off = compile_messages_plan(PASSTHROUGH)
    raw = orjson.dumps(payload)
    assert sanitize_body(raw, off, "messages").body == raw  # nothing runs without the repair
    repair = repair_for("messages", code)
    assert repair is not None
    result = sanitize_body(raw, with_repair(off, repair.rules), "messages")
    assert result.changed
    assert (
        check.run(orjson.loads(result.body)["messages"], orjson.loads(result.body), options) == []
    )
