"""Each rule's declared horizon (``Rule.horizon``, rules/engine/base.py) holds over generated
histories, split anywhere.

The oracle is the rule's own whole run (``apply`` over the whole list) and the definition of each
kind, written here: a ``message`` rule over ``A + B`` gives its output over ``A`` then its output
over ``B``, the changes over ``B`` counted from ``len(A)``; a ``carried`` rule does the same
going on from the state its run over ``A`` left (or declines: ``None``), and its run from the
start is its ``apply``; a ``fields`` rule gives over ``A + B`` what it gives over ``B`` alone,
and never writes a message. Every profile's options for the rule are tried (the horizon may hold
under some only: ``Horizon.holds``). tests/proxy/test_prefix.py then replays whole sessions with
and without resuming.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chat import RULES
from rules.engine.base import Change, Outcome, Rule, RuleContext, fields_only, per_message
from rules.engine.pipeline import clone, horizon_of
from rules.providers.profiles import PROFILES
from tests.budget import examples
from tests.rules.test_nothing_lost import FATES_ALL, RENDER, conversations, plan_of
from tests.strategies import (
    arbitrary_messages,
    broken_transcripts,
    clean_transcripts,
    request_fields,
)

SETTINGS = settings(
    max_examples=examples(1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

DECLARED = [rule for rule in RULES if rule.horizon is not None]


def contexts(rule: Rule) -> list[RuleContext]:
    """The rule's context under its defaults and under every profile that runs it."""
    found = [rule.context()]
    for name in sorted(PROFILES):
        for step_rule, ctx in plan_of("chat", name).steps:
            if step_rule.name == rule.name and ctx.options not in [c.options for c in found]:
                found.append(ctx)
    return found


@st.composite
def histories(draw: st.DrawFn) -> list[Any]:
    shape = draw(
        st.sampled_from(("clean", "broken", "conversation", "arbitrary", "doubled", "stuck"))
    )
    if shape == "stuck":  # a defect early, then turns with ids of their own (the id rules' case)
        head = list(draw(broken_transcripts(max_turns=3)).messages)
        tail = list(draw(clean_transcripts(max_turns=3)))
        return head + renamed_ids(tail, "t_")
    if shape == "clean":
        return list(draw(clean_transcripts(max_turns=5)))
    if shape == "doubled":  # a block stored twice, right after itself (replayed-history's case)
        items = list(draw(clean_transcripts(max_turns=5)))
        end = draw(st.integers(1, len(items)))
        start = draw(st.integers(0, end - 1))
        copies = draw(st.integers(1, 2))
        return items[:end] + items[start:end] * copies + items[end:]
    if shape == "broken":
        return list(draw(broken_transcripts(max_turns=5)).messages)
    if shape == "conversation":
        return list(RENDER["chat"](draw(conversations(FATES_ALL))))
    return list(draw(arbitrary_messages()))


def renamed_ids(items: list[Any], prefix: str) -> list[Any]:
    """``items`` with every string id (a call's ``id``, ``call_id`` and ``response_item_id``, a
    result's ``tool_call_id``) given ``prefix``: ids no other part of a history holds."""

    def fresh(value: Any) -> Any:
        return prefix + value if isinstance(value, str) else value

    out: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            out.append(item)
            continue
        made = dict(item)
        if "tool_call_id" in made:
            made["tool_call_id"] = fresh(made["tool_call_id"])
        if isinstance(made.get("tool_calls"), list):
            made["tool_calls"] = [
                {
                    key: fresh(value) if key in ("id", "call_id", "response_item_id") else value
                    for key, value in call.items()
                }
                if isinstance(call, dict)
                else call
                for call in made["tool_calls"]
            ]
        out.append(made)
    return out


def shifted(changes: Sequence[Change], by: int) -> list[Change]:
    return [
        Change(c.rule, c.index + by, c.action, c.detail) if c.index >= 0 else c for c in changes
    ]


