"""Every fixture case of every Messages rule (tests/fixtures/anthropic/<rule>.json), through the
same four checks as the chat rules' fixtures: no mutation, the expected output and changes, a
pass case returns its input list itself, and a second run changes nothing."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

from rules.anthropic import ANTHROPIC_RULES, ANTHROPIC_RULES_BY_NAME
from rules.chat import RULES_BY_NAME
from rules.engine.base import NOTHING_GIVEN, Given, Rule, RuleContext
from rules.responses import RESPONSES_RULES_BY_NAME
from tests.rules.fixtures import Case

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "anthropic"


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(FIXTURE_DIR.glob("*.json")):
        data = json.loads(path.read_bytes())  # the standard library: lone surrogate escapes
        assert path.stem == data["rule"], f"{path.name} must be named after its rule"
        cases.extend(
            Case(
                rule=data["rule"],
                name=raw["name"],
                source=raw["source"],
                options=raw.get("options", {}),
                input=raw["input"],
                expected=raw.get("expected"),
                changes=raw.get("changes", []),
                request=raw.get("request"),
                expected_request=raw.get("expected_request"),
                recalled=raw.get("recalled"),
            )
            for raw in data["cases"]
        )
    return cases


CASES = load_cases()
#: The scope a fixture's ``recalled`` values are stored under.
SCOPE = "https://fixture.invalid\nscope"


def given_for(case: Case, rule: Rule, ctx: RuleContext) -> Given:
    """What the proxy would give the rule for ``case``: its ``recalled`` values under the keys
    the rule asks for (``Rule.recall``), in order."""
    if case.recalled is None:
        return NOTHING_GIVEN
    assert rule.recall is not None, "recalled values for a rule that does not recall"
    request = {**(case.request or {}), "messages": case.input}
    keys = rule.recall.keys(request, ctx, SCOPE)
    assert len(keys) == len(case.recalled), keys
    stored = {
        key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        for key, value in zip(keys, case.recalled, strict=True)
        if value is not None
    }
    return Given(SCOPE, stored)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    rule = ANTHROPIC_RULES_BY_NAME[case.rule]
    ctx = rule.context(case.options)
    if rule.reads_request:
        ctx = replace(ctx, request={**(case.request or {}), "messages": case.input})
    else:
        assert case.request is None and case.expected_request is None, "not a request rule"
    ctx = replace(ctx, given=given_for(case, rule, ctx))
    snapshot = copy.deepcopy((case.input, case.request))

    outcome = rule.apply(case.input, ctx)

    assert (case.input, case.request) == snapshot
    if case.expected is None:
        assert outcome.messages is case.input
    else:
        assert outcome.messages == case.expected
    if case.expected_request is None:
        assert outcome.request is None
    else:
        assert outcome.request is not None
        got = {k: v for k, v in outcome.request.items() if k != "messages"}
        assert got == case.expected_request
    if case.expected is None and case.expected_request is None:
        assert outcome.changes == ()
    actual = [change.as_dict() for change in outcome.changes]
    assert len(actual) == len(case.changes), actual
    for got_change, want in zip(actual, case.changes, strict=True):
        assert {k: got_change.get(k) for k in want} == want, got_change
        assert got_change["rule"] == case.rule
    if outcome.request is not None:
        ctx = replace(ctx, request=outcome.request)
    again = rule.apply(outcome.messages, ctx)
    assert again.changes == ()
    assert again.messages is outcome.messages
    assert again.request is None


def test_every_rule_has_fixtures() -> None:
    files = {path.stem for path in FIXTURE_DIR.glob("*.json")}
    assert files == set(ANTHROPIC_RULES_BY_NAME), "one fixture file per Messages rule, no other"


@pytest.mark.parametrize("rule", ANTHROPIC_RULES, ids=[r.name for r in ANTHROPIC_RULES])
def test_rule_has_pass_and_fail_cases(rule: Rule) -> None:
    cases = [c for c in CASES if c.rule == rule.name]
    passes = [c.expected is None and c.expected_request is None for c in cases]
    assert any(passes), "needs a pass case"
    assert passes.count(False) >= 3, "needs fail cases"
    assert all(c.source.strip() for c in cases), "every case cites its source"


def test_names_are_unique_across_every_rule_set() -> None:
    assert len(ANTHROPIC_RULES_BY_NAME) == len(ANTHROPIC_RULES)
    assert not (set(RULES_BY_NAME) | set(RESPONSES_RULES_BY_NAME)) & set(ANTHROPIC_RULES_BY_NAME)


def test_names_are_prefixed_and_documented() -> None:
    for rule in ANTHROPIC_RULES:
        assert rule.name.startswith("messages-"), rule.name
        doc = __import__(rule.apply.__module__, fromlist=["_"]).__doc__ or ""
        assert doc.startswith(f"{rule.name}:"), rule.name
        assert all(word in doc for word in ("What:", "Why:", "Safety:")), rule.name
