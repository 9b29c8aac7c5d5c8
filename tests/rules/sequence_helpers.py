"""Shared by the sequence rules' tests: run a rule and a check, assert purity and idempotence."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson

from rules.engine.base import Outcome, Rule, RuleContext
from rules.providers.contract import CHECKS_BY_CODE


def run_pure(rule: Rule, messages: list[Any], ctx: RuleContext | None = None) -> Outcome:
    """Apply ``rule``: no mutation, JSON out, a second run changes nothing."""
    ctx = ctx if ctx is not None else rule.context()
    snapshot = copy.deepcopy(messages)
    outcome = rule.apply(messages, ctx)
    assert messages == snapshot, f"{rule.name} mutated its input"
    orjson.dumps(outcome.messages)
    if not outcome.changes:
        assert outcome.messages is messages, f"{rule.name} returned a new list without changes"
    again = rule.apply(outcome.messages, ctx)
    assert again.changes == (), f"{rule.name} is not idempotent: {again.changes}"
    assert again.messages is outcome.messages
    return outcome


def assert_folds_pairwise(rule: Rule, run: list[Any]) -> None:
    """Merging a run at once gives what merging it two messages at a time gives: one message."""
    ctx = rule.context()
    at_once = rule.apply(run, ctx).messages
    folded = [run[0]]
    for later in run[1:]:
        folded = rule.apply([folded[0], later], ctx).messages
    assert at_once == folded
    assert len(at_once) == 1


def found(code: str, messages: list[Any], **overrides: Any) -> list[Any]:
    """What the check ``code`` reports on ``messages`` (``(index, text)`` pairs)."""
    check = CHECKS_BY_CODE[code]
    return [(v.index, v.message) for v in check.run(messages, {"messages": messages}, overrides)]


def texts(value: Any) -> Iterator[str]:
    """Every non-empty string inside a content (strings, text parts, nested junk), except a
    part's ``type``: it names the structure (``"text"``), which folding text parts into one
    string rightly removes."""
    if isinstance(value, str):
        if value:
            yield value
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != "type":
                yield from texts(item)
