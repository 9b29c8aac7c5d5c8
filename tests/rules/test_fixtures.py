"""Every fixture case of every rule, through the same four checks."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from rules.chat import RULES, RULES_BY_NAME
from rules.engine.base import Rule
from tests.rules.fixtures import FIXTURE_DIR, Case, load_cases

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    rule = RULES_BY_NAME[case.rule]
    ctx = rule.context(case.options)
    if rule.reads_request:
        ctx = replace(ctx, request={**(case.request or {}), "messages": case.input})
    else:
        assert case.request is None and case.expected_request is None, "not a request rule"
    snapshot = copy.deepcopy((case.input, case.request))

    outcome = rule.apply(case.input, ctx)

    # 1. The input is never mutated, nested objects included.
    assert (case.input, case.request) == snapshot
    # 2. The output is what the case expects; a pass case returns its input list itself.
    if case.expected is None:
        assert outcome.messages is case.input
    else:
        assert outcome.messages == case.expected
    if case.expected_request is None:
        assert outcome.request is None
    else:
        assert outcome.request is not None
        assert {k: v for k, v in outcome.request.items() if k != "messages"} == (
            case.expected_request
        )
    if case.expected is None and case.expected_request is None:
        assert outcome.changes == ()
    # 3. The changes are the expected ones, in order (each expected dict is a subset).
    actual = [change.as_dict() for change in outcome.changes]
    assert len(actual) == len(case.changes), actual
    for got, want in zip(actual, case.changes, strict=True):
        assert {k: got.get(k) for k in want} == want, got
        assert got["rule"] == case.rule
    # 4. A second run changes nothing.
    if outcome.request is not None:
        ctx = replace(ctx, request=outcome.request)
    again = rule.apply(outcome.messages, ctx)
    assert again.changes == ()
    assert again.messages is outcome.messages
    assert again.request is None


def test_every_rule_has_fixtures() -> None:
    files = {path.stem for path in FIXTURE_DIR.glob("*.json")}
    assert files == set(RULES_BY_NAME), "one fixture file per registered rule, and no other"


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_has_pass_and_fail_cases(rule: Rule) -> None:
    name = rule.name
    cases = [c for c in CASES if c.rule == name]
    passes = [c.expected is None and c.expected_request is None for c in cases]
    assert any(passes), "needs a pass case"
    assert passes.count(False) >= 3, "needs fail cases"
    assert all(c.source.strip() for c in cases), "every case cites its source"
