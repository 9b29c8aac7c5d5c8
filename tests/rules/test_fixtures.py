"""Every fixture case of every rule, through the same four checks."""

from __future__ import annotations

import pytest

from rules.chat import RULES, RULES_BY_NAME
from rules.engine.base import Rule
from tests.rules.fixtures import FIXTURE_DIR, Case, check_case, load_cases

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    check_case(case, RULES_BY_NAME[case.rule])


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
