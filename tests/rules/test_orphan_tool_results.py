"""orphan-tool-results beyond the fixtures: privacy, identity, merging what it joins, scale."""

from __future__ import annotations

from typing import Any

from rules.chat import RULES, sanitize_messages
from rules.chat.orphan_tool_results import NAME, RULE, apply
from rules.engine.base import RuleContext
from tests.builders import result, say, turn, user
from tests.work import assert_linear


def test_rule_record() -> None:
    assert RULE.name == NAME == "orphan-tool-results"
    assert RULE.default is True
    assert RULE.safety_of("dropped_result") == "lossy"  # its text no longer reaches the model
    assert RULE in RULES


def test_the_text_is_logged_only_with_log_content() -> None:
    parts = [{"type": "text", "text": "secret"}]
    messages = [result("z", "secret text"), user(), {"role": "tool", "content": parts}]
    quiet = apply(messages, RuleContext())
    assert "secret" not in repr([c.as_dict() for c in quiet.changes])
    assert [c.detail["content_length"] for c in quiet.changes] == [11, 33]
    loud = apply(messages, RuleContext(log_content=True))
    assert [c.detail["content"] for c in loud.changes] == ["secret text", parts]
    assert loud.messages == quiet.messages == [user()]


def test_kept_messages_are_the_clients_own_objects() -> None:
    messages = [user(), turn("a"), result("a"), result("z"), say("done")]
    out = apply(messages, RuleContext()).messages
    assert [id(m) for m in out] == [id(messages[i]) for i in (0, 1, 2, 4)]


def test_through_the_pipeline_the_strict_contract_holds() -> None:
    """Orphans everywhere, and one between two assistant texts: dropped, the texts merged."""
    messages = [
        result("old", "truncated away"),
        user(),
        say("First."),
        result("z", "stray"),
        say("Second."),
        user("next"),
        turn("a"),
        result("a"),
        result("a", "again"),
    ]
    assert sanitize_messages(messages).messages == [
        user(),
        say("First.\nSecond."),
        user("next"),
        turn("a"),
        result("a"),
    ]


def answered_twice(n: int) -> list[Any]:
    """One turn of ``n`` calls, each answered, then each answered again."""
    calls = [f"call_{i}" for i in range(n)]
    return [user(), turn(*calls), *[result(cid) for cid in calls + calls]]


def orphans_between_texts(n: int) -> list[Any]:
    messages: list[Any] = [user()]
    for i in range(n):
        messages += [say(f"{i}"), result(f"z{i}")]
    return messages


def run(messages: list[Any]) -> Any:
    return apply(messages, RuleContext())


def test_two_thousand_second_answers_in_one_block_are_linear() -> None:
    outcome = run(answered_twice(2000))
    assert len(outcome.messages) == 2002
    assert {c.detail["reason"] for c in outcome.changes} == {"already_answered"}
    assert_linear(answered_twice, run, 500)


def test_a_thousand_orphans_between_texts_merge_into_one_assistant_in_linear_time() -> None:
    outcome = run(orphans_between_texts(1000))
    assert outcome.messages == [user(), say("\n".join(f"{i}" for i in range(1000)))]
    assert [c.action for c in outcome.changes][-1] == "merged_assistants"
    assert_linear(orphans_between_texts, run, 250)
