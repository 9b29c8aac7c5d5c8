"""The per-run memo of shared prescans: reused within a run, never fooled, never retained."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rules.chat import (
    displaced_tool_results,
    missing_tool_call_ids,
    orphan_tool_results,
    tool_turns,
    unanswered_tool_calls,
)
from rules.engine import memo
from rules.engine.pipeline import run_rules

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
PAIRING = tuple(
    module.RULE
    for module in (
        missing_tool_call_ids,
        displaced_tool_results,
        orphan_tool_results,
        unanswered_tool_calls,
    )
)

CALLS: list[int] = []


@memo.per_run
def count(messages: list[Any]) -> int:
    CALLS.append(1)
    return len(messages)


def test_same_list_is_answered_once_equal_list_is_not_mistaken() -> None:
    CALLS.clear()
    first: list[Any] = [{"role": "user", "content": "a"}]
    with memo.run():
        assert count(first) == 1
        assert count(first) == 1
        assert len(CALLS) == 1
        second = list(first)  # equal, but another object: asked again
        assert count(second) == 1
        assert len(CALLS) == 2
    count(first)  # outside a run: nothing is remembered
    assert len(CALLS) == 3


def test_a_nested_run_has_its_own_memo() -> None:
    CALLS.clear()
    messages: list[Any] = [{"role": "user", "content": "a"}]
    with memo.run():
        count(messages)
        with memo.run():
            count(messages)
        count(messages)
    assert len(CALLS) == 2


def test_a_pipeline_run_remembers_within_the_run_and_keeps_nothing_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pairing rules share one ``is_paired`` answer per list within a run; afterwards no
    memo (and so no payload) is left."""
    asked: list[int] = []
    paired = tool_turns.is_paired.__wrapped__  # type: ignore[attr-defined]

    def counting(messages: list[Any]) -> bool:
        asked.append(1)
        return bool(paired(messages))

    shared = memo.per_run(counting)
    for module in (displaced_tool_results, missing_tool_call_ids, orphan_tool_results):
        monkeypatch.setattr(module, "is_paired", shared)
    monkeypatch.setattr(unanswered_tool_calls, "is_paired", shared)
    messages: list[Any] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    steps = [(rule, replace(rule.context(), woken_by=None)) for rule in PAIRING]  # all run
    run_rules(messages, steps, private=True)
    assert asked == [1]
    assert memo._RUN.get() is None