def check_horizon(
    rule: Rule, ctx: RuleContext, items: list[Any], at: int, *, fields_kept: bool = False
) -> bool:
    """The declaration of ``rule`` holds for ``items`` split at ``at``; whether the split was
    resumed (a ``carried`` rule may decline). ``fields_kept``: the step may leave new fields (a
    Messages or Responses rule: tests/rules/test_horizons_items.py), those of its run over the
    new messages alone; else it leaves none."""
    horizon = horizon_of(rule, ctx)
    assert horizon is not None and horizon.resume is not None
    given = clone(items)
    first, then = clone(items[:at]), clone(items[at:])
    whole = rule.apply(given, ctx)
    assert given == items, "apply wrote into its argument"
    if horizon.kind == "fields":
        alone = rule.apply(then, ctx)
        assert alone.messages is then and whole.messages == items
        assert all(change.index < 0 for change in whole.changes)
        assert (whole.changes, whole.request) == (alone.changes, alone.request)
        # Nor does it read the list through the request (a resumed run does not run it again
        # where it changed nothing, given the same fields: rules/engine/resume.py).
        blind = ctx.with_request(_without_lists(ctx.request))
        other = rule.apply(clone(then), blind)
        assert other.changes == whole.changes, "a fields rule read the list in the request"
        assert _without_lists(other.request) == _without_lists(whole.request)
        return True
    started = horizon.resume(first, ctx, None)
    assert started is not None, "from the start nothing can decline"
    assert _same(started[0], rule.apply(clone(items[:at]), ctx)), "resume from the start is apply"
    went_on = horizon.resume(then, ctx, started[1])
    assert first == items[:at] and then == items[at:], "resume wrote into its argument"
    if went_on is None:
        assert horizon.kind == "carried", "a message rule never declines"
        return False
    if horizon.kind == "message":
        assert went_on[1] is None and started[1] is None, "a message rule carries nothing"
    assert started[0].messages + went_on[0].messages == whole.messages
    changes = [*started[0].changes, *shifted(went_on[0].changes, at)]
    assert changes == list(whole.changes)
    if fields_kept:
        assert went_on[0].request == whole.request
    else:
        assert whole.request is None and went_on[0].request is None
    return True


def _without_lists(request: Any) -> Any:
    """``request`` with its message list (``messages``, ``input``) emptied: what a rule that
    reads no message gives over it is what it gives over the request."""
    if request is None:
        return None
    lists = ("messages", "input")
    return {k: [] if k in lists and type(v) is list else v for k, v in request.items()}


def _same(one: Outcome, other: Outcome) -> bool:
    return (one.messages, one.changes, one.request) == (
        other.messages,
        other.changes,
        other.request,
    )


@pytest.mark.parametrize("rule", DECLARED, ids=lambda rule: rule.name)
@SETTINGS
@given(data=st.data())
def test_a_declared_horizon_holds_wherever_the_list_is_split(
    rule: Rule, data: st.DataObject
) -> None:
    items = data.draw(histories())
    fields = data.draw(request_fields())
    at = data.draw(st.integers(0, len(items)))
    for each in contexts(rule):
        if horizon_of(rule, each) is None:
            continue
        ctx = each.with_request({**fields, "messages": items}) if rule.reads_request else each
        check_horizon(rule, ctx, items, at)


def test_every_profile_resumes_some_rule() -> None:
    """The declarations cover the rules every profile wakes on a clean session: without them,
    tests/proxy/test_prefix.py would compare whole runs only."""
    assert len(DECLARED) >= 4


def test_a_wrong_horizon_is_caught() -> None:
    """``reasoning-content`` declared as deciding each message alone (it does not under DeepSeek's
    ``plain_turns``: a plain turn gets its placeholder once a tool call joins its span)."""
    rule = next(rule for rule in RULES if rule.name == "reasoning-content")
    wrong = replace(rule, horizon=per_message(rule.apply))
    ctx = next(c for c in contexts(rule) if c.options.get("plain_turns") is True)
    ctx = ctx.with_request({"model": "deepseek-reasoner"})
    items = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "let me look"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    assert check_horizon(rule, ctx, items, 2) is False  # the true declaration declines
    with pytest.raises(AssertionError):
        check_horizon(wrong, ctx, items, 2)


