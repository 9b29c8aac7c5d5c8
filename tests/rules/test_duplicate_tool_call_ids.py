"""duplicate-tool-call-ids beyond the fixtures: copies, new ids, odd arguments, scale, privacy."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from rules.chat import sanitize_messages
from rules.chat.duplicate_tool_call_ids import NAME, RULE, apply
from rules.engine.base import RuleContext
from tests.builders import call, result, turn
from tests.work import assert_linear

CTX = RuleContext()


def ids(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """(every call id in order, every tool_call_id in order)."""
    calls: list[Any] = []
    results: list[Any] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            calls += [c.get("id") for c in m["tool_calls"] if isinstance(c, dict)]
        elif m.get("role") == "tool":
            results.append(m.get("tool_call_id"))
    return calls, results


def check(messages: list[Any]) -> list[Any]:
    """Apply once: input untouched, every id unique, second run a no-op."""
    snapshot = copy.deepcopy(messages)
    outcome = apply(messages, CTX)
    assert messages == snapshot
    calls, results = ids(outcome.messages)
    assert all(n == 1 for n in Counter(c for c in calls if isinstance(c, str) and c).values())
    assert all(n == 1 for n in Counter(r for r in results if isinstance(r, str) and r).values())
    again = apply(outcome.messages, CTX)
    assert again.changes == ()
    assert again.messages is outcome.messages
    return outcome.messages


def test_rule_record() -> None:
    assert RULE.name == NAME == "duplicate-tool-call-ids"
    assert RULE.safety_of("renamed_id") == "safe"
    assert RULE.safety_of("dropped_duplicate_result") == "lossy"  # a second result's text
    assert RULE.default is True
    assert RULE.options == ()
    assert RULE.apply is apply


def test_renaming_writes_into_new_objects_only() -> None:
    """A rename copies the call and the message; writing into the output never reaches the input."""
    first, second = turn(call("x")), turn(call("x", name="g"), call("y"))
    messages = [first, result("x"), second, result("x"), result("y")]
    snapshot = copy.deepcopy(messages)

    out = apply(messages, CTX).messages
    assert out[0] is first
    assert out[1] is messages[1]
    assert out[2] is not second
    renamed, kept = out[2]["tool_calls"]
    assert renamed is not second["tool_calls"][0]
    assert kept is second["tool_calls"][1]  # unchanged calls are shared, not copied
    assert out[3] is not messages[3]
    assert out[4] is messages[4]
    renamed["id"] = "other"
    renamed["function"] = {}
    out[2]["tool_calls"].append(call("z"))
    out[3]["tool_call_id"] = "other"
    assert messages == snapshot


def test_minted_ids_skip_every_id_of_the_request_calls_and_results_alike() -> None:
    messages = [
        turn(call("x")),
        result("x"),
        turn(call("x_d2")),
        result("x_d2"),
        {"role": "user", "content": "later"},
        result("x_d4"),  # an orphan result: its id is taken too
    ]
    for n in range(4):
        messages += [turn(call("x", arguments=f'{{"n": {n}}}')), result("x", f"r{n}")]
    out = check(messages)
    calls, results = ids(out)
    assert calls == ["x", "x_d2", "x_d3", "x_d5", "x_d6", "x_d7"]
    assert results == ["x", "x_d2", "x_d4", "x_d3", "x_d5", "x_d6", "x_d7"]
    # Each result still sits right after the call it answers.
    assert [m["content"] for m in out[-8:] if m["role"] == "tool"] == ["r0", "r1", "r2", "r3"]


def test_a_result_separated_from_its_call_is_outside_the_block() -> None:
    """The block is the contiguous tool run; after a user message the first result per id wins."""
    messages = [
        turn(call("a")),
        {"role": "user", "content": "interrupt"},
        result("a", "late"),
        {"role": "assistant", "content": "hm"},
        result("a", "later copy"),
    ]
    out = check(messages)
    assert out == messages[:4]


def test_a_call_after_a_stray_result_with_its_id_keeps_it_and_its_own_result() -> None:
    """The stray result stands before any call with its id: the call keeps the id and its own
    result answers it; the stray, a second answer by the pairing law, goes."""
    messages = [result("y", "stale"), turn(call("y")), result("y", "fresh")]
    assert check(messages) == [turn(call("y")), result("y", "fresh")]


def test_a_result_sent_before_its_call_answers_the_call_its_turn_left_unanswered() -> None:
    """Issue 24: the k-th result naming X answers the k-th call naming X; a result sent before
    its call (and outside its block) is renamed with the call it answers, for
    displaced-tool-results to move home."""
    messages = [
        turn(call("x", arguments='{"n": 1}')),
        result("x", "one"),
        result("x", "two, early"),
        turn(call("x", arguments='{"n": 2}')),
    ]
    assert check(messages) == [
        turn(call("x", arguments='{"n": 1}')),
        result("x", "one"),
        result("x_d2", "two, early"),
        turn(call("x_d2", arguments='{"n": 2}')),
    ]


def deeply_nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


ODD_ARGUMENTS: list[Any] = [
    {"a": {1, 2}},  # a Python set: cannot be serialized
    {"n": 2**70},  # beyond what orjson serializes
    '{"a": NaN}',  # not JSON: compared as raw text
    "[" * 50_000 + "]" * 50_000,  # nests deeper than any parser allows
    "\ud800",  # a lone surrogate
    None,
    {"nested": deeply_nested(300)},  # deeper than orjson serializes
]


@pytest.mark.parametrize(
    "arguments", ODD_ARGUMENTS, ids=[str(i) for i in range(len(ODD_ARGUMENTS))]
)
def test_odd_arguments_never_raise(arguments: Any) -> None:
    messages = [turn(call("c", arguments=arguments), call("c", arguments=arguments)), result("c")]
    out = check(messages)
    assert len(out[0]["tool_calls"]) in (1, 2)


def test_calls_that_cannot_be_compared_are_renamed_not_dropped() -> None:
    """When in doubt it renames: a renamed replay loses nothing, a wrongly dropped call does."""
    odd = {"a": {1, 2}}
    messages = [turn(call("c", arguments=odd), call("c", arguments=odd)), result("c"), result("c")]
    out = check(messages)
    assert ids(out) == (["c", "c_d2"], ["c", "c_d2"])


def test_non_string_arguments_compare_by_value() -> None:
    messages = [
        turn(call("c", arguments={"a": 1, "b": 2}), call("c", arguments={"b": 2, "a": 1})),
        result("c"),
    ]
    out = check(messages)
    assert [c["id"] for c in out[0]["tool_calls"]] == ["c"]


def test_same_arguments_under_another_function_name_are_not_a_replay() -> None:
    messages = [turn(call("c", name="read"), call("c", name="write")), result("c"), result("c")]
    assert ids(check(messages)) == (["c", "c_d2"], ["c", "c_d2"])


def test_one_and_one_point_zero_are_kept_apart() -> None:
    messages = [turn(call("c", arguments='{"n": 1}'), call("c", arguments='{"n": 1.0}'))]
    assert ids(check(messages))[0] == ["c", "c_d2"]


def test_changes_carry_ids_and_counts_never_arguments_or_results() -> None:
    secret = '{"password": "hunter2"}'
    messages = [
        turn(call("c", arguments=secret), call("c", arguments=secret)),
        result("c", "hunter2"),
        result("c", "hunter2"),
        turn(call("c", arguments=secret)),
        result("c", "hunter2"),
    ]
    for ctx in (CTX, RuleContext(log_content=True)):
        changes = [c.as_dict() for c in apply(messages, ctx).changes]
        assert changes == [
            {
                "rule": NAME,
                "index": 0,
                "action": "dropped_replayed_call",
                "id": "c",
                "function": "read_file",
            },
            {"rule": NAME, "index": 2, "action": "dropped_duplicate_result", "tool_call_id": "c"},
            {"rule": NAME, "index": 3, "action": "renamed_id", "from": "c", "to": "c_d2"},
            {"rule": NAME, "index": 4, "action": "renamed_id", "from": "c", "to": "c_d2"},
        ]
        assert "hunter2" not in repr(changes)


def test_output_is_deterministic() -> None:
    messages = [
        turn(call("t:0")),
        result("t:0"),
        turn(call("t:0"), call("t:0", "g")),
        result("t:0"),
    ]
    first = apply(messages, CTX)
    assert first == apply(copy.deepcopy(messages), CTX)
    assert first == apply(messages, CTX)


def terminal_turns(n: int) -> list[Any]:
    """``n`` turns calling ``terminal:0`` (each with its own arguments) and its result."""
    messages: list[Any] = []
    for i in range(n):
        messages += [
            turn(call("terminal:0", "terminal", f'{{"i": {i}}}')),
            result("terminal:0", f"{i}"),
        ]
    return messages


def one_turn_one_id(n: int) -> list[Any]:
    """One turn of ``n`` calls all named ``x``, every second one an exact replay; ``n`` results."""
    calls = [call("x", arguments=f'{{"n": {i // 2}}}') for i in range(n)]
    return [turn(*calls), *[result("x", f"{i}") for i in range(n)]]


def run(messages: list[Any]) -> Any:
    return apply(messages, CTX)


def test_a_thousand_turns_reusing_one_id_are_renamed_in_linear_time() -> None:
    """Kimi-style terminal:0 in every turn: 2000 messages, each result renamed with its call."""
    out = run(terminal_turns(1000)).messages
    expected = ["terminal:0"] + [f"terminal:0_d{n}" for n in range(2, 1001)]
    assert ids(out) == (expected, expected)
    assert [m["content"] for m in out[1::2]] == [f"{i}" for i in range(1000)]
    assert_linear(terminal_turns, run, 250)


def test_many_calls_sharing_an_id_in_one_turn_are_linear() -> None:
    """2000 calls with one id: half distinct (renamed), half exact replays (dropped)."""
    outcome = run(one_turn_one_id(2000))
    call_ids, result_ids = ids(outcome.messages)
    assert call_ids == ["x"] + [f"x_d{n}" for n in range(2, 1001)]
    assert result_ids == call_ids  # the k-th result answers the k-th kept call
    assert Counter(c.action for c in outcome.changes) == {
        "dropped_replayed_call": 1000,
        "renamed_id": 1998,
        "dropped_duplicate_result": 1000,
    }
    assert_linear(one_turn_one_id, run, 500)


def test_merge_then_dedupe_through_the_pipeline() -> None:
    """hermes E1: a split turn is merged first, so its calls' ids are checked as one turn."""
    messages = [
        {"role": "user", "content": "go"},
        turn(call("functions.read:0", "read", '{"p": "a"}')),
        result("functions.read:0", "A"),
        {"role": "assistant", "content": "Next."},
        turn(call("functions.read:0", "read", '{"p": "b"}')),
        turn(call("functions.read:0", "read", '{"p": "b"}')),
        result("functions.read:0", "B"),
        result("functions.read:0", "B"),
    ]
    snapshot = copy.deepcopy(messages)
    outcome = sanitize_messages(messages)
    assert messages == snapshot
    assert outcome.failures == ()
    assert outcome.messages == [
        {"role": "user", "content": "go"},
        turn(call("functions.read:0", "read", '{"p": "a"}')),
        result("functions.read:0", "A"),
        {
            "role": "assistant",
            "content": "Next.",
            "tool_calls": [call("functions.read:0_d2", "read", '{"p": "b"}')],
        },
        result("functions.read:0_d2", "B"),
    ]
