"""replayed-history beyond the fixtures: the issue's seed case and growth series, through the
whole pipeline to a strict provider, doubled clean transcripts, junk, scale."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rules.chat import RULES, replayed_history, sanitize_messages
from rules.chat.replayed_history import NAME, RULE, apply, message_anchors
from rules.engine import replay
from rules.engine.base import WorkBudgetExceeded
from rules.engine.pipeline import run_rules
from tests.builders import call, result, say, turn, user
from tests.fake_upstream import strict_errors
from tests.strategies import arbitrary_messages, clean_transcripts
from tests.work import assert_linear

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


#: The seed report's correct history: 6 messages.
SEED_TRUE = [
    user("turn 1"),
    turn("call_1"),
    result("call_1"),
    say("done "),
    user("turn 2"),
    say("done 2"),
]
#: As the agent stored it: the prefix twice (the first copy without the trailing space).
SEED = [
    user("turn 1"),
    turn("call_1"),
    result("call_1"),
    say("done"),
    user("turn 2"),
    *SEED_TRUE,
]


def test_rule_record_and_default() -> None:
    assert RULE.name == NAME == "replayed-history"
    assert RULE.default is True and RULE.safety == "safe"
    assert RULE in RULES


def test_the_seed_case_collapses_to_six_plus_one_and_passes_a_strict_provider() -> None:
    messages = [*SEED, user("turn 3")]
    assert strict_errors({"messages": messages})  # Duplicate value for 'tool_call_id'
    snapshot = copy.deepcopy(messages)
    result = sanitize_messages(messages)
    assert messages == snapshot
    assert result.messages == [*SEED_TRUE, user("turn 3")]
    assert len(result.messages) == 7
    assert strict_errors({"messages": result.messages}) == []
    (change,) = [c for c in result.changes if c.rule == NAME]
    assert change.index == 0
    assert change.detail["count"] == 5 and change.detail["kept_from"] == 5
    assert change.detail["ids"] == ["call_1"]
    assert change.detail["est_tokens_saved"] > 0
    assert change.detail["estimate"] == "serialized characters / 4"
    # Only the collapse: the other rules have nothing left to do.
    assert {c.rule for c in result.changes} == {NAME}


def stored_history(turns: int) -> tuple[list[Any], list[Any]]:
    """(what a doubling agent stores after ``turns`` turns, the true history): 6 messages, then
    at every turn the stored history, a reshaped copy of it (sidecar fields, whitespace) and
    one new user message: 6 -> 13 -> 27 -> 55."""
    true: list[Any] = [
        {"role": "system", "content": "be brief"},
        user("list the files"),
        turn("call_abc123"),
        result("call_abc123", "a.txt\nb.txt"),
        say("two files"),
        user("thanks"),
    ]
    stored = list(true)
    for step in range(1, turns + 1):
        reshaped = [
            {
                **m,
                "timestamp": step,
                "api_content": m.get("content"),
                **({"content": f" {m['content']}  "} if isinstance(m.get("content"), str) else {}),
            }
            for m in stored
        ]
        new = user(f"turn {step}")
        stored = [*stored, *reshaped, new]
        true = [*true, new]
    return stored, true


def test_the_growth_series_collapses_to_the_true_length_at_every_step() -> None:
    lengths = []
    for turns in range(4):
        stored, true = stored_history(turns)
        lengths.append(len(stored))
        result = sanitize_messages(stored)
        assert len(result.messages) == len(true) == 6 + turns
        assert [m.get("role") for m in result.messages] == [m["role"] for m in true]
        assert [" ".join(str(m.get("content")).split()) for m in result.messages] == [
            " ".join(str(m.get("content")).split()) for m in true
        ]
        assert strict_errors({"messages": result.messages}) == []
        collapsed = sum(c.detail["count"] for c in result.changes if c.rule == NAME)
        assert collapsed == len(stored) - len(true)
    assert lengths == [6, 13, 27, 55]


def test_the_replay_kept_is_the_one_the_conversation_continues_from() -> None:
    first = [user("go"), {**turn("call_9"), "timestamp": 1}, result("call_9")]
    second = [user("go"), {**turn("call_9"), "timestamp": 2}, result("call_9")]
    out = apply([*first, *second, user("next")], RULE.context()).messages
    assert out == [*second, user("next")]
    assert out[1] is second[1]


def test_a_user_asking_the_same_question_twice_with_fresh_ids_is_kept() -> None:
    messages = [
        user("run the tests"),
        turn(call("call_1", "pytest")),
        result("call_1", "1 failed"),
        say("one failure"),
        user("run the tests"),
        turn(call("call_2", "pytest")),
        result("call_2", "1 failed"),
        say("one failure"),
    ]
    assert apply(messages, RULE.context()).messages is messages


def test_a_tripled_block_collapses_to_one_copy() -> None:
    block = [user("q"), turn("call_x"), result("call_x")]
    out = apply([*block, *block, *block, user("n")], RULE.context())
    assert out.messages == [*block, user("n")]
    assert [c.detail["count"] for c in out.changes] == [3, 3]


def test_kimi_counter_ids_are_no_signal() -> None:
    assert message_anchors(turn("functions.ls:0")) == []
    assert message_anchors(turn("call_1")) == ["call_1"]


@pytest.mark.slow
@SETTINGS
@given(clean_transcripts(min_turns=1, max_turns=3), st.integers(1, 3))
def test_a_doubled_clean_transcript_comes_back_whole(clean: list[Any], turns: int) -> None:
    assume(any(message_anchors(m) for m in clean))
    stored, true = list(clean), list(clean)
    for step in range(turns):
        new = user(f"new {step}")
        stored = [*stored, *({**m, "timestamp": step} for m in stored), new]
        true = [*true, new]
    snapshot = copy.deepcopy(stored)
    out = apply(stored, RULE.context())
    assert stored == snapshot
    assert [{k: v for k, v in m.items() if k != "timestamp"} for m in out.messages] == true
    assert apply(out.messages, RULE.context()).changes == ()


@pytest.mark.slow
@SETTINGS
@given(clean_transcripts())
def test_clean_transcripts_pass_untouched(clean: list[Any]) -> None:
    outcome = apply(clean, RULE.context())
    assert outcome.messages is clean and outcome.changes == ()


@pytest.mark.slow
@SETTINGS
@given(arbitrary_messages(max_size=12))
def test_junk_never_raises_never_mutates_and_is_idempotent(messages: list[Any]) -> None:
    doubled = [*messages, *messages]
    for value in (messages, doubled):
        snapshot = copy.deepcopy(value)
        outcome = apply(value, RULE.context())
        assert value == snapshot
        again = apply(outcome.messages, RULE.context())
        assert again.changes == () and again.messages is outcome.messages


def test_403_stored_messages_collapse_within_four_work_units_each(monkeypatch: Any) -> None:
    stored, _ = stored_history(5)  # 6 -> 13 -> 27 -> 55 -> 111 -> 223 messages
    stored = [*stored, *stored[:180]]  # 403 messages: a partial copy of the prefix appended
    # The rule's own work count (pairs tried, keys compared), no floor: past it, it raises.
    monkeypatch.setattr(replay, "WORK_FLOOR", 0)
    monkeypatch.setattr(replay, "WORK_PER_ITEM", 4)
    out = apply(stored, RULE.context())
    assert len(out.messages) < len(stored)


def same_id_turns(turns: int) -> list[Any]:
    """One id in every turn, each result its own text."""
    return [x for i in range(turns) for x in (turn("call_same"), result("call_same", str(i)))]


@pytest.mark.slow
def test_a_pathological_id_repeated_everywhere_stays_linear() -> None:
    apply(same_id_turns(1500), RULE.context())  # within the default budget: no raise
    assert_linear(same_id_turns, lambda messages: apply(messages, RULE.context()), 375)


# ---------------------------------------------------------------------------------------------
# Bounded work (issue 15): one id reused by thousands of turns made every pass remove one block
# and rescan from index 0 (0.06 / 0.23 / 0.95 / 3.9 s for 500 / 1000 / 2000 / 4000 turns).
# ---------------------------------------------------------------------------------------------


def reused_id_turns(turns: int) -> list[Any]:
    """The attack: the same call and result, one id, ``turns`` times."""
    return [x for _ in range(turns) for x in (turn("call_same"), result("call_same"))]


def test_one_id_reused_by_thousands_of_turns_costs_linear_work(monkeypatch: Any) -> None:
    # Four work units per item, no floor: the old walk needed about turns**2 / 2.
    monkeypatch.setattr(replay, "WORK_FLOOR", 0)
    monkeypatch.setattr(replay, "WORK_PER_ITEM", 4)
    for turns in (500, 4000):
        out = apply(reused_id_turns(turns), RULE.context())
        assert out.messages == reused_id_turns(1)
        assert len(out.changes) == turns - 1  # one Change per removed copy, as before
        assert [c.index for c in out.changes] == list(range(0, 2 * (turns - 1), 2))


def test_a_shape_past_the_work_budget_raises_and_the_pipeline_skips_the_rule(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(replay, "WORK_FLOOR", 10)
    monkeypatch.setattr(replay, "WORK_PER_ITEM", 0)
    messages = reused_id_turns(50)
    with pytest.raises(WorkBudgetExceeded):
        apply(messages, RULE.context())
    result = run_rules(messages, [(RULE, RULE.context())], private=False)
    assert result.messages == messages and not result.changes
    assert [(f.rule, f.error) for f in result.failures] == [(NAME, "WorkBudgetExceeded")]


def _reference(messages: list[Any]) -> list[Any]:
    """The collapse as it was before issue 15 (first square by later anchor, one copy removed
    per pass, rescan from 0), for the equivalence property below."""
    current = list(messages)
    keys = [replayed_history.message_key(m) for m in current]
    while True:
        found = None
        positions: dict[str, list[int]] = {}
        for later, item in enumerate(current):
            tried: set[int] = set()
            for anchor in dict.fromkeys(message_anchors(item)):
                earlier_list = positions.setdefault(anchor, [])
                for earlier in reversed(earlier_list):
                    if earlier in tried or keys[earlier] != keys[later]:
                        continue
                    tried.add(earlier)
                    distance = later - earlier
                    start = earlier
                    while start > 0 and keys[start - 1] == keys[start - 1 + distance]:
                        start -= 1
                    end = earlier + 1
                    while end + distance < len(keys) and keys[end] == keys[end + distance]:
                        end += 1
                    if end - start >= distance:
                        found = (start, distance)
                        break
                if found:
                    break
                earlier_list.append(later)
            if found:
                break
        if found is None:
            return current
        start, distance = found
        del current[start : start + distance], keys[start : start + distance]


_PIECES = [
    turn("call_a"),
    turn("call_b"),
    result("call_a"),
    result("call_b"),
    user("u"),
    say("x"),
]


@SETTINGS
@given(st.lists(st.integers(0, len(_PIECES) - 1), max_size=40))
def test_the_one_pass_collapse_keeps_what_the_repeated_passes_kept(picks: list[int]) -> None:
    messages = [_PIECES[i] for i in picks]
    for value in (messages, [*messages, *messages], [*messages, *messages, *messages[:5]]):
        assert apply(value, RULE.context()).messages == _reference(value)
