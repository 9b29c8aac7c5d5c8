"""Run the reply rules over a response: per choice, each step through every armed rule in
order (``ChoicePipe``), streamed or whole (``fix_message``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rules.engine.base import RuleContext
from rules.replies import REPLY_RULES
from rules.replies.base import ChoiceFix, ChoiceState, Delta, ReplyRule, Search, Step, changed

ReplyStep = tuple[ReplyRule, RuleContext]


def needles_of(steps: Sequence[ReplyStep]) -> Search | None:
    """What a whole answer must hold for any of ``steps`` to act on it (each rule's
    ``needles``, joined), or ``None`` if one of them cannot say."""
    found: list[bytes] = []
    for rule, ctx in steps:
        own = rule.needles(ctx)
        if own is None:
            return None
        found += own
    return Search.of(tuple(found))


@dataclass(frozen=True, slots=True)
class ReplyPlan:
    """The reply rules a profile runs, with the operator's settings on top: ``steps`` are
    enforced; in report mode ``report`` holds every step, run on the side (what it would write
    is thrown away, its changes to the rules in ``reported`` are logged). ``needles`` and
    ``report_needles`` are what a whole chat answer must hold for ``steps`` (``report``) to
    have anything to do (``needles_of``), read once per plan."""

    steps: tuple[ReplyStep, ...] = ()
    report: tuple[ReplyStep, ...] | None = None
    reported: frozenset[str] = frozenset()
    needles: Search | None = field(init=False, compare=False, repr=False)
    report_needles: Search | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "needles", needles_of(self.steps))
        object.__setattr__(self, "report_needles", needles_of(self.report or ()))

    def __bool__(self) -> bool:
        return bool(self.steps) or bool(self.report)

    def context(self, name: str) -> RuleContext | None:
        """The context of the rule ``name`` if it runs (enforced or reported), else ``None``."""
        for rule, ctx in self.report or self.steps:
            if rule.name == name:
                return ctx
        return None


NO_REPLIES = ReplyPlan()


def compile_reply_plan(
    settings: Mapping[str, Mapping[str, Any]],
    *,
    log_content: bool = False,
    report: frozenset[str] = frozenset(),
) -> ReplyPlan:
    """The reply plan for merged ``settings`` (rule name -> ``{"enabled": ..., **options}``;
    names of other rules are ignored): each rule's default toggle unless set, in
    ``REPLY_RULES``' order; the rules named in ``report`` in report mode."""
    steps: list[ReplyStep] = []
    for rule in REPLY_RULES:
        options = dict(settings.get(rule.name, {}))
        if bool(options.pop("enabled", rule.default)):
            steps.append((rule, rule.context(options, log_content=log_content)))
    reported = frozenset(rule.name for rule, _ in steps if rule.name in report)
    if not reported:
        return ReplyPlan(tuple(steps))
    enforced = tuple(step for step in steps if step[0].name not in reported)
    return ReplyPlan(enforced, tuple(steps), reported)


class ChoicePipe:
    """The armed rules' fixes for one choice, in rule order."""

    def __init__(self, fixes: list[ChoiceFix], state: ChoiceState) -> None:
        self.fixes = fixes
        self.state = state

    def feed(self, step: Step) -> list[Step]:
        """The steps to pass on for ``step`` (``[step]`` itself when no rule changed it)."""
        steps = [step]
        for fix in self.fixes:
            if len(steps) == 1:
                steps = fix.feed(steps[0])
            else:
                steps = [out for s in steps for out in fix.feed(s)]
        return steps

    def end(self) -> list[Step]:
        """What the rules still hold at the end of the stream, through the later rules."""
        steps: list[Step] = []
        for fix in self.fixes:
            steps = [*[out for s in steps for out in fix.feed(s)], *fix.end()]
        return steps


def arms_any(steps: Sequence[ReplyStep], request: Mapping[str, Any]) -> bool:
    """Whether one of ``steps`` arms for ``request``: ``bool(ReplyRun(steps, request))``,
    asked up to the first that does."""
    return any(rule.arms(request, ctx) for rule, ctx in steps)


class ReplyRun:
    """The reply rules armed for one request; ``choice`` starts a choice's pipe."""

    def __init__(
        self,
        steps: Sequence[ReplyStep],
        request: Mapping[str, Any],
        *,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        self.request = request
        self.armed = [(rule, ctx) for rule, ctx in steps if rule.arms(request, ctx)]
        self.new_id = new_id

    def __bool__(self) -> bool:
        return bool(self.armed)

    def choice(self, index: int, *, stream: bool = True) -> ChoicePipe:
        state = ChoiceState(index, stream)
        if self.new_id is not None:
            state.new_id = self.new_id
        fixes = [
            fix
            for rule, ctx in self.armed
            if (fix := rule.fix(self.request, ctx, state)) is not None
        ]
        return ChoicePipe(fixes, state)


def fix_message(pipe: ChoicePipe, message: Delta, finish: str | None) -> tuple[Delta, str | None]:
    """A whole (non-streamed) choice through the pipe: its message and ``finish_reason``
    rebuilt from the steps (the same objects when no rule changed anything: text a rule held
    and let go, rebuilt, would lose what the rebuild does not keep, an empty ``tool_calls``)."""
    step = Step(message, finish)
    steps = pipe.feed(step) + pipe.end()
    if (steps == [step] and steps[0] is step) or not changed(pipe.state.changes):
        return message, finish
    merged: Delta = {}
    content: list[str] = []
    calls: list[Any] = []
    last = finish
    for out in steps:
        for key, value in out.delta.items():
            if key == "content":
                if isinstance(value, str):
                    content.append(value)
            elif key == "tool_calls":
                calls.extend(value if isinstance(value, list) else [])
            else:
                merged.setdefault(key, value)
        last = out.finish if out.finish is not None else last
    text = "".join(content)
    merged["content"] = text if text or not calls else None
    if calls:
        merged["tool_calls"] = [
            {k: v for k, v in call.items() if k != "index"} if isinstance(call, dict) else call
            for call in calls
        ]
    return merged, last
