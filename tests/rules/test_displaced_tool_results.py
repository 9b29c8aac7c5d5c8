"""displaced-tool-results beyond the fixtures: identity, privacy, the pipeline, scale."""

from __future__ import annotations

import copy
from typing import Any

from rules.chat import RULES, sanitize_messages
from rules.chat.displaced_tool_results import NAME, RULE, apply
from rules.engine.base import RuleContext
from tests.builders import result, result_ids, say, turn, user
from tests.work import assert_linear

CTX = RuleContext()


def test_rule_record() -> None:
    assert RULE.name == NAME == "displaced-tool-results"
    assert RULE.default is True
    assert RULE.safety == "safe"
    assert RULE in RULES


def test_the_moved_message_is_the_clients_own_object_and_the_input_is_untouched() -> None:
    messages = [user(), turn("a", "b"), result("a"), user("and?"), result("b"), say("done")]
    snapshot = copy.deepcopy(messages)
    out = apply(messages, CTX).messages
    assert messages == snapshot
    assert [id(m) for m in out] == [id(messages[i]) for i in (0, 1, 2, 4, 3, 5)]


def test_changes_carry_ids_and_positions_never_content() -> None:
    messages = [user("secret question"), turn("a"), user("secret aside"), result("a", "secret")]
    changes = [c.as_dict() for c in apply(messages, CTX).changes]
    assert changes == [
        {
            "rule": NAME,
            "index": 3,
            "action": "moved_result",
            "tool_call_id": "a",
            "call_at": 1,
            "to": 2,
        }
    ]
    assert "secret" not in repr(changes)


def test_through_the_pipeline_a_reused_id_result_goes_to_the_call_that_kept_the_id() -> None:
    """Kimi terminal:0 in two turns, the first turn's result displaced behind the second: the
    second call and its result are renamed first, then the first result goes home."""
    messages = [
        user(),
        turn("terminal:0"),
        user("status?"),
        turn("terminal:0"),
        result("terminal:0", "second"),
        user("and the first?"),
        result("terminal:0", "first"),
    ]
    out = sanitize_messages(messages).messages
    assert out == [
        user(),
        turn("terminal:0"),
        result("terminal:0", "first"),
        user("status?"),
        turn("terminal:0_d2"),
        result("terminal:0_d2", "second"),
        user("and the first?"),
    ]


def test_through_the_pipeline_a_displaced_result_of_a_renamed_call_is_kept() -> None:
    messages = [
        user(),
        turn("terminal:0"),
        result("terminal:0", "first"),
        user("again"),
        turn("terminal:0"),
        user("well?"),
        result("terminal:0", "second"),
    ]
    out = sanitize_messages(messages).messages
    assert result("terminal:0_d2", "second") in out


def displaced(n: int) -> list[Any]:
    """``n`` turns whose result comes after the next user message."""
    messages: list[Any] = []
    for i in range(n):
        messages += [turn(f"c{i}"), user(f"{i}"), result(f"c{i}", f"{i}")]
    return messages


def one_id_everywhere(n: int) -> list[Any]:
    """``n`` turns calling ``x``, then ``n`` stray results for ``x``."""
    messages: list[Any] = []
    for _ in range(n):
        messages += [turn("x"), user()]
    return messages + [result("x", f"{i}") for i in range(n)]


def run(messages: list[Any]) -> Any:
    return apply(messages, CTX)


def test_a_thousand_displaced_results_move_home_in_linear_time() -> None:
    out = run(displaced(1000)).messages
    assert out[1::3] == [result(f"c{i}", f"{i}") for i in range(1000)]
    assert_linear(displaced, run, 250)


def test_an_id_shared_by_a_thousand_calls_is_ambiguous_and_cheap() -> None:
    """Run alone (no renaming before it): every stray result names a thousand earlier calls."""
    messages = one_id_everywhere(1000)
    outcome = run(messages)
    assert outcome.messages is messages
    assert result_ids(messages) == ["x"] * 1000
    assert_linear(one_id_everywhere, run, 250)
