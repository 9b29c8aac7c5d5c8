"""consecutive-assistant-messages beyond the fixtures: copies, fold order, junk, scale, privacy."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules.chat.consecutive_assistant_messages import NAME, RULE, apply
from rules.engine.base import RuleContext
from tests.builders import call, result, say, turn, user
from tests.rules.sequence_helpers import assert_folds_pairwise
from tests.work import assert_linear

CTX = RuleContext()


def test_rule_record() -> None:
    assert RULE.name == NAME == "consecutive-assistant-messages"
    assert RULE.safety == "safe"
    assert RULE.default is True
    assert RULE.options == ()
    assert RULE.apply is apply


def test_the_merged_message_owns_its_top_level_and_lists() -> None:
    """Writing into the output must never reach the input (hermes #80498)."""
    first = say([{"type": "text", "text": "a"}], tool_calls=[call("c1")])
    second = say("b", tool_calls=[call("c2")])
    messages = [{"role": "user", "content": "hi"}, first, second]
    snapshot = copy.deepcopy(messages)

    merged = apply(messages, CTX).messages[1]
    assert merged is not first
    assert merged["tool_calls"] is not first["tool_calls"]
    assert merged["content"] is not first["content"]
    merged["tool_calls"].append(call("c3"))
    merged["content"].append({"type": "text", "text": "c"})
    merged["extra"] = True
    assert messages == snapshot


def test_untouched_messages_are_passed_through_by_identity() -> None:
    user = {"role": "user", "content": "hi"}
    tool = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    messages = [user, say("a"), say(None, tool_calls=[call("c1")]), tool]
    out = apply(messages, CTX).messages
    assert out[0] is user
    assert out[2] is tool


# Each run, merged at once, equals folding its messages pairwise from the left.
RUNS: list[list[Any]] = [
    ["a", "b", "c"],
    ["a", [{"type": "text", "text": "b"}], "c"],
    ["a", "b", [{"type": "image_url", "image_url": {"url": "u"}}]],
    [[{"type": "text", "text": "a"}], "b", "c"],
    [None, "", "a", None, "b"],
    ["", [], "a", [{"type": "text", "text": ""}]],
    [None, None, None],
]


@pytest.mark.parametrize("contents", RUNS, ids=[str(i) for i in range(len(RUNS))])
def test_a_long_run_equals_a_pairwise_fold(contents: list[Any]) -> None:
    assert_folds_pairwise(RULE, [say(c) for c in contents])


def test_texts_and_parts_from_a_run_of_mixed_contents() -> None:
    part = {"type": "image_url", "image_url": {"url": "data:,"}}
    out = apply([say("a"), say("b"), say([part]), say("c")], CTX)
    assert out.messages == [
        say(
            [
                {"type": "text", "text": "a\nb"},
                part,
                {"type": "text", "text": "c"},
            ]
        )
    ]


def test_uncombinable_content_ends_the_run_only_where_it_must() -> None:
    """An object content cannot be joined with text, but absorbs an empty neighbour."""
    messages = [
        {"role": "user", "content": "hi"},
        say("a"),
        say({"odd": 1}),
        say(None, tool_calls=[call("c1")]),
        say("b"),
        say(7),
    ]
    outcome = apply(messages, CTX)
    assert outcome.messages == [
        {"role": "user", "content": "hi"},
        say("a"),
        say({"odd": 1}, tool_calls=[call("c1")]),
        say("b"),
        say(7),
    ]
    assert [c.as_dict() for c in outcome.changes] == [
        {
            "rule": NAME,
            "index": 2,
            "action": "merged",
            "merged_indices": [2, 3],
            "tool_calls": 1,
        }
    ]
    again = apply(outcome.messages, CTX)
    assert again.changes == ()
    assert again.messages is outcome.messages


JUNK: list[list[Any]] = [
    [],
    [None, 1, "x", [], {}],
    [{"role": "assistant"}, {"role": "assistant"}],
    [{"role": "assistant", "tool_calls": "nope"}, {"role": "assistant", "tool_calls": 3}],
    [{"role": "assistant", "content": 0}, {"role": "assistant", "content": False}],
    [{"role": "assistant", "content": [None, 3]}, {"role": "assistant", "content": "t"}],
    [
        {"role": "assistant", "reasoning_content": 5},
        {"role": "assistant", "reasoning_content": "r"},
    ],
    [{"role": ["assistant"]}, {"role": "assistant"}, {"role": None}],
]


@pytest.mark.parametrize("messages", JUNK, ids=[str(i) for i in range(len(JUNK))])
def test_junk_never_raises_and_is_never_mutated(messages: list[Any]) -> None:
    snapshot = copy.deepcopy(messages)
    outcome = apply(messages, CTX)
    assert messages == snapshot
    again = apply(outcome.messages, CTX)
    assert again.changes == ()
    assert again.messages is outcome.messages


def test_empty_messages_on_both_sides_keep_the_first_shape() -> None:
    out = apply([{"role": "assistant"}, say(None, tool_calls=[])], CTX).messages
    assert out == [{"role": "assistant"}]
    out = apply([say(""), {"role": "assistant", "reasoning_content": "r"}], CTX).messages
    assert out == [say("", reasoning_content="r")]


def test_changes_carry_indices_and_counts_never_text() -> None:
    secret = "my password is hunter2"
    messages = [
        say(secret, reasoning_content=secret),
        say(None, tool_calls=[call("c1", name="bash")]),
    ]
    for ctx in (CTX, RuleContext(log_content=True)):
        (change,) = apply(messages, ctx).changes
        assert change.as_dict() == {
            "rule": NAME,
            "index": 0,
            "action": "merged",
            "merged_indices": [0, 1],
            "tool_calls": 1,
        }


def test_output_is_deterministic() -> None:
    messages = [say("a", tool_calls=[call("c1")]), say("b", tool_calls=[call("c2")])]
    assert apply(messages, CTX) == apply(copy.deepcopy(messages), CTX)


def one_run(n: int) -> list[Any]:
    """``n`` assistants in a row, 1 KiB of text and a call each."""
    return [say("x" * 1024, tool_calls=[call(f"c{i}")]) for i in range(n)]


def split_turns(turns: int) -> list[Any]:
    """``turns`` times: a user, a text-only assistant, an assistant calling, the result."""
    messages: list[Any] = []
    for i in range(turns):
        messages += [user(f"q{i}"), say("Let me look."), turn(f"c{i}"), result(f"c{i}", "r")]
    return messages


def test_a_2000_message_run_is_merged_in_linear_time() -> None:
    """One run of 2000 assistants with 1 KiB each: joined once, not re-copied per message."""
    outcome = apply(one_run(2000), CTX)
    (merged,) = outcome.messages
    assert merged["content"] == "\n".join(["x" * 1024] * 2000)
    assert [c["id"] for c in merged["tool_calls"]] == [f"c{i}" for i in range(2000)]
    assert outcome.changes[0].detail["tool_calls"] == 2000
    assert_linear(one_run, lambda messages: apply(messages, CTX), 500)


def test_a_2000_message_transcript_of_split_turns_is_linear() -> None:
    outcome = apply(split_turns(500), CTX)
    assert len(outcome.messages) == 1500
    assert len(outcome.changes) == 500
    assert outcome.changes[-1].index == 1997
    assert_linear(split_turns, lambda messages: apply(messages, CTX), 125)
