"""tool-call-ids beyond the fixtures: each format, the map's properties, and its contract check."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES, sanitize_messages
from rules.chat.tool_call_ids import FORMATS, NAME, RULE, apply
from rules.engine.ids import digest62
from rules.providers.contract import CHECKS_BY_CODE, DEFAULT_CONTRACT, violations
from rules.providers.contract.ids import ID_TEXTS
from tests.budget import examples
from tests.builders import result, turn
from tests.strategies import arbitrary_messages, broken_transcripts, clean_transcripts

CHECK = CHECKS_BY_CODE["tool_call_id_format"]
REWRITING = tuple(f for f in FORMATS if f != "preserve")


def ctx(fmt: str) -> Any:
    return RULE.context({"format": fmt})


def all_ids(messages: list[Any]) -> list[Any]:
    """Every call id and tool_call_id, in order."""
    found: list[Any] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            found.append(message.get("tool_call_id"))
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        calls = calls if isinstance(calls, list) else None
        found.extend(c.get("id") if isinstance(c, dict) else None for c in calls or ())
    return found


def test_rule_record() -> None:
    assert RULE.name == NAME == "tool-call-ids"
    assert RULE.default is False and RULE.safety == "safe"
    assert RULE in RULES
    assert RULE.options[0].validate("mistral9") is None
    assert RULE.options[0].validate("max64") is not None


def test_digest62_is_stable_and_base62() -> None:
    assert digest62("call_0fypS1hVX") == digest62("call_0fypS1hVX")
    assert re.fullmatch(r"[0-9A-Za-z]{43}", digest62("x"))
    assert digest62("x") != digest62("x", 1)
    assert digest62("\ud83d")  # a lone surrogate (rule disabled upstream) hashes too


@pytest.mark.parametrize("fmt", FORMATS)
def test_conforming_ids_come_back_as_the_same_list(fmt: str) -> None:
    messages = [{"role": "user", "content": "x"}, turn("a1B2c3D4e"), result("a1B2c3D4e")]
    outcome = apply(messages, ctx(fmt))
    assert outcome.messages is messages and outcome.changes == ()


def test_preserve_never_rewrites_even_ids_every_other_format_refuses() -> None:
    kimi = "functions.Bash:0" * 4
    messages = [turn(kimi), result(kimi)]
    assert apply(messages, RULE.context()).messages is messages
    for fmt in REWRITING:
        assert apply(messages, ctx(fmt)).changes


def test_max40_keeps_an_id_of_exactly_40_and_shortens_41() -> None:
    exact, over = "c" * 40, "d" * 41
    messages = [turn(exact, over), result(exact), result(over)]
    out = apply(messages, ctx("max40")).messages
    assert all_ids(out)[0] == exact and all_ids(out)[2] == exact
    assert len(all_ids(out)[1]) <= 40 and all_ids(out)[1] == all_ids(out)[3]


def test_mistral9_collision_with_an_id_already_present_is_resolved() -> None:
    taken = digest62("call_long_id")[:9]  # exactly what call_long_id would become
    messages = [turn("call_long_id", taken), result("call_long_id"), result(taken)]
    out = apply(messages, ctx("mistral9")).messages
    ids = all_ids(out)
    assert ids[1] == taken == ids[3]  # the conforming id is kept
    assert ids[0] != taken and ids[0] == ids[2]
    assert re.fullmatch(r"[a-zA-Z0-9]{9}", ids[0])


def test_anthropic_readable_replacement_and_distinct_ids_stay_distinct() -> None:
    messages = [turn("a.b", "a:b", "a_b"), result("a.b"), result("a:b"), result("a_b")]
    ids = all_ids(apply(messages, ctx("anthropic")).messages)
    assert ids[2] == "a_b"
    assert len(set(ids[:3])) == 3 and ids[:3] == ids[3:]
    assert ids[0].startswith("a_b_") and ids[1].startswith("a_b_")


def test_changes_name_ids_only_and_untouched_messages_are_shared() -> None:
    messages = [{"role": "user", "content": "secret"}, turn("x.1"), result("x.1")]
    outcome = apply(messages, ctx("anthropic"))
    assert outcome.messages[0] is messages[0]
    assert [c.as_dict() for c in outcome.changes] == [
        {
            "rule": NAME,
            "index": 1,
            "action": "renamed_ids",
            "ids": {"x.1": "x_1"},
            "format": "anthropic",
        },
        {"rule": NAME, "index": 2, "action": "renamed_id", "from": "x.1", "to": "x_1"},
    ]
    assert "secret" not in repr(outcome.changes)


def test_the_check_reports_each_format_in_its_providers_words() -> None:
    long = "fc_" + "a" * 50
    messages = [{"role": "user", "content": "x"}, turn(long), result(long)]
    found = CHECK.run(messages, {}, {"format": "max40", "text": ID_TEXTS["max40"]})
    assert [v.message for v in found] == [
        "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with maximum "
        "length 40, but got a string with length 53 instead.",
        "Invalid 'messages[2].tool_call_id': string too long. Expected a string with maximum "
        "length 40, but got a string with length 53 instead.",
    ]
    found = CHECK.run([turn("call_0fypS1hVX")], {}, {})
    assert [v.message for v in found] == [
        "Tool call id was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a length of 9."
    ]
    anthropic = {"format": "anthropic", "text": ID_TEXTS["anthropic"]}
    found = CHECK.run([turn("ok", "functions.Bash:0")], {}, anthropic)
    assert [v.message for v in found] == [
        "messages.0.content.1.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    ]
    assert CHECK.run([turn("functions.Bash:0")], {}, {"format": "preserve"}) == []


def _holds(messages: list[Any], fmt: str) -> None:
    snapshot = copy.deepcopy(messages)
    outcome = apply(messages, ctx(fmt))
    assert messages == snapshot  # never mutated
    again = apply(outcome.messages, ctx(fmt))
    assert again.changes == () and again.messages is outcome.messages  # idempotent
    assert CHECK.run(outcome.messages, {}, {"format": fmt}) == []
    # one map: the same old id always becomes the same new id, distinct ids stay distinct
    both = zip(all_ids(messages), all_ids(outcome.messages), strict=True)
    pairs = {(old, new) for old, new in both if isinstance(old, str)}
    olds = [old for old, _ in pairs]
    news = [new for _, new in pairs]
    assert len(olds) == len(set(olds)) and len(news) == len(set(news))
    if outcome.changes:
        assert apply(messages, ctx(fmt)).messages == outcome.messages  # deterministic


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), st.sampled_from(FORMATS))
def test_arbitrary_input_never_raises_and_leaves_no_bad_id(messages: list[Any], fmt: str) -> None:
    _holds(messages, fmt)


@pytest.mark.slow
@settings(deadline=None)
@given(broken_transcripts(), st.sampled_from(REWRITING))
def test_after_the_pipeline_ids_fit_and_the_pairing_still_holds(broken: Any, fmt: str) -> None:
    repaired = sanitize_messages(broken.messages).messages
    _holds(repaired, fmt)
    out = apply(repaired, ctx(fmt)).messages
    assert violations({"messages": out}, DEFAULT_CONTRACT) == violations(
        {"messages": repaired}, DEFAULT_CONTRACT
    )


@pytest.mark.slow
@settings(max_examples=examples(0.5), deadline=None)
@given(clean_transcripts(), st.sampled_from(REWRITING))
def test_clean_transcripts_keep_their_pairing(messages: list[Any], fmt: str) -> None:
    _holds(messages, fmt)
    out = apply(messages, ctx(fmt)).messages
    assert violations({"messages": out}, DEFAULT_CONTRACT) == []
