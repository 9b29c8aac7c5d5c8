"""Load the per-rule fixture files (tests/fixtures/rules/<rule-name>.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "rules"


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

    @property
    def id(self) -> str:
        return f"{self.rule}::{self.name}"


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(FIXTURE_DIR.glob("*.json")):
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
            )
            for raw in data["cases"]
        )
    return cases
