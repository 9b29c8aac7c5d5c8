"""Each Messages and Responses rule's declared horizon (``Rule.horizon``, rules/engine/base.py)
holds over generated histories of its API, split anywhere.

The oracle is the rule's own whole run (``apply`` over the whole list) and the definition of each
kind, written here: a ``message`` rule over ``A + B`` gives its output over ``A`` then its output
over ``B``, the changes over ``B`` counted from ``len(A)``; a ``carried`` rule does the same
going on from the state its run over ``A`` left (or declines: ``None``), and its run from the
start is its ``apply``; a ``fields`` rule gives over ``A + B`` what it gives over ``B`` alone,
and never writes a message. A rule that changes the request's fields (a Messages ``system``, a
``thinking`` turned off) must leave, going on over ``B``, the fields the whole run leaves: the
next request brings its fields anew, and what was made of them over ``A`` is not kept
(rules/engine/resume.py). Every profile's options for the rule are tried (the horizon may hold
under some only: ``Horizon.holds``). The Messages walk that goes on from a state gives the
signals of one walk. tests/proxy/test_prefix.py then replays whole sessions with and without
resuming.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.engine.base import RequestFacts, Rule, RuleContext, carried, per_message
from rules.engine.pipeline import horizon_of
from rules.messages import MESSAGES_RULES, missing_thinking
from rules.messages import scan as messages_scan
from rules.providers.profiles import PROFILES
from rules.responses import RESPONSES_RULES
from tests.anthropic_strategies import requests
from tests.budget import examples
from tests.rules.test_horizons import check_horizon as check_chat_horizon
from tests.rules.test_nothing_lost import FATES_ALL, RENDER, conversations, plan_of
from tests.rules.test_responses import clean_inputs, inputs

SETTINGS = settings(
    max_examples=examples(1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

API_OF = {rule.name: "messages" for rule in MESSAGES_RULES} | {
    rule.name: "responses" for rule in RESPONSES_RULES
}
DECLARED = [rule for rule in (*MESSAGES_RULES, *RESPONSES_RULES) if rule.horizon is not None]


def contexts(rule: Rule) -> list[RuleContext]:
    """The rule's context under its defaults and under every profile that runs it."""
    found = [rule.context()]
    for name in sorted(PROFILES):
        for step_rule, ctx in plan_of(API_OF[rule.name], name).steps:
            if step_rule.name == rule.name and ctx.options not in [c.options for c in found]:
                found.append(ctx)
    return found


#: Messages a Messages history holds now and then that the request strategy does not make.
ODD_MESSAGES: tuple[Any, ...] = (
    {"role": "system", "content": "be brief"},
    {"role": "system", "content": [{"type": "text", "text": "rules"}]},
    {"role": "assistant", "content": ""},
    {"role": "assistant", "content": []},
    {"role": "user", "content": "  "},
    {"role": "user", "content": "go on"},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "looking"},
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_odd", "name": "Bash", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_odd", "content": "ok"}],
    },
    {
        "role": "assistant",
        "content": [{"type": "text", "text": " "}, {"type": "text", "text": "x"}],
    },
    {"role": "assistant", "content": "done"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "a.b", "name": "Bash"}]},
)


@st.composite
def messages_histories(draw: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
    """A Messages list and the request's other fields."""
    request = draw(requests())
    fields = {key: value for key, value in request.items() if key != "messages"}
    shape = draw(st.sampled_from(("request", "conversation", "doubled", "odd")))
    if shape == "conversation":
        items = RENDER["messages"](draw(conversations(FATES_ALL)))
    else:
        items = list(request["messages"])
    if shape == "doubled" and items:  # a block stored twice, right after itself
        end = draw(st.integers(1, len(items)))
        start = draw(st.integers(0, end - 1))
        items = items[:end] + copy.deepcopy(items[start:end]) + items[end:]
    if shape == "odd":
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(items)))
            items.insert(at, copy.deepcopy(draw(st.sampled_from(ODD_MESSAGES))))
    return items, fields