def test_a_fields_rule_reading_the_list_in_the_request_is_caught() -> None:
    """A rule declared ``fields`` that counts the messages of ``ctx.request``: given the same
    fields, it would not change nothing again (rules/engine/resume.py skips it)."""

    def counts(messages: list[Any], ctx: RuleContext) -> Outcome:
        listed = ctx.request.get("messages") or []
        return Outcome(messages, (Change("counts", -1, "counted", {"n": len(listed)}),))

    rule = Rule("counts", "s", "d", "r", "safe", True, counts, reads_request=True)
    wrong = replace(rule, horizon=fields_only(counts))
    items = [{"role": "user", "content": "go"}, {"role": "user", "content": "on"}]
    ctx = wrong.context().with_request({"model": "m", "messages": items})
    with pytest.raises(AssertionError, match="read the list in the request"):
        check_horizon(wrong, ctx, items, 1)


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}


#: The rules issue 39's stuck session wakes on every request once a split turn repeats a call.
ID_RULES = (
    "codex-call-ids",
    "blank-tool-call-ids",
    "duplicate-tool-call-ids",
    "displaced-tool-results",
    "missing-tool-call-ids",
    "orphan-tool-results",
    "unanswered-tool-calls",
    "tool-call-ids",
    "tool-message-name",
)


def stuck_history() -> tuple[list[Any], int]:
    """A split turn that repeats its call (issue 39's stuck agent), then a clean turn: the
    history and where the clean turn starts."""
    head = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix the test"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [_call("c1")]},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {"role": "tool", "tool_call_id": "c1", "content": "ok again"},
        # the next turn, clean: the list the new turn follows does not end on the repair
        {"role": "assistant", "content": None, "tool_calls": [_call("c4")]},
        {"role": "tool", "tool_call_id": "c4", "content": "ok"},
    ]
    turn = [
        {"role": "assistant", "content": None, "tool_calls": [_call("c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]
    return head + turn, len(head)


@pytest.mark.parametrize("name", ID_RULES)
def test_the_id_rules_resume_after_a_stuck_turn(name: str) -> None:
    """The new turn after a split turn that repeats a call resumes (and gives the whole run's
    result) under every profile's options: the property above cannot pass by declining."""
    rule = next(rule for rule in RULES if rule.name == name)
    items, at = stuck_history()
    for ctx in contexts(rule):
        assert check_horizon(rule, ctx, items, at), ctx.options


def test_the_stuck_turn_is_repaired_before_the_split() -> None:
    """What the resumed turn goes on from is a repair: duplicate-tool-call-ids changed the
    split turn (the oracle above is not of a history no rule touches)."""
    rule = next(rule for rule in RULES if rule.name == "duplicate-tool-call-ids")
    items, at = stuck_history()
    assert rule.apply(clone(items[:at]), rule.context()).changes


def test_a_wrong_horizon_for_an_id_rule_is_caught() -> None:
    """``duplicate-tool-call-ids`` declared to decide each message alone (it does not: an id a
    new turn reuses is renamed there because the history holds it, as Kimi's per-turn counters
    reuse ``functions.bash:0``); its true declaration declines that split."""
    rule = next(rule for rule in RULES if rule.name == "duplicate-tool-call-ids")
    wrong = replace(rule, horizon=per_message(rule.apply))
    items = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("functions.bash:0")]},
        {"role": "tool", "tool_call_id": "functions.bash:0", "content": "one"},
        {"role": "assistant", "content": None, "tool_calls": [_call("functions.bash:0")]},
        {"role": "tool", "tool_call_id": "functions.bash:0", "content": "two"},
    ]
    assert rule.apply(clone(items), rule.context()).changes  # the whole run renames the reuse
    assert check_horizon(rule, rule.context(), items, 3) is False
    with pytest.raises(AssertionError):
        check_horizon(wrong, rule.context(), items, 3)
