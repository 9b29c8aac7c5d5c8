"""The steps a resumed run does not run at all (rules/engine/resume.py): a step given the very
list it was given before keeps its mark, and a ``fields`` step that changed nothing given the
request's fields as they came changes nothing again. Each shortcut is taken where it holds
(counted: the rule is not called) and not where it does not: the oracle is the whole run
(``run_rules`` over the whole list, no record), written out here, never the resumed run's.

The rules below are made for the test: a ``flag`` rule that, reading the request, sets its
field ``flag`` once a message says ``"raise"``, the ``fields`` rule that drops that field, a
rule that numbers each message and a rule that drops each message saying ``"drop"``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried, fields_only, per_message
from rules.engine.pipeline import PipelineResult, Walked, run_rules
from rules.engine.request import DROP, with_fields
from rules.engine.resume import resume_rules
from rules.engine.wake import fields

CALLS: Counter[str] = Counter()


def _says(message: Any, word: str) -> bool:
    return isinstance(message, dict) and message.get("content") == word


def _flag_resume(messages: list[Any], ctx: RuleContext, state: Any) -> tuple[Outcome, Any] | None:
    CALLS["flag"] += 1
    raised = bool(state) or any(_says(message, "raise") for message in messages)
    if not raised:
        return Outcome(messages), False
    return Outcome(messages, request=with_fields(ctx.request, {"flag": True})), True


def _flag_apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    made = _flag_resume(messages, ctx, None)
    assert made is not None
    return made[0]


def _unflag(messages: list[Any], ctx: RuleContext) -> Outcome:
    CALLS["unflag"] += 1
    if "flag" not in ctx.request:
        return Outcome(messages)
    change = Change("unflag", -1, "dropped", {"field": "flag"})
    return Outcome(messages, (change,), with_fields(ctx.request, {"flag": DROP}))


def _hide_resume(messages: list[Any], ctx: RuleContext, state: Any) -> tuple[Outcome, Any] | None:
    shown = bool(state) or any(_says(message, "show") for message in messages)
    if shown or "flag" not in ctx.request:
        return Outcome(messages), shown
    return Outcome(messages, request=with_fields(ctx.request, {"flag": DROP})), shown


def _hide_apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    made = _hide_resume(messages, ctx, None)
    assert made is not None
    return made[0]


def _number_resume(messages: list[Any], ctx: RuleContext, state: Any) -> tuple[Outcome, Any] | None:
    CALLS["number"] += 1
    start = state or 0
    changes = tuple(
        Change("number", index, "counted", {"n": start + index}) for index in range(len(messages))
    )
    return Outcome(messages, changes), start + len(messages)


def _number_apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    made = _number_resume(messages, ctx, None)
    assert made is not None
    return made[0]


def _drop(messages: list[Any], ctx: RuleContext) -> Outcome:
    CALLS["drop"] += 1
    kept = [message for message in messages if not _says(message, "drop")]
    if len(kept) == len(messages):
        return Outcome(messages)
    dropped = [i for i, message in enumerate(messages) if _says(message, "drop")]
    return Outcome(kept, tuple(Change("drop", i, "dropped", {}) for i in dropped))


def _rule(
    name: str, apply: Any, horizon: Any, *, reads_request: bool = False, woken_by: Any = None
) -> Rule:
    return Rule(
        name=name,
        summary=name,
        defect=name,
        repair=name,
        safety="safe",
        default=True,
        apply=apply,
        reads_request=reads_request,
        woken_by=woken_by,
        horizon=horizon,
    )


FLAG = _rule("flag", _flag_apply, carried(_flag_resume), reads_request=True)
UNFLAG = _rule("unflag", _unflag, fields_only(_unflag), reads_request=True)
#: The same, woken by the request's key only (asleep without it: quiet too).
KEYED = _rule("unflag", _unflag, fields_only(_unflag), reads_request=True, woken_by=fields("flag"))
HIDE = _rule("hide", _hide_apply, carried(_hide_resume), reads_request=True)
NUMBER = _rule("number", _number_apply, carried(_number_resume))
DROPS = _rule("drop", _drop, per_message(_drop))


def _steps(*rules: Rule) -> list[tuple[Rule, RuleContext]]:
    return [(rule, rule.context()) for rule in rules]


def _request(messages: list[Any], flag: bool = False) -> dict[str, Any]:
    return {"model": "m", "messages": messages, **({"flag": True} if flag else {})}


def _session(
    steps: Sequence[tuple[Rule, RuleContext]], lists: Sequence[list[Any]], *, flag: bool = False
) -> list[PipelineResult]:
    """Each list a request of one session: the first run whole and recorded, each next one
    resumed from the one before (``None`` if it could not), each compared with the whole run."""
    out: list[PipelineResult] = []
    last = None
    for messages in lists:
        whole = run_rules(list(messages), steps, private=True, request=_request(messages, flag))
        if last is None:
            given = list(messages)
            request = _request(given, flag)
            made: PipelineResult | None = run_rules(
                given, steps, private=True, request=request, record=True
            )
        else:
            given = list(messages)
            made = resume_rules(given, steps, last, request=_request(given, flag), walked=Walked())
        assert made is not None
        assert made.messages == whole.messages
        assert made.changes == whole.changes
        assert (made.request is None) == (whole.request is None)
        if whole.request is not None:
            assert made.request is not None
            assert {k: v for k, v in made.request.items() if k != "messages"} == {
                k: v for k, v in whole.request.items() if k != "messages"
            }
        assert made.carried is not None
        last = made.carried
        out.append(made)
    return out


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_a_quiet_fields_step_is_not_run_again() -> None:
    """Given the same fields, the ``fields`` step that changed nothing is not called."""
    steps = _steps(FLAG, NUMBER, UNFLAG)
    first = [_user("a")]
    CALLS.clear()
    done = _session(steps, [first, [*first, _user("b")], [*first, _user("b"), _user("c")]])
    assert all(result.resumed for result in done[1:])
    # The whole oracle's three runs and the recorded first run; resumed, ``number`` only.
    assert CALLS["unflag"] == 3 + 1
    assert CALLS["number"] == 3 + 1 + 2


@pytest.mark.parametrize("unflag", [UNFLAG, KEYED], ids=["awake", "keyed"])
def test_a_quiet_fields_step_runs_once_an_earlier_step_changed_the_fields(unflag: Rule) -> None:
    """``unflag`` changed nothing before (or was asleep); this request's new turn makes
    ``flag`` set the field, so ``unflag`` is given other fields and must run (skipped, ``flag``
    would stay)."""
    steps = _steps(FLAG, NUMBER, unflag)
    first = [_user("a")]
    done = _session(steps, [first, [*first, _user("raise")], [*first, _user("raise"), _user("x")]])
    assert done[1].resumed and done[1].changes[-1].rule == "unflag"
    assert done[2].resumed and done[2].changes[-1].rule == "unflag"


@pytest.mark.parametrize("unflag", [UNFLAG, KEYED], ids=["awake", "keyed"])
def test_a_fields_step_quiet_under_changed_fields_is_not_quiet_under_the_fields_as_they_came(
    unflag: Rule,
) -> None:
    """``hide`` drops the request's ``flag`` until a message says ``"show"``: ``unflag``, given
    the fields ``hide`` left, finds nothing to drop (or sleeps); once ``hide`` lets the field
    be, ``unflag`` is given the fields as they came and must drop it (not noted quiet before,
    in the whole run or in a resumed one)."""
    steps = _steps(HIDE, NUMBER, unflag)
    first = [_user("a")]
    lists = [first, [*first, _user("b")], [*first, _user("b"), _user("show")]]
    done = _session(steps, lists, flag=True)
    assert done[1].resumed and done[2].resumed
    assert done[2].changes[-1].rule == "unflag"


def test_a_repeated_request_runs_no_step_that_keeps_its_list() -> None:
    """The same request again: each step is given the list it was given before; the ones that
    read no fields, or the fields as they came and gave back none, keep their marks."""
    steps = _steps(DROPS, FLAG, NUMBER, UNFLAG)
    first = [_user("a"), _user("drop"), _user("b")]
    _session(steps, [first])
    CALLS.clear()
    done = _session(steps, [first, list(first), list(first)])
    assert done[1].resumed and done[2].resumed
    assert done[2].changes == done[0].changes
    # The whole oracle's three runs and the recorded first run: none resumed.
    assert Counter({"drop": 4, "flag": 4, "number": 4, "unflag": 4}) == CALLS


def test_a_step_that_gave_back_fields_runs_again_on_a_repeated_request() -> None:
    """``flag`` set its field before: its mark alone does not say so, so it runs again (its
    mark reused, the request would go without the field, and ``unflag`` with it)."""
    steps = _steps(FLAG, NUMBER, UNFLAG)
    raised = [_user("raise"), _user("b")]
    CALLS.clear()
    done = _session(steps, [raised, list(raised), list(raised)])
    assert done[2].resumed and done[2].changes[-1].rule == "unflag"
    # The whole oracle's three runs, the recorded first run; then ``flag`` only, twice.
    assert CALLS["flag"] == 3 + 1 + 2 and CALLS["number"] == 3 + 1


def test_a_step_after_one_that_dropped_the_new_turn_keeps_its_mark() -> None:
    """A new turn an earlier step drops leaves the later steps the list they had: they keep
    their marks (``number`` is not called), and the whole run agrees."""
    steps = _steps(DROPS, NUMBER)
    first = [_user("a")]
    _session(steps, [first])
    CALLS.clear()
    done = _session(steps, [first, [*first, _user("drop")], [*first, _user("drop"), _user("c")]])
    assert done[1].resumed and done[2].resumed
    # The whole oracle's three runs, the recorded first run, none for the dropped turn.
    assert CALLS["number"] == 3 + 1 + 1
