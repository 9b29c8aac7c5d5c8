"""rules.chat.tool_turns: the pairing rules' shared prescan agrees with the full analysis."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chat.tool_turns import analyse, is_paired
from tests.budget import examples
from tests.builders import call, result, turn
from tests.strategies import arbitrary_messages, broken_transcripts, clean_transcripts


def paired_by_analysis(messages: list[Any]) -> bool:
    pairing = analyse(messages)
    return not pairing.strays and all(
        not block.extra and None not in block.answers and not block.unpairable
        for block in pairing.blocks
    )


USER = {"role": "user", "content": "go"}


@pytest.mark.slow
@settings(max_examples=examples(0.8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        arbitrary_messages(),
        clean_transcripts(),
        broken_transcripts(("unanswered_call", "displaced_result", "orphan_result")),
        broken_transcripts(("missing_tool_call_id", "id_collision_in_turn", "junk_call_entries")),
    )
)
def test_the_prescan_says_paired_exactly_when_the_analysis_does(messages: Any) -> None:
    messages = getattr(messages, "messages", messages)
    assert is_paired(messages) == paired_by_analysis(messages)


def test_shapes_that_are_paired() -> None:
    assert is_paired([])
    assert is_paired([USER, {"role": "assistant", "content": "hi"}])
    assert is_paired([USER, turn(call("a"), call("b")), result("b"), result("a")])
    assert is_paired(
        [USER, turn(tool_calls=[None, call("a"), "junk"]), result("a")]
    )  # entries, not calls
    assert is_paired([USER, turn(), USER])  # `tool_calls: []` is empty-tool-calls' business
    assert is_paired([USER, turn(call("x"), call("x")), result("x"), result("x")])


def test_shapes_that_are_not() -> None:
    assert not is_paired([result("a")])
    assert not is_paired([USER, turn(call("a")), USER])
    assert not is_paired([USER, turn(call("a")), result("a"), result("a")])
    assert not is_paired([USER, turn(call("a"), call("b")), result("a"), USER, result("b")])
    assert not is_paired([USER, turn(call("a")), result(None)])
    assert not is_paired([USER, turn(call(None)), USER])  # an id-less call is never answered
    assert not is_paired([USER, turn(call("a")), result("a"), 42, result("b")])


def test_a_block_is_read_as_the_rules_read_it() -> None:
    messages = [
        result("early"),
        USER,
        turn(tool_calls=[call("a"), call(""), call("a"), "junk"]),
        result("a"),
        result("z"),
        result("a"),
        result("a"),
        USER,
        result("late"),
    ]
    pairing = analyse(messages)
    assert pairing.strays == [0, 8]
    (block,) = pairing.blocks
    assert (block.start, block.end, block.ids, block.unpairable) == (2, 7, ["a", "a"], 1)
    assert block.answers == [3, 5]  # the k-th result with an id answers the k-th call with it
    assert block.extra == [4, 6]
    assert block.unanswered() == []
