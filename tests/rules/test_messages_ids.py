"""The Messages id rules stay linear on hostile input: one id reused by every turn
(messages-duplicate-tool-use-ids) and many ids that all sanitize to the same one
(messages-tool-use-id-charset) each cost work in proportion to the turns, counted in executed
lines (tests/work.py), not a quadratic search for the next free suffix."""

from __future__ import annotations

from typing import Any

from rules.engine.ids import Minter
from rules.messages import duplicate_tool_use_ids, tool_use_id_charset
from tests.work import assert_linear


def turns(ids: list[str]) -> list[dict[str, Any]]:
    """A user turn, then per id an assistant calling it and the user answering it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for tid in ids:
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tid, "name": "f", "input": {}}],
            }
        )
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid}]})
    return messages


def test_one_id_reused_by_every_turn_costs_linear_work() -> None:
    rule = duplicate_tool_use_ids.RULE
    ctx = rule.context()
    outcome = rule.apply(turns(["t"] * 50), ctx)
    assert len(outcome.changes) > 0
    assert_linear(lambda n: turns(["t"] * n), lambda m: rule.apply(m, ctx), 200)


def test_ids_that_sanitize_alike_cost_linear_work() -> None:
    rule = tool_use_id_charset.RULE
    ctx = rule.context()

    def alike(n: int) -> list[dict[str, Any]]:
        return turns([f"x{chr(0x100 + i)}" for i in range(n)])  # every id sanitizes to x_

    assert len(rule.apply(alike(50), ctx).changes) > 0
    assert_linear(alike, lambda m: rule.apply(m, ctx), 200)


def test_the_minter_gives_the_smallest_free_suffix() -> None:
    minter = Minter({"a", "a_d2", "a_d4"})
    assert [minter.mint("a") for _ in range(3)] == ["a_d3", "a_d5", "a_d6"]
    assert minter.mint("b") == "b"
    assert minter.mint("b") == "b_d2"
