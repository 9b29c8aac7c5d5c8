"""Each registry's order, held to the reasons written beside it (``ORDER``), instead of one rule's
test pinning another rule's position: a new rule states its own reasons where it is registered.

The judge here is the test's own (``kept``: every rule named first stands before every rule it
must precede); ``rules.engine.order.broken`` is what the reasons' authors read, and it is shown
to catch what ``kept`` catches on deliberately reordered tuples."""

from __future__ import annotations

import pytest

from rules import chat, messages, replies, responses
from rules.engine.base import Rule
from rules.engine.order import EVERY, Before, before, broken
from rules.replies.base import ReplyRule

REGISTRIES: dict[str, tuple[tuple[Rule | ReplyRule, ...], tuple[Before, ...]]] = {
    "chat": (chat.RULES, chat.ORDER),
    "responses": (responses.RESPONSES_RULES, responses.ORDER),
    "messages": (messages.MESSAGES_RULES, messages.ORDER),
    "replies": (replies.REPLY_RULES, replies.ORDER),
}


def kept(names: list[str], reason: Before) -> bool:
    """The test's own reading of one reason: each rule of ``first`` stands before each of
    ``then`` (every other rule, for ``EVERY``)."""
    then = [n for n in names if n not in reason.first] if reason.then == (EVERY,) else reason.then
    return all(names.index(a) < names.index(b) for a in reason.first for b in then)


def placed(names: list[str], order: tuple[Before, ...]) -> set[str]:
    every = {n for r in order if r.then == (EVERY,) for n in names}
    return every | {n for r in order for n in (*r.first, *r.then) if n != EVERY}


@pytest.mark.parametrize("api", REGISTRIES)
def test_the_registry_keeps_every_reason_and_every_rule_has_one(api: str) -> None:
    rules, order = REGISTRIES[api]
    names = [rule.name for rule in rules]
    assert len(set(names)) == len(names)
    for reason in order:
        assert set(reason.first) <= set(names), reason.first
        assert reason.then == (EVERY,) or set(reason.then) <= set(names), reason.then
        assert kept(names, reason), reason.why
        assert reason.why.strip() and not set(reason.first) & set(reason.then)
    assert placed(names, order) == set(names), "a rule no reason places"
    assert broken(names, order) == []


@pytest.mark.parametrize("api", REGISTRIES)
def test_every_swap_a_reason_forbids_is_caught(api: str) -> None:
    """Swap each adjacent pair of the registry: where the test's reading says a reason breaks,
    ``broken`` says so too, naming both rules and the reason."""
    rules, order = REGISTRIES[api]
    names = [rule.name for rule in rules]
    caught = 0
    for at in range(len(names) - 1):
        swapped = [*names[:at], names[at + 1], names[at], *names[at + 2 :]]
        against = [reason for reason in order if not kept(swapped, reason)]
        found = broken(swapped, order)
        assert len(found) == sum(
            1
            for reason in against
            for a in reason.first
            for b in (
                [n for n in swapped if n not in reason.first]
                if reason.then == (EVERY,)
                else reason.then
            )
            if swapped.index(a) > swapped.index(b)
        )
        for line in found:
            assert f"{names[at]} must run before {names[at + 1]}" in line
        caught += bool(found)
    assert caught  # some swap of every registry breaks a reason


def test_a_reordered_chat_tuple_is_caught_with_its_reason() -> None:
    names = [rule.name for rule in chat.RULES]
    names.remove("tool-call-ids")
    names.insert(names.index("consecutive-assistant-messages"), "tool-call-ids")
    found = broken(names, chat.ORDER)
    assert any(
        line.startswith("consecutive-assistant-messages must run before tool-call-ids:")
        for line in found
    )
    assert any(line.startswith("tool-call-type must run before tool-call-ids:") for line in found)
    assert all(" must run before " in line for line in found)


def test_a_rule_no_reason_places_and_a_reason_naming_no_rule_are_caught() -> None:
    order = (before("a", "b", "a reads what b writes"),)
    assert broken(["a", "b"], order) == []
    assert broken(["b", "a"], order) == ["a must run before b: a reads what b writes"]
    assert broken(["a", "b", "c"], order) == ["c: no reason places it (add one to ORDER)"]
    assert broken(["a"], order)[0].startswith("b: no such rule")
    first = (before("t", EVERY, "text first"),)
    assert broken(["t", "x", "y"], first) == []
    assert broken(["x", "t", "y"], first) == ["t must run before x: text first"]
