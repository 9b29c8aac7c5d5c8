"""The per-run memo of shared prescans: reused within a run, never fooled, never retained."""

from __future__ import annotations

from typing import Any

from rules.chat import RULES
from rules.engine import memo
from rules.engine.pipeline import default_steps, run_rules

CALLS: list[int] = []


@memo.per_run
def count(messages: list[Any]) -> int:
    CALLS.append(1)
    return len(messages)


def test_same_list_is_answered_once_equal_list_is_not_mistaken() -> None:
    memo.clear()
    CALLS.clear()
    first: list[Any] = [{"role": "user", "content": "a"}]
    assert count(first) == 1
    assert count(first) == 1
    assert len(CALLS) == 1
    second = list(first)  # equal, but another object: asked again
    assert count(second) == 1
    assert len(CALLS) == 2


def test_a_pipeline_run_leaves_nothing_behind() -> None:
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    count(messages)
    run_rules(messages, default_steps(RULES))
    CALLS.clear()
    count(messages)
    assert CALLS == [1], "run_rules must clear every memo when it ends"
