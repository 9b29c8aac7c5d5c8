"""Repairs that resume: a request that is the previous request of its session plus a turn is
repaired over the new turn only.

An agent re-sends its whole history on every request, and a stuck session carries its early
defect in every one. What the rules decided for the previous request's messages stands, unless
the new turn can change it: each rule says how far back a new message can reach (its
``Horizon``, rules/engine/base.py), and the previous run left, per step, the length of the list
the step was given, its changes and the state it carried (``Carried``, ``Mark``:
``run_rules(record=True)``). ``resume_rules`` runs each step over the new messages only, as the
earlier steps left them, from that state, and puts its changes after the ones it made before,
their indices counted from the step's own list; the messages before stay as the previous run
made them.

Why that is the whole run's result: a step's input is, by induction, the list the previous run
gave it, then the new messages as the earlier steps made them. A ``message`` rule decides each
message by itself (and the request's fields, which must be the previous request's: the caller
compares them), so its output is the previous output then its output over the new messages; a
``carried`` rule's state after a list is all its decisions over what follows depend on, and its
decisions over a list are final once anything follows whatever its ``resume`` accepted; a
``fields`` rule reads no message and runs again over the fields. A step the walk does not wake
would change nothing over the whole list (``Rule.woken_by`` never misses a case): it must not
have changed the messages before either. Anything else (a step that must run and cannot say its
horizon, a state not known, a rule that raises, a walk not given) gives ``None``: the caller
runs every rule whole, as without the previous run. tests/proxy/test_prefix.py replays growing
sessions with and without resuming and asserts the same bytes, changes and failures.

Two steps are not run at all, as the rules are functions of their input: a step given the very
list it was given before (no new message reaches it: ``mark.length`` messages as the previous
run made them, and nothing after) makes what it made then, so its mark stands (a step that
reads the request, only if it is given the fields as the request brought them and gave back
none before: ``Carried.quiet``); and a ``fields`` step that changed nothing at all (or slept,
its keys not in the request), given the request's fields as they came, does so again (the
fields are the previous request's, and it reads no message: tests/rules/test_horizons.py
holds it). An identical request (a retry) so costs a lookup per step that may wake, and a
growing session's request-level rules do not run at all when they have nothing to do
(tests/rules/test_resume.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from rules.engine import memo
from rules.engine.base import Change, Horizon, Outcome, RequestFacts, Rule, RuleContext
from rules.engine.pipeline import (
    MISSING,
    Carried,
    Mark,
    PipelineResult,
    Walked,
    _carry,
    horizon_of,
    quiet,
)
from rules.engine.wake import field_signals


@dataclass(frozen=True, slots=True)
class _Step:
    """What the loop needs of a step, worked out once per steps (``_facts``)."""

    rule: Rule
    ctx: RuleContext
    horizon: Horizon | None
    #: The walk it is gated on (``None``: none), or whether the request's keys gate it, and
    #: the signals that wake it.
    scan: Any
    keyed: bool
    woken_by: frozenset[str]
    #: Its state when it did not run: ``None`` (it carries none) or ``MISSING``.
    idle: Any
    #: A ``fields`` step: it reads no message.
    fields: bool


#: The facts of the last steps resumed, by the steps' id (plans are few and long-lived).
_FACTS: dict[int, tuple[Sequence[Any], tuple[_Step, ...]]] = {}
_MAX_FACTS: Final = 64
#: The facts of each step of those, by its context's id: steps given one request's own facts
#: (``RequestFacts.own``: new each request) share the others' with their plan's.
_STEPS: dict[int, tuple[RuleContext, _Step]] = {}


def _facts(steps: Sequence[tuple[Rule, RuleContext]]) -> tuple[_Step, ...]:
    known = _FACTS.get(id(steps))
    if known is not None and known[0] is steps:
        return known[1]
    facts = []
    own = False
    for rule, ctx in steps:
        if ctx.given.own:  # one request's: what was recalled or asked for it is not kept here
            own = True
            facts.append(_step_of(rule, ctx))
            continue
        kept = _STEPS.get(id(ctx))
        if kept is None or kept[0] is not ctx or kept[1].rule is not rule:
            if len(_STEPS) >= 64 * _MAX_FACTS:
                _STEPS.clear()
            kept = _STEPS[id(ctx)] = (ctx, _step_of(rule, ctx))
        facts.append(kept[1])
    if own:
        return tuple(facts)
    if len(_FACTS) >= _MAX_FACTS:
        _FACTS.clear()
    _FACTS[id(steps)] = (steps, tuple(facts))
    return _FACTS[id(steps)][1]


def _step_of(rule: Rule, ctx: RuleContext) -> _Step:
    horizon = horizon_of(rule, ctx)
    gated = ctx.woken_by is not None
    scan = rule.scan if gated else None
    keyed = gated and rule.reads_request and rule.scan is None
    idle = None if horizon is not None and horizon.kind != "carried" else MISSING
    woken_by = ctx.woken_by or frozenset()
    fields = horizon is not None and horizon.kind == "fields"
    return _Step(rule, ctx, horizon, scan, keyed, woken_by, idle, fields)


def resume_rules(
    messages: list[Any],
    steps: Sequence[tuple[Rule, RuleContext]],
    carried: Carried,
    *,
    request: Mapping[str, Any],
    walked: Walked,
) -> PipelineResult | None:
    """``run_rules(messages, steps, private=True, request=request, walked=walked,
    record=True)``, where ``messages`` is ``carried``'s list then the new messages, worked out
    over the new messages only; ``None`` when that cannot be trusted (run them whole)."""
    if len(messages) < carried.length or not _same_steps(steps, carried.steps):
        return None
    run = _Run(messages, carried, request, walked)
    with memo.run():
        if not run.through(_facts(steps)):
            return None
    for position, mark in carried.marks.items():
        if position not in run.marks and (mark.changes or mark.replaced):
            return None  # it changed the messages before, and does not run now: cannot be
    clean = carried.clean and run.window is run.given
    out = messages if clean else carried.messages + run.window
    again = Carried(steps, len(messages), run.marks, out, clean, None, 0, tuple(run.quiet))
    return PipelineResult(out, tuple(run.changes), (), run.new_fields, again, resumed=True)


def _same_steps(
    steps: Sequence[tuple[Rule, RuleContext]], before: Sequence[tuple[Rule, RuleContext]]
) -> bool:
    """``steps`` decide the messages ``before`` ran over as ``before`` did: the very steps, or
    the same plan given facts that say the same of those messages (``_same_facts``)."""
    if steps is before:
        return True
    if len(steps) != len(before):
        return False
    for (rule, ctx), (was_rule, was) in zip(steps, before, strict=True):
        if rule is not was_rule:
            return False
        if ctx is not was and not (
            rule.gets_facts
            and _same_facts(ctx.given, was.given)
            and ctx.options is was.options
            and ctx == replace(was, given=ctx.given)
        ):
            return False
    return True


def _same_facts(given: RequestFacts, before: RequestFacts) -> bool:
    """``given`` says of the previous request's turns what ``before`` said: the same scope and
    betas, and for each key those turns asked for (``RequestFacts.wanted``), the same value or
    none again. Keys the new turn adds may be recalled too (a DeepSeek thinking session whose
    stash restores each turn's reasoning gives one more value with every request)."""
    if given is before:
        return True
    if given.scope != before.scope or given.betas != before.betas:
        return False
    if before.wanted is None:
        return given.recalled == before.recalled
    now, then = given.recalled, before.recalled
    return all(now.get(key, MISSING) == then.get(key, MISSING) for key in before.wanted)


class _Run:
    """One resumed run: the new messages as the steps so far left them, and what they did."""

    def __init__(
        self,
        messages: list[Any],
        carried: Carried,
        request: Mapping[str, Any],
        walked: Walked,
    ) -> None:
        self.carried = carried
        self.signals_of = dict(walked.signals)
        self.window = self.given = messages[carried.length :]
        self.fields: Mapping[str, Any] = request
        self.new_fields: dict[str, Any] | None = None
        self.keys: frozenset[str] | None = None
        self.changes: list[Change] = []
        self.marks: dict[int, Mark] = {}
        #: The length of the messages before the new ones, as the next step sees them.
        self.closed = carried.length
        #: ``Carried.quiet`` of this run.
        self.quiet: list[int] = []

    def through(self, facts: tuple[_Step, ...]) -> bool:
        """Run every step the walks wake, in order; ``False`` if one cannot resume."""
        candidates = _candidates(facts, self.signals_of)
        at = 0
        while candidates is not None and at < len(candidates):
            position = candidates[at]
            at += 1
            step = facts[position]
            if step.fields and self._quiet(position):
                continue  # it changed nothing given these fields: it changes nothing again
            if step.keyed:
                self.keys = field_signals(self.fields) if self.keys is None else self.keys
                if step.woken_by.isdisjoint(self.keys):
                    if self.new_fields is None:
                        self.quiet.append(position)  # asleep given these fields: quiet
                    continue
            replaced = self._run(position, step)
            if replaced is None:
                return False
            if replaced and self._carried(step.rule):
                later = _candidates(facts, self.signals_of)
                candidates = None if later is None else [p for p in later if p > position]
                at = 0
        return candidates is not None

    def _quiet(self, position: int) -> bool:
        """Whether the step at ``position`` reads the request's fields as they came and gave
        back none before (``Carried.quiet``): then it is quiet in this run too."""
        if self.new_fields is None and position in self.carried.quiet:
            self.quiet.append(position)
            return True
        return False

    def _run(self, position: int, step: _Step) -> bool | None:
        """Run one step over the new messages: whether it replaced the list (``None``: it
        cannot resume). A step given the list it was given before keeps its mark."""
        mark = self.carried.marks.get(position)
        if (
            not self.window
            and mark is not None
            and mark.length == self.closed
            and not step.fields
            and (not step.rule.reads_request or self._quiet(position))
        ):
            self.marks[position] = mark
            self.changes.extend(mark.changes)
            self.closed = mark.after
            return mark.replaced
        made = _step(step, self.fields, mark, self.window, self.closed)
        if made is None:
            return None
        outcome, now, step_changes = made
        fresh = step.rule.reads_request and self.new_fields is None
        if fresh and quiet(step.fields, outcome, self.window):
            self.quiet.append(position)
        self.changes.extend(step_changes)
        if now is not None:
            self.marks[position] = now
        self.closed = self.closed if mark is None else mark.after
        self.window = outcome.messages
        if outcome.request is not None and step.rule.reads_request:
            self.fields = self.new_fields = outcome.request
            self.keys = None
        return now is not None and now.replaced

    def _carried(self, rule: Rule) -> bool:
        """As the whole run, after a step that replaced the list: the walks' signals with what
        it may have set (``_carry``); whether they changed (other steps may wake)."""
        was = list(self.signals_of.values())
        _carry(self.signals_of, rule)
        return not all(a is b for a, b in zip(was, self.signals_of.values(), strict=True))


#: The steps a walk's signals may wake, by the signals, for the last steps resumed.
_WOKEN: dict[tuple[int, Any], tuple[Sequence[Any], tuple[int, ...] | None]] = {}


def _candidates(
    facts: tuple[_Step, ...], signals_of: Mapping[Any, frozenset[str] | None]
) -> Sequence[int] | None:
    """The positions of the steps that run under the walks' ``signals_of`` (as ``run_rules``
    gates them; a step gated on the request's keys is checked when it comes), in order;
    ``None`` if a step is gated on a walk not given. Remembered per steps and signals."""
    key = (id(facts), frozenset(signals_of.items()))
    known = _WOKEN.get(key)
    if known is not None and known[0] is facts:
        return known[1]
    positions: list[int] = []
    for position, step in enumerate(facts):
        if step.scan is not None:
            if step.scan not in signals_of:
                _WOKEN[key] = (facts, None)
                return None
            signals = signals_of[step.scan]
            if signals is not None and step.woken_by.isdisjoint(signals):
                continue
        positions.append(position)
    if any(step.ctx.given.own for step in facts):
        return positions  # one request's steps (``_facts``): not remembered
    if len(_WOKEN) >= 4 * _MAX_FACTS:
        _WOKEN.clear()
    _WOKEN[key] = (facts, tuple(positions))
    return _WOKEN[key][1]


def _step(
    step: _Step, fields: Mapping[str, Any], mark: Mark | None, window: list[Any], closed: int
) -> tuple[Outcome, Mark | None, tuple[Change, ...]] | None:
    """The step over the new messages, after ``closed`` messages as it sees them: its outcome,
    its new mark (none for a ``fields`` step that left the list alone, as ``run_rules`` keeps
    it) and its changes over the whole list (a ``fields`` rule's own, as it ran again);
    ``None``: it cannot resume."""
    horizon = step.horizon
    state = step.idle if mark is None else mark.state
    if horizon is None or horizon.resume is None or state is MISSING:
        return None
    if mark is not None and mark.length != closed:
        return None  # cannot be: the steps before made the list the previous run made
    ctx = step.ctx.with_request(fields) if step.rule.reads_request else step.ctx
    try:
        resumed = horizon.resume(window, ctx, state)
    except Exception:  # the whole run records the failure as it is
        return None
    if resumed is None:
        return None
    outcome, state = resumed
    replaced = outcome.messages is not window or (mark is not None and mark.replaced)
    length = closed + len(window)
    after = (closed if mark is None else mark.after) + len(outcome.messages)
    if horizon.kind == "fields":
        if outcome.messages is not window or any(c.index >= 0 for c in outcome.changes):
            return None  # it read or wrote a message after all
        now = Mark(length, after, state, (), True) if replaced else None
        return outcome, now, outcome.changes
    earlier = () if mark is None else mark.changes
    if not outcome.changes:
        return outcome, Mark(length, after, state, earlier, replaced), earlier
    shifted = tuple(
        Change(c.rule, c.index + closed, c.action, c.detail) if c.index >= 0 else c
        for c in outcome.changes
    )
    now = Mark(length, after, state, earlier + shifted, replaced)
    return outcome, now, now.changes