@st.composite
def responses_histories(draw: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
    """A Responses ``input`` list and the request's other fields."""
    shape = draw(st.sampled_from(("broken", "clean", "conversation")))
    if shape == "broken":
        items = draw(inputs())
    elif shape == "clean":
        items = draw(clean_inputs())
    else:
        items = RENDER["responses"](draw(conversations(FATES_ALL)))
    model = draw(st.sampled_from(("gpt-5", "deepseek-chat", "kimi-k2", "o3")))
    fields: dict[str, Any] = {"model": model}
    if draw(st.booleans()):
        fields["instructions"] = "be brief"
    if draw(st.booleans()):
        fields["tools"] = [{"type": "function", "name": "ls", "parameters": {"type": "object"}}]
    if draw(st.booleans()):
        fields["reasoning"] = {"effort": "high"}
    return list(items), fields


def check_horizon(rule: Rule, ctx: RuleContext, items: list[Any], at: int) -> bool:
    """The chat oracle's (tests/rules/test_horizons.py), where a step may leave fields: those of
    its run over the new messages alone."""
    return check_chat_horizon(rule, ctx, items, at, fields_kept=True)


def _holds(rule: Rule, items: list[Any], fields: dict[str, Any], at: int) -> None:
    for each in contexts(rule):
        if horizon_of(rule, each) is None:
            continue
        ctx = each.with_request({**fields, API_FIELD[API_OF[rule.name]]: items})
        check_horizon(rule, ctx if rule.reads_request else each, items, at)


API_FIELD = {"messages": "messages", "responses": "input"}


@pytest.mark.parametrize(
    "rule", [r for r in DECLARED if API_OF[r.name] == "messages"], ids=lambda rule: rule.name
)
@SETTINGS
@given(data=st.data())
def test_a_messages_horizon_holds_wherever_the_list_is_split(
    rule: Rule, data: st.DataObject
) -> None:
    items, fields = data.draw(messages_histories())
    _holds(rule, items, fields, data.draw(st.integers(0, len(items))))


@pytest.mark.parametrize(
    "rule", [r for r in DECLARED if API_OF[r.name] == "responses"], ids=lambda rule: rule.name
)
@SETTINGS
@given(data=st.data())
def test_a_responses_horizon_holds_wherever_the_list_is_split(
    rule: Rule, data: st.DataObject
) -> None:
    items, fields = data.draw(responses_histories())
    _holds(rule, items, fields, data.draw(st.integers(0, len(items))))


@SETTINGS
@given(history=messages_histories(), data=st.data())
def test_the_messages_walk_goes_on_as_one_walk(
    history: tuple[list[Any], dict[str, Any]], data: st.DataObject
) -> None:
    """``walk(b, walk(a)[1])`` gives ``signals(a + b)`` exactly, cut anywhere, twice."""
    items = history[0]
    one = data.draw(st.integers(0, len(items)))
    two = data.draw(st.integers(one, len(items)))
    _, state = messages_scan.walk(items[:one])
    _, state = messages_scan.walk(items[one:two], state)
    signals, _ = messages_scan.walk(items[two:], state)
    assert signals == messages_scan.signals.__wrapped__(items)  # type: ignore[attr-defined]


def test_the_declarations_cover_what_a_clean_session_runs() -> None:
    """Every step a profile's Messages or Responses plan runs on a clean session (the steps not
    gated on a walk's signals) says its horizon: without that, no request of the API resumes."""
    missing = set()
    for api in ("messages", "responses"):
        for name in sorted(PROFILES):
            for rule, ctx in plan_of(api, name).steps:
                gated = ctx.woken_by is not None
                if not gated and horizon_of(rule, ctx) is None:
                    missing.add((api, name, rule.name))
    assert not missing, sorted(missing)


def test_a_wrong_horizon_is_caught() -> None:
    """``messages-consecutive-roles`` declared as deciding each message alone: two user
    messages on either side of the split are merged by the whole run."""
    rule = next(rule for rule in MESSAGES_RULES if rule.name == "messages-consecutive-roles")
    wrong = replace(rule, horizon=per_message(rule.apply))
    items = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
        {"role": "user", "content": "and again"},
    ]
    ctx = rule.context()
    assert check_horizon(rule, ctx, items, 3) is False  # the true declaration declines
    assert check_horizon(rule, ctx, items, 2) is True
    with pytest.raises(AssertionError):
        check_horizon(wrong, ctx, items, 3)


def test_a_wrong_end_horizon_is_caught() -> None:
    """``messages-empty-messages`` declared per message: a final empty assistant is let be, and
    removed once a message follows it."""
    rule = next(rule for rule in MESSAGES_RULES if rule.name == "messages-empty-messages")
    wrong = replace(rule, horizon=per_message(rule.apply))
    items = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "well?"},
    ]
    ctx = rule.context()
    assert check_horizon(rule, ctx, items, 2) is False
    with pytest.raises(AssertionError):
        check_horizon(wrong, ctx, items, 2)


#: The Messages rules that say what their change may set (``Rule.introduces``): the pipeline,
#: resumed or not, keeps the walk's signals after them.
DECLARING = [rule for rule in MESSAGES_RULES if rule.introduces is not None]


def test_the_rule_that_changes_a_stuck_claude_code_session_says_what_it_may_set() -> None:
    assert "messages-tool-input" in {rule.name for rule in DECLARING}


@SETTINGS
@given(history=messages_histories())
def test_a_messages_change_sets_no_signal_its_rule_did_not_declare(
    history: tuple[list[Any], dict[str, Any]],
) -> None:
    items, fields = history
    signals = messages_scan.signals.__wrapped__(items)  # type: ignore[attr-defined]
    for rule in DECLARING:
        assert rule.introduces is not None
        for ctx in contexts(rule):
            given = ctx.with_request({**fields, "messages": items}) if rule.reads_request else ctx
            outcome = rule.apply(items, given)
            if outcome.messages is items:
                continue
            after = messages_scan.signals.__wrapped__(outcome.messages)  # type: ignore[attr-defined]
            assert after <= signals | rule.introduces, (rule.name, after - signals)


