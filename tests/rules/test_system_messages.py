"""system-messages beyond the fixtures: options, positions, copies, junk, and the contract."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.chat.system_messages import NAME, RULE, apply
from tests.builders import say, system, user
from tests.rules.sequence_helpers import found, run_pure, texts
from tests.strategies import arbitrary_messages, clean_transcripts
from tests.work import assert_linear

HOIST = RULE.context()
TO_USER = RULE.context({"later": "user"})


def test_rule_record() -> None:
    assert RULE.name == NAME == "system-messages"
    assert RULE.default is False
    assert RULE.apply is apply
    assert [o.name for o in RULE.options] == ["later", "prefix"]
    assert RULE.options[0].choices == ("hoist", "user")
    assert RULE.options[0].validate("drop") is not None
    assert RULE in RULES


def test_several_later_systems_are_appended_in_order() -> None:
    messages = [system("a"), user(), system("b"), say(), system("c"), user("v")]
    outcome = apply(messages, HOIST)
    assert outcome.messages == [system("a\n\nb\n\nc"), user(), say(), user("v")]
    assert [(c.index, c.action) for c in outcome.changes] == [(2, "hoisted"), (4, "hoisted")]


def test_a_lone_later_system_is_moved_as_the_same_object() -> None:
    late = system("late")
    first = user()
    out = apply([first, late], HOIST).messages
    assert out[0] is late and out[1] is first


def test_the_merged_message_keeps_the_first_keys_and_adds_later_only_keys() -> None:
    messages = [system("a", name="one"), system("b", name="two", x_tag=1), user()]
    merged = apply(messages, HOIST).messages[0]
    assert merged == {"role": "system", "content": "a\n\nb", "name": "one", "x_tag": 1}


def test_the_merged_part_list_owns_its_list() -> None:
    parts = [{"type": "image_url", "image_url": {"url": "u"}}]
    messages = [system(parts), system("b"), user()]
    merged = apply(messages, HOIST).messages[0]
    assert merged["content"] == [*parts, {"type": "text", "text": "b"}]
    assert merged["content"] is not parts


def test_empty_systems_give_way_and_all_empty_keeps_the_first_value() -> None:
    assert apply([system(None), system("x"), user()], HOIST).messages[0] == system("x")
    assert apply([system(""), system(None), user()], HOIST).messages[0] == system("")


def test_later_user_prefix_on_every_content_shape() -> None:
    image = {"type": "image_url", "image_url": {"url": "u"}}
    messages = [
        user(),
        system("text"),
        system([image]),
        system(None),
        {"role": "system"},
        system(42),
    ]
    out = apply(messages, TO_USER).messages
    assert out == [
        user(),
        user("[system] text"),
        user([{"type": "text", "text": "[system] "}, image]),
        user("[system] "),
        user("[system] "),
        user([{"type": "text", "text": "[system] "}, 42]),
    ]


def test_later_user_without_prefix_only_renames_the_role() -> None:
    ctx = RULE.context({"later": "user", "prefix": ""})
    messages = [system("a"), user(), system("b", name="n")]
    outcome = apply(messages, ctx)
    assert outcome.messages == [system("a"), user(), {"role": "user", "content": "b", "name": "n"}]
    assert [c.as_dict() for c in outcome.changes] == [
        {"rule": NAME, "index": 2, "action": "renamed_role", "from": "system", "to": "user"}
    ]


def test_later_user_after_a_merged_leading_run_lands_at_the_right_place() -> None:
    messages = [system("a"), system("b"), system("c"), user(), system("d"), say()]
    out = apply(messages, TO_USER).messages
    assert out == [system("a\n\nb\n\nc"), user(), user("[system] d"), say()]


def test_hoisting_joins_a_tool_block_back_together() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    turn = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    messages = [user(), turn, system("note"), result]
    out = apply(messages, HOIST).messages
    assert out == [system("note"), user(), turn, result]


def test_changes_hold_no_text() -> None:
    messages = [system("secret a"), system("secret b"), user(), system("secret c")]
    for ctx in (HOIST, TO_USER):
        assert "secret" not in repr([c.as_dict() for c in apply(messages, ctx).changes])


def test_texts_of_system_messages_are_kept_in_order() -> None:
    messages = [user("q"), system("one"), say(), system([{"type": "text", "text": "two"}])]
    head = apply(messages, HOIST).messages[0]
    assert head == system("one\n\ntwo")


def interleaved(n: int) -> list[Any]:
    """``n`` users, each followed by a system message."""
    return [m for i in range(n) for m in (user(str(i)), system(str(i)))]


def test_ten_thousand_systems_are_linear() -> None:
    out = apply(interleaved(5000), HOIST).messages
    assert len(out) == 5001 and found("system_not_first", out) == []
    assert_linear(interleaved, lambda messages: apply(messages, HOIST), 500)


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.sampled_from(["hoist", "user"]))
def test_junk_never_breaks_it_and_the_contract_holds_after(junk: list[Any], later: str) -> None:
    ctx = RULE.context({"later": later})
    out = run_pure(RULE, junk, ctx).messages
    assert found("system_not_first", out) == []
    assert found("multiple_system", out) == []
    # no text is lost: every string of every system message is still somewhere
    sent = repr(out)
    for message in junk:
        if isinstance(message, dict) and message.get("role") == "system":
            for piece in texts(message.get("content")):
                assert piece in sent or repr(piece)[1:-1] in sent


@pytest.mark.slow
@settings(deadline=None)
@given(clean_transcripts(), st.data())
def test_systems_anywhere_in_a_transcript(clean: list[Any], data: st.DataObject) -> None:
    messages = list(clean)
    for n in range(data.draw(st.integers(1, 3))):
        messages.insert(data.draw(st.integers(0, len(messages))), system(f"note {n}"))
    for ctx in (HOIST, TO_USER):
        out = run_pure(RULE, messages, ctx).messages
        assert found("system_not_first", out) == []
        assert found("multiple_system", out) == []
        assert found("successive_assistant", out) == []
    assert run_pure(RULE, clean).messages is clean  # a clean transcript has one system at most
