"""consecutive-user-messages beyond the fixtures: fold order, copies, junk, scale, contract."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.chat.consecutive_user_messages import NAME, RULE, apply
from rules.chat.merge import join_contents
from rules.engine.base import RuleContext
from tests.builders import user
from tests.rules.sequence_helpers import assert_folds_pairwise, found, run_pure, texts
from tests.strategies import arbitrary_messages, clean_transcripts, user_contents
from tests.work import assert_linear

CTX = RuleContext()
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}


def test_rule_record() -> None:
    assert RULE.name == NAME == "consecutive-user-messages"
    assert RULE.default is False
    assert RULE.safety == "safe"
    assert RULE.options == ()
    assert RULE in RULES


def test_later_only_keys_are_added_the_first_wins_otherwise() -> None:
    messages = [user("a", name="alice"), user("b", name="bob", x_meta=1)]
    assert apply(messages, CTX).messages == [user("a\n\nb", name="alice", x_meta=1)]


def test_the_merged_message_owns_its_top_level_and_list() -> None:
    first = user([{"type": "text", "text": "a"}])
    messages = [first, user("b")]
    snapshot = copy.deepcopy(messages)
    merged = apply(messages, CTX).messages[0]
    assert merged is not first and merged["content"] is not first["content"]
    merged["content"].append(IMAGE)
    merged["x"] = 1
    assert messages == snapshot


def test_untouched_messages_are_the_clients_own_objects() -> None:
    head = {"role": "system", "content": "s"}
    tail = {"role": "assistant", "content": "ok"}
    messages = [head, user("a"), user("b"), tail]
    out = apply(messages, CTX).messages
    assert out[0] is head and out[2] is tail


RUNS: list[list[Any]] = [
    ["a", "b", "c"],
    ["a", [IMAGE], "c"],
    [[IMAGE], "b", [{"type": "text", "text": "c"}]],
    ["a", "b", [IMAGE], "d", "e"],
    [None, "", "a", [], "b"],
    ["a", 5, {"type": "text", "text": "bare"}, "d"],
    [None, None],
]


@pytest.mark.parametrize("contents", RUNS, ids=[str(i) for i in range(len(RUNS))])
def test_a_long_run_equals_a_pairwise_fold(contents: list[Any]) -> None:
    assert_folds_pairwise(RULE, [user(c) for c in contents])


def test_junk_contents_are_carried_as_parts() -> None:
    assert join_contents(["a", 5], "\n\n") == [{"type": "text", "text": "a"}, 5]
    assert join_contents([{"k": 1}, "b"], "\n\n") == [{"k": 1}, {"type": "text", "text": "b"}]
    assert join_contents([True], "\n\n") is True


def test_changes_hold_no_text() -> None:
    changes = apply([user("secret"), user("private")], CTX).changes
    assert [c.as_dict() for c in changes] == [
        {"rule": NAME, "index": 0, "action": "merged", "merged_indices": [0, 1], "count": 2}
    ]


def users(n: int) -> list[Any]:
    return [user(str(i)) for i in range(n)]


def test_twenty_thousand_users_are_linear() -> None:
    out = apply(users(20000), CTX).messages
    assert len(out) == 1 and out[0]["content"].count("\n\n") == 19999
    assert_linear(users, lambda messages: apply(messages, CTX), 1000)


def test_successive_user_check_text() -> None:
    assert found("successive_user", [user(), user(), user()]) == [
        (
            1,
            "deepseek-reasoner does not support successive user or assistant messages "
            "(messages[0] and messages[1] in your input). You should interleave the "
            "user/assistant messages in the message sequence.",
        ),
        (
            2,
            "deepseek-reasoner does not support successive user or assistant messages "
            "(messages[1] and messages[2] in your input). You should interleave the "
            "user/assistant messages in the message sequence.",
        ),
    ]


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages())
def test_junk_never_breaks_it_and_no_users_stay_adjacent(junk: list[Any]) -> None:
    out = run_pure(RULE, junk).messages
    assert found("successive_user", out) == []
    sent = repr(out)
    for message in junk:
        if isinstance(message, dict) and message.get("role") == "user":
            for piece in texts(message.get("content")):
                assert repr(piece)[1:-1] in sent


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts(), st.data())
def test_split_user_turns_in_a_transcript(clean: list[Any], data: st.DataObject) -> None:
    messages = list(clean)
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for i in reversed(data.draw(st.lists(st.sampled_from(users), unique=True))):
        messages.insert(i + 1, user(data.draw(user_contents)))
    out = run_pure(RULE, messages).messages
    assert found("successive_user", out) == []
    # only users merged: the other messages are the same objects, in order
    others = [m for m in messages if m["role"] != "user"]
    assert [m for m in out if m["role"] != "user"] == others
    assert all(a is b for a, b in zip([m for m in out if m["role"] != "user"], others, strict=True))