@pytest.mark.parametrize(
    "stored",
    [
        [{"type": "thinking", "thinking": "a", "signature": "s"}],
        [{"type": "thinking", "thinking": "a", "signature": ""}],
        [
            {"type": "thinking", "thinking": "a", "signature": "s"},
            {"type": "redacted_thinking", "data": "d"},
        ],
        None,  # nothing recalled: the placeholder
    ],
)
def test_what_missing_thinking_restores_sets_only_what_it_declares(stored: Any) -> None:
    """The generated histories above give the rule no recalled value: here it restores what the
    stash kept for a turn (one signed block, an unsigned one, a thinking block then a redacted
    one), or adds its placeholder, and the walk sets nothing the rule did not declare."""
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    items = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    key = missing_thinking.turn_key("scope", [use])
    assert key is not None
    recalled = {} if stored is None else {key: missing_thinking.stored_form(stored)}
    thinking = {"type": "enabled", "budget_tokens": 1024}
    request = {"model": "claude-sonnet-4-5", "thinking": thinking, "messages": items}
    given = RequestFacts("scope", recalled, wanted=[key])
    ctx = replace(missing_thinking.RULE.context(), given=given).with_request(request)
    outcome = missing_thinking.RULE.apply(items, ctx)
    assert outcome.messages is not items
    introduced = missing_thinking.RULE.introduces
    assert introduced is not None
    before = messages_scan.signals.__wrapped__(items)  # type: ignore[attr-defined]
    after = messages_scan.signals.__wrapped__(outcome.messages)  # type: ignore[attr-defined]
    assert after <= before | introduced, after - before


def test_a_wrong_responses_horizon_is_caught() -> None:
    """``responses-unanswered-calls`` declared per item: a call the previous request left
    unanswered (it got a stub) is answered by the next request's output, and the whole run gives
    it no stub."""
    rule = next(rule for rule in RESPONSES_RULES if rule.name == "responses-unanswered-calls")
    wrong = replace(rule, horizon=per_message(rule.apply))
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
    ]
    ctx = rule.context()
    assert check_horizon(rule, ctx, items, 2) is False  # the true declaration declines
    assert check_horizon(rule, ctx, items, 3) is True
    with pytest.raises(AssertionError):
        check_horizon(wrong, ctx, items, 2)


def _use(tid: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": "Bash"}]}


def _result(tid: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid}]}


#: A Claude Code session stuck on every id and pairing defect early on, then clean turns.
STUCK_IDS: list[Any] = [
    {"role": "user", "content": "go"},
    _use("functions.Bash:0"),  # outside the id pattern (Kimi's)
    _result("functions.Bash:0"),
    _use(""),  # blank
    _result(""),
    _use("toolu_d"),
    _result("toolu_d"),
    _use("toolu_d"),  # reused, and unanswered
    {"role": "user", "content": [{"type": "text", "text": "never mind"}]},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "next"},
]
ID_RULES = (
    "messages-blank-tool-use-ids",
    "messages-tool-use-id-charset",
    "messages-duplicate-tool-use-ids",
    "messages-tool-result-pairing",
)


@pytest.mark.parametrize("name", ID_RULES)
def test_a_messages_session_stuck_on_ids_resumes_its_new_turn(name: str) -> None:
    """The id and pairing rules (rules/engine/apart.py) repair the early turns and resume the
    next request's turn (its calls and their results, under fresh ids); a turn that reuses a
    held id, or starts with a user message, runs whole."""
    rule = next(rule for rule in MESSAGES_RULES if rule.name == name)
    ctx = rule.context()
    assert rule.apply(STUCK_IDS, ctx).changes  # the history carries its defect
    turn = [_use("toolu_new"), _result("toolu_new")]
    assert check_horizon(rule, ctx, STUCK_IDS + turn, len(STUCK_IDS)) is True
    reused = [_use("toolu_d"), _result("toolu_d")]
    assert check_horizon(rule, ctx, STUCK_IDS + reused, len(STUCK_IDS)) is False
    late = [_result("toolu_late"), _use("toolu_late")]
    assert check_horizon(rule, ctx, STUCK_IDS + late, len(STUCK_IDS)) is False


def test_a_pairing_horizon_that_forgets_the_end_is_caught() -> None:
    """The pairing rule drops a user message holding only an orphan result, and then joins the
    assistants it leaves adjacent: over the history alone the last assistant stands last, over
    the history and a new assistant turn the two are one. The true horizon sees that the run
    changed the end of the list and declines; one that forgets it is caught."""
    rule = next(rule for rule in MESSAGES_RULES if rule.name == "messages-tool-result-pairing")
    assert rule.horizon is not None and rule.horizon.resume is not None
    resume = rule.horizon.resume

    def forgetting(messages: list[Any], ctx: RuleContext, state: Any) -> Any:
        return resume(messages, ctx, None if state is None else (state[0], True))

    wrong = replace(rule, horizon=carried(forgetting))
    items = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "looking"},
        _result("toolu_gone"),  # answers nothing: dropped, and the message with it
        {"role": "assistant", "content": "found it"},
        {"role": "user", "content": "thanks"},
    ]
    ctx = rule.context()
    assert check_horizon(rule, ctx, items, 3) is False
    with pytest.raises(AssertionError):
        check_horizon(wrong, ctx, items, 3)
