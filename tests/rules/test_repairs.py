"""The repairs (``Check.repair``, gathered in rules/providers/contract/repairs.py): every
catalogued check carries one, and that repair, enforced over a plan with every rule off, makes
the check pass on each of the check's own examples (``Check.examples``)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rules.chat import RULES
from rules.providers.contract import CHECKS, CHECKS_BY_CODE
from rules.providers.contract import responses as responses_contract
from rules.providers.contract.base import Check, Example
from rules.providers.contract.messages import MESSAGES_CHECKS
from rules.providers.contract.repairs import (
    REPAIRS,
    TWIN_APIS,
    TWINS,
    repair_for,
    repair_in,
    twin_of,
)
from rules.providers.planner import (
    Plan,
    compile_messages_plan,
    compile_plan,
    compile_responses_plan,
    with_repair,
)
from rules.providers.profiles import PASSTHROUGH, PROFILES
from rules.providers.sanitize import sanitize_body

#: Per API: its checks, the field its list is in, and what a request of it always carries.
APIS: dict[str, tuple[tuple[Check, ...], str, dict[str, Any]]] = {
    "chat": (CHECKS, "messages", {"model": "some-model"}),
    "responses": (responses_contract.CHECKS, "input", {"model": "some-model"}),
    "messages": (MESSAGES_CHECKS, "messages", {"model": "some-model", "max_tokens": 64}),
}
#: Every (api, check, example), for the parametrized tests.
EXAMPLES = [
    (api, check, example)
    for api, (checks, _, _) in APIS.items()
    for check in checks
    for example in check.examples
]


def payload_of(api: str, example: Example) -> dict[str, Any]:
    """The example as a whole request of ``api``."""
    return {**APIS[api][2], **example.request}


def _off(api: str) -> Plan:
    """A plan where every rule is off (the passthrough profile)."""
    if api == "responses":
        off = dict.fromkeys(REPAIRS_RULES_RESPONSES, False)
        return compile_responses_plan(off)
    if api == "messages":
        return compile_messages_plan(PASSTHROUGH)
    return compile_plan(PASSTHROUGH)


REPAIRS_RULES_RESPONSES = sorted(
    {name for repair in REPAIRS["responses"].values() for name in repair.rules}
    | {"responses-lone-surrogates", "responses-replayed-history", "responses-compaction"}
)


def test_every_catalogued_check_has_a_repair() -> None:
    for api, (checks, _, _) in APIS.items():
        assert set(REPAIRS[api]) == {check.code for check in checks}, api
    assert repair_for("chat", "nonexistent") is None
    assert repair_for("messages", "empty_tool_calls") is None


def test_each_twin_names_a_class_of_its_own_api_once() -> None:
    """A row of ``TWINS`` holds, per API, a class that API catalogues (or none), at least two
    of them, and no class stands in two rows."""
    seen: list[str] = []
    for row in TWINS:
        assert sum(code is not None for code in row) >= 2, row
        for api, code in zip(TWIN_APIS, row, strict=True):
            if code is not None:
                assert code in REPAIRS[api], (api, code)
                seen.append(code)
    assert len(seen) == len(set(seen))


def test_a_class_is_read_in_the_requests_api_own_first_then_its_twin() -> None:
    # MiniMax's orphan words are catalogued as the chat class: a Responses or Messages request
    # gets its own API's orphan repair, which keeps the result as text
    responses = repair_in("responses", "orphan_tool_result")
    assert responses is not None and responses.code == "responses_orphan_output"
    assert responses.rules["responses-orphan-outputs"] == {"action": "text"}
    messages = repair_in("messages", "orphan_tool_result")
    assert messages is not None and messages.code == "messages_orphan_tool_result"
    assert repair_in("chat", "messages_orphan_tool_result") == repair_for(
        "chat", "orphan_tool_result"
    )
    # a class of the request's own API is its own, never a twin's
    assert repair_in("chat", "orphan_tool_result") == repair_for("chat", "orphan_tool_result")
    # no twin, no repair: chat's thinking_type replaces `enabled`, Messages' asks for it
    assert twin_of("messages", "thinking_type") is None
    assert repair_in("messages", "thinking_type") is None
    assert repair_in("responses", "duplicate_tool_call_id") is None
    assert repair_in("chat", "nonexistent") is None


@pytest.mark.parametrize(
    ("api", "check", "example"),
    EXAMPLES,
    ids=[f"{api}-{check.code}-{check.examples.index(example)}" for api, check, example in EXAMPLES],
)
def test_each_repair_makes_its_check_pass_on_its_examples(
    api: str, check: Check, example: Example
) -> None:
    field = APIS[api][1]
    payload = payload_of(api, example)
    options = example.options
    assert check.run(payload[field], payload, options), "the example must break the check"
    plan = _off(api)
    raw = orjson.dumps(payload)
    assert sanitize_body(raw, plan, api).body == raw  # nothing runs without the repair
    repair = repair_for(api, check.code)
    assert repair is not None
    result = sanitize_body(raw, with_repair(plan, repair.rules), api)
    assert result.changed
    assert {change.rule for change in result.changes} <= set(repair.rules)
    repaired = orjson.loads(result.body)
    assert check.run(repaired[field], repaired, options) == []


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
        check = CHECKS_BY_CODE[code]
        for example in check.examples:
            payload = payload_of("chat", example)
            out = orjson.loads(sanitize_body(orjson.dumps(payload), plan).body)
            if not check.run(out["messages"], out, {}):
                continue  # the profile repairs it already
            fixed = sanitize_body(orjson.dumps(payload), with_repair(plan, repair.rules))
            repaired = orjson.loads(fixed.body)
            assert check.run(repaired["messages"], repaired, {}) == [], (name, code)
