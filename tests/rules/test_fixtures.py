"""Every fixture case of every rule, through the same four checks."""

from __future__ import annotations

import copy

import pytest

from rules import RULES, RULES_BY_NAME, Rule
from tests.rules.fixtures import FIXTURE_DIR, Case, load_cases

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    rule = RULES_BY_NAME[case.rule]
    ctx = rule.context(case.options)
    snapshot = copy.deepcopy(case.input)

    outcome = rule.apply(case.input, ctx)

    # 1. The input is never mutated, nested objects included.
    assert case.input == snapshot
    # 2. The output is what the case expects; a pass case returns its input list itself.
    if case.expected is None:
        assert outcome.messages is case.input
        assert outcome.changes == ()
    else:
        assert outcome.messages == case.expected
    # 3. The changes are the expected ones, in order (each expected dict is a subset).
    actual = [change.as_dict() for change in outcome.changes]
    assert len(actual) == len(case.changes), actual
    for got, want in zip(actual, case.changes, strict=True):
        assert {k: got.get(k) for k in want} == want, got
        assert got["rule"] == case.rule
    # 4. A second run changes nothing.
    again = rule.apply(outcome.messages, ctx)
    assert again.changes == ()
    assert again.messages is outcome.messages


def test_every_rule_has_fixtures() -> None:
    files = {path.stem for path in FIXTURE_DIR.glob("*.json")}
    assert files == set(RULES_BY_NAME), "one fixture file per registered rule, and no other"


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_has_pass_and_fail_cases(rule: Rule) -> None:
    name = rule.name
    cases = [c for c in CASES if c.rule == name]
    assert any(c.expected is None for c in cases), "needs a pass case"
    assert sum(c.expected is not None for c in cases) >= 3, "needs fail cases"
    assert all(c.source.strip() for c in cases), "every case cites its source"
