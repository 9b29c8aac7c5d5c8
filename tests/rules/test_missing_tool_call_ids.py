"""missing-tool-call-ids beyond the fixtures: every recovery is consistent, privacy, scale."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from rules.chat import RULES
from rules.chat.missing_tool_call_ids import NAME, RULE, apply
from rules.engine.base import RuleContext
from tests.builders import result, result_ids, turn, user
from tests.work import assert_linear

CTX = RuleContext()
IDS = ("a", "b", "c")


def test_rule_record() -> None:
    assert RULE.name == NAME == "missing-tool-call-ids"
    assert RULE.default is True
    assert RULE.safety == "safe"
    assert RULE in RULES


def blocks(n: int) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    """Every order of the results of ``n`` calls, and every set of results that lose their id."""
    return [
        (order, lost)
        for order in itertools.permutations(IDS[:n])
        for size in range(n + 1)
        for lost in itertools.combinations(range(n), size)
    ]


@pytest.mark.parametrize(("order", "lost"), [*blocks(1), *blocks(2), *blocks(3)])
def test_every_recovery_is_consistent_and_a_forced_one_is_right(
    order: tuple[str, ...], lost: tuple[int, ...]
) -> None:
    """Exhaustively over blocks of up to three calls: the ids written, with the ids present,
    answer each call once; "one_left" gives back the lost id itself (it is the only completion);
    results in call order get all their ids back. "in_step" reads positions, so results sent
    out of call order whose present ids happen to sit at their calls' positions are paired by
    position: consistent, not necessarily what the client meant (the documented limit)."""
    calls = IDS[: len(order)]
    messages = [user(), turn(*calls)]
    messages += [result(None if k in lost else cid, cid.upper()) for k, cid in enumerate(order)]
    snapshot = copy.deepcopy(messages)
    outcome = apply(messages, CTX)
    assert messages == snapshot
    got = result_ids(outcome.messages)
    if not outcome.changes:
        assert outcome.messages is messages
        assert len(lost) >= 2 or not lost  # one lost id is always recovered
        return
    assert sorted(got) == sorted(calls)  # a bijection, consistent with the ids present
    by = {c.detail["by"] for c in outcome.changes}
    if by == {"one_left"} or list(order) == list(calls):
        assert got == list(order)  # forced, or in call order: the ids the client lost


def test_only_the_changed_messages_are_new_objects_and_changes_hold_no_content() -> None:
    messages = [user(), turn("a", "b"), result("a", "secret A"), result(None, "secret B")]
    outcome = apply(messages, CTX)
    assert outcome.messages[:3] == messages[:3]
    assert all(o is m for o, m in zip(outcome.messages[:3], messages[:3], strict=True))
    assert outcome.messages[3] is not messages[3]
    assert [c.as_dict() for c in outcome.changes] == [
        {
            "rule": NAME,
            "index": 3,
            "action": "recovered_id",
            "tool_call_id": "b",
            "by": "one_left",
            "was": "null",
        }
    ]


def calls(n: int) -> list[str]:
    return [f"call_{i}" for i in range(n)]


def results_without_ids(n: int) -> list[Any]:
    return [user(), turn(*calls(n)), *[result(None, f"{i}") for i in range(n)]]


def padded_ids_reversed(n: int) -> list[Any]:
    return [user(), turn(*calls(n)), *[result(f" {cid}") for cid in reversed(calls(n))]]


def run(messages: list[Any]) -> list[Any]:
    return apply(messages, CTX).messages


def test_two_thousand_results_without_ids_in_step_are_linear() -> None:
    assert result_ids(run(results_without_ids(2000))) == calls(2000)
    assert_linear(results_without_ids, run, 500)


def test_two_thousand_padded_ids_are_linear() -> None:
    assert result_ids(run(padded_ids_reversed(2000))) == list(reversed(calls(2000)))
    assert_linear(padded_ids_reversed, run, 500)
