"""Every fixture case of every Responses rule (tests/fixtures/responses/<rule>.json), through
the same four checks as the chat rules' fixtures: no mutation, the expected output and changes,
a pass case returns its input list itself, and a second run changes nothing."""

from __future__ import annotations

import pytest

from rules.engine.base import Rule
from rules.responses import RESPONSES_RULES, RESPONSES_RULES_BY_NAME
from tests.rules.fixtures import RESPONSES_FIXTURE_DIR as FIXTURE_DIR
from tests.rules.fixtures import Case, check_case, load_cases

CASES = load_cases(FIXTURE_DIR)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    check_case(case, RESPONSES_RULES_BY_NAME[case.rule], field="input")


def test_every_responses_rule_has_fixtures() -> None:
    files = {path.stem for path in FIXTURE_DIR.glob("*.json")}
    assert files == set(RESPONSES_RULES_BY_NAME)


@pytest.mark.parametrize("rule", RESPONSES_RULES, ids=[r.name for r in RESPONSES_RULES])
def test_rule_has_pass_and_fail_cases(rule: Rule) -> None:
    cases = [c for c in CASES if c.rule == rule.name]
    passes = [c.expected is None and c.expected_request is None for c in cases]
    assert any(passes), "needs a pass case"
    assert passes.count(False) >= 3, "needs fail cases"
    assert all(c.source.strip() for c in cases), "every case cites its source"
