"""The one loader and checker of the rules' fixture files: chat rules in
tests/fixtures/rules/<rule-name>.json, Responses rules in tests/fixtures/responses/, Messages rules
in tests/fixtures/messages/.

Every case goes through the same four checks (``check_case``): the input is never mutated, the
output and the changes are the expected ones (a pass case returns its input list itself), and a
second run changes nothing.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rules.engine.base import NO_FACTS, RequestFacts, Rule, RuleContext

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: The chat rules' fixture files.
FIXTURE_DIR = FIXTURES / "rules"
#: The Responses rules' fixture files.
RESPONSES_FIXTURE_DIR = FIXTURES / "responses"
#: The Anthropic Messages rules' fixture files.
MESSAGES_FIXTURE_DIR = FIXTURES / "messages"


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    source: str
    options: dict[str, Any]
    input: list[Any]
    #: ``None`` for a pass case: the rule must return its input list itself, with no change.
    expected: list[Any] | None
    #: Each expected change is a subset of the actual ``Change.as_dict()`` at the same position.
    changes: list[dict[str, Any]]
    #: For a rule that reads the request: its top-level fields other than ``messages``.
    request: dict[str, Any] | None = None
    #: The request fields the rule returns, or ``None`` if it must leave them as they are.
    expected_request: dict[str, Any] | None = None
    #: For a rule that recalls (``Rule.recall``): what the stash holds for each key the rule
    #: asks for, in the order it asks (``None``: nothing stored; a string as stored; anything
    #: else stored as its JSON text), under a fixed scope.
    recalled: list[Any] | None = None
    #: The request's ``anthropic-beta`` values, as the proxy gives them (``RequestFacts.betas``).
    betas: list[str] | None = None

    @property
    def id(self) -> str:
        return f"{self.rule}::{self.name}"


def load_cases(folder: Path = FIXTURE_DIR) -> list[Case]:
    """Every case of every ``<rule-name>.json`` in ``folder``, files in name order."""
    cases: list[Case] = []
    for path in sorted(folder.glob("*.json")):
        # The standard library, not orjson: lone-surrogates' cases hold unpaired \\uD8xx escapes.
        data = json.loads(path.read_bytes())
        rule = data["rule"]
        assert path.stem == rule, f"{path.name} must be named after its rule {rule!r}"
        cases.extend(
            Case(
                rule=rule,
                name=raw["name"],
                source=raw["source"],
                options=raw.get("options", {}),
                input=raw["input"],
                expected=raw.get("expected"),
                changes=raw.get("changes", []),
                request=raw.get("request"),
                expected_request=raw.get("expected_request"),
                recalled=raw.get("recalled"),
                betas=raw.get("betas"),
            )
            for raw in data["cases"]
        )
    return cases


#: The scope a fixture's ``recalled`` values are stored under.
SCOPE = "https://fixture.invalid\nscope"


def given_for(case: Case, rule: Rule, ctx: RuleContext, field: str = "messages") -> RequestFacts:
    """What the proxy would give the rule for ``case``: its ``recalled`` values under the keys
    the rule asks for (``Rule.recall``), in order, and its ``betas``."""
    betas = frozenset(case.betas or ())
    if case.recalled is None:
        return RequestFacts(betas=betas) if betas else NO_FACTS
    assert rule.recall is not None, "recalled values for a rule that does not recall"
    request = {**(case.request or {}), field: case.input}
    keys = rule.recall.keys(request, ctx, SCOPE, 0)
    assert len(keys) == len(case.recalled), keys
    stored = {
        key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        for key, value in zip(keys, case.recalled, strict=True)
        if value is not None
    }
    return RequestFacts(SCOPE, stored, betas)


def check_case(case: Case, rule: Rule, *, field: str = "messages") -> None:
    """The four checks; ``field`` is where the request holds the list (``input`` for Responses)."""
    ctx = rule.context(case.options)
    if rule.reads_request:
        ctx = replace(ctx, request={**(case.request or {}), field: case.input})
    else:
        assert case.request is None and case.expected_request is None, "not a request rule"
    ctx = replace(ctx, given=given_for(case, rule, ctx, field))
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
        assert {k: v for k, v in outcome.request.items() if k != field} == case.expected_request
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
