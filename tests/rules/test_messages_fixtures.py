"""Every fixture case of every Messages rule (tests/fixtures/messages/<rule>.json), through the
same four checks as the chat rules' fixtures: no mutation, the expected output and changes, a
pass case returns its input list itself, and a second run changes nothing."""

from __future__ import annotations

import pytest

from rules.chat import RULES_BY_NAME
from rules.engine.base import Rule
from rules.messages import MESSAGES_RULES, MESSAGES_RULES_BY_NAME
from rules.responses import RESPONSES_RULES_BY_NAME
from tests.rules.fixtures import MESSAGES_FIXTURE_DIR, Case, check_case, load_cases

FIXTURE_DIR = MESSAGES_FIXTURE_DIR
CASES = load_cases(FIXTURE_DIR)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    check_case(case, MESSAGES_RULES_BY_NAME[case.rule])


def test_every_rule_has_fixtures() -> None:
    files = {path.stem for path in FIXTURE_DIR.glob("*.json")}
    assert files == set(MESSAGES_RULES_BY_NAME), "one fixture file per Messages rule, no other"


@pytest.mark.parametrize("rule", MESSAGES_RULES, ids=[r.name for r in MESSAGES_RULES])
def test_rule_has_pass_and_fail_cases(rule: Rule) -> None:
    cases = [c for c in CASES if c.rule == rule.name]
    passes = [c.expected is None and c.expected_request is None for c in cases]
    assert any(passes), "needs a pass case"
    assert passes.count(False) >= 3, "needs fail cases"
    assert all(c.source.strip() for c in cases), "every case cites its source"


def test_names_are_unique_across_every_rule_set() -> None:
    assert len(MESSAGES_RULES_BY_NAME) == len(MESSAGES_RULES)
    assert not (set(RULES_BY_NAME) | set(RESPONSES_RULES_BY_NAME)) & set(MESSAGES_RULES_BY_NAME)


def test_names_are_prefixed_and_documented() -> None:
    for rule in MESSAGES_RULES:
        assert rule.name.startswith("messages-"), rule.name
        doc = __import__(rule.apply.__module__, fromlist=["_"]).__doc__ or ""
        assert doc.startswith(f"{rule.name}:"), rule.name
        assert all(word in doc for word in ("What:", "Why:", "Safety:")), rule.name
