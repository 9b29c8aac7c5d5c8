"""Run an ordered set of rules over ``messages``: fail-open, never touching the caller's data."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from rules.engine import memo
from rules.engine.base import Change, Horizon, Outcome, Rule, RuleContext
from rules.engine.wake import field_signals

#: A walk over the list that reports the signals set in it (``Rule.scan``).
Scan = Callable[[list[Any]], frozenset[str] | None]
#: A prescan several rules share (``memo.per_run``).
Prescan = Callable[[list[Any]], Any]


@dataclass(frozen=True, slots=True)
class Walked:
    """What a walk the caller did already knows of the list (proxy/relay/prefix.py walks only what a
    request added): what each scan returns for it, and the answers of prescans it gives."""

    signals: Mapping[Scan, frozenset[str] | None] = field(default_factory=dict)
    primed: Mapping[Prescan, Any] = field(default_factory=dict)


NOT_WALKED: Final = Walked()


@dataclass(frozen=True, slots=True)
class RuleFailure:
    """A rule that raised: it was skipped and the others still ran."""

    rule: str
    error: str
    #: ``file:line`` of the frame that raised; the exception text is not kept (it may hold content).
    where: str

    @classmethod
    def of(cls, name: str, exc: BaseException) -> RuleFailure:
        return cls(name, type(exc).__name__, _where(exc))


@dataclass(frozen=True, slots=True)
class PipelineResult:
    messages: list[Any]
    changes: tuple[Change, ...]
    failures: tuple[RuleFailure, ...]
    #: The request's new top-level fields if a request-level rule changed any, else ``None``
    #: (``messages`` in it is stale: use ``messages`` above).
    request: dict[str, Any] | None = None
    #: What the next request of the session needs to resume from this one
    #: (rules/engine/resume.py), when the run was asked to ``record`` it and nothing failed.
    carried: Carried | None = None
    #: The steps ran over the new messages only, going on from ``carried`` of the last request.
    resumed: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changes)


#: A step's state that is not known (it did not run, or cannot say its horizon).
MISSING: Final = object()


class Mark(NamedTuple):
    """What one step that ran did over a request's whole list, for the next request to resume
    from (a step the walk did not wake has none: it changed nothing, and its state is known
    only if its horizon carries none; nor has a ``fields`` step that left the list as it was:
    it runs again over the fields, and its state is none). A tuple: one is made per step that
    runs, on every request of a session, and a frozen dataclass costs three times as much."""

    #: The length of the list the step was given (the index of the next request's first new
    #: message, as the step sees it) and of the list it gave back.
    length: int
    after: int
    #: The state its ``Horizon.resume`` returned (``MISSING``: not known).
    state: Any
    #: Its changes over the whole list (a ``fields`` step's are not kept: it runs again).
    changes: tuple[Change, ...]
    #: It replaced the list (the walks' signals were then carried, ``_carry``).
    replaced: bool


class Carried(NamedTuple):
    """What a request's run leaves for the next request of its session (rules/engine/resume.py):
    the steps it ran (the very object), the length of its list, the ``Mark`` of each step that
    ran (by its position in the steps), the list it made and its ``quiet`` steps. ``written``
    (the body sent, and where its list's items are in it) and ``charge`` are filled in by the
    callers that know them (rules/providers/sanitize.py, proxy/relay/prefix.py). A tuple, as
    ``Mark``."""

    steps: Sequence[tuple[Rule, RuleContext]]
    #: The length of the list it was given (``count`` is a tuple's method).
    length: int
    marks: Mapping[int, Mark]
    messages: list[Any]
    #: No message was changed: the list made is the list given.
    clean: bool
    written: tuple[bytes, int, int] | None = None
    #: Bytes charged for the objects of the messages rules made (``PrefixCache.keep``).
    charge: int = 0
    #: The positions of the steps that read the request, were given its fields as the request
    #: brought them (no step before had changed them) and gave back no new fields: asleep
    #: (their keys not in the request), or run (a ``fields`` step then changed nothing at all).
    #: Given the same fields (a resumed request brings the previous one's bytes around its
    #: list), such a ``fields`` step is asleep or changes nothing again, and another such step
    #: leaves the fields alone (rules/engine/resume.py).
    quiet: tuple[int, ...] = ()

    def but(self, written: tuple[bytes, int, int] | None, charge: int) -> Carried:
        """This record with ``written`` and ``charge`` (spelled out: ``_replace`` costs three
        times as much, and this runs on every request of a session that a rule changed)."""
        steps, length, marks, messages, clean, _, _, quiet = self
        return Carried(steps, length, marks, messages, clean, written, charge, quiet)


def clone(value: Any) -> Any:
    """Structural copy of JSON-shaped data: dicts and lists are new, leaves are shared.

    Cheaper than ``copy.deepcopy`` (no memo, no reduce protocol) and enough to make every
    later write safe, since JSON leaves (str, int, float, bool, None) are immutable.
    """
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def _where(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    code = tb.tb_frame.f_code
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"


def run_rules(
    messages: list[Any],
    steps: Sequence[tuple[Rule, RuleContext]],
    *,
    private: bool = False,
    request: Mapping[str, Any] | None = None,
    walked: Walked = NOT_WALKED,
    record: bool = False,
) -> PipelineResult:
    """Apply ``steps`` in order to ``messages``.

    ``private=True`` says the caller owns ``messages`` outright (the proxy's freshly parsed
    body); otherwise the list is cloned once first, so the caller's objects are provably
    untouched even if a rule were to break its copy-on-write contract. ``request`` holds the
    request's other top-level fields for the rules that read them (it is never mutated: a rule
    that changes it returns a new dict). ``walked``: what the caller's walk knows of the list.
    ``record``: leave what the session's next request resumes from (rules/engine/resume.py).
    """
    current = messages if private else clone(messages)
    fields: Mapping[str, Any] = request if request is not None else {}
    new_fields: dict[str, Any] | None = None
    changes: list[Change] = []
    failures: list[RuleFailure] = []
    # One walk per API scan (``Rule.scan``) says which steps may have work; it holds until a rule
    # changes the list, and then with what it may set (``Rule.introduces``), if it says.
    signals_of: dict[Scan, frozenset[str] | None] = dict(walked.signals)
    keys: frozenset[str] | None = None  # the request's key signals, built when first needed
    marks: dict[int, Mark] | None = {} if record else None
    quiets: list[int] = []  # Carried.quiet
    fresh = quiets  # while the fields are as the request brought them (else a list let go)
    with memo.run():  # shared prescans are per run: no payload is kept past its request
        for prescan, answer in walked.primed.items():
            memo.prime(prescan, current, answer)
        for position, (rule, step_ctx) in enumerate(steps):
            woken_by = step_ctx.woken_by
            if woken_by is not None and _asleep(rule.scan, woken_by, signals_of, current):
                continue
            ctx = step_ctx
            if rule.reads_request:
                if woken_by is not None and rule.scan is None:  # its keys wake it (wake.fields)
                    keys = field_signals(fields) if keys is None else keys
                    if woken_by.isdisjoint(keys):
                        fresh.append(position)  # asleep given these fields: quiet
                        continue
                ctx = step_ctx.with_request(fields)
            try:
                outcome = _applied(marks, position, rule, ctx, current, quiets=fresh)
            except Exception as exc:  # fail-open: one broken rule must not block the request
                failures.append(RuleFailure.of(rule.name, exc))
                marks = None  # a run that failed is not resumed from
                continue
            if outcome.messages is not current:
                _carry(signals_of, rule)  # the walks read the list as it was
            current = outcome.messages
            changes.extend(outcome.changes)
            if outcome.request is not None and rule.reads_request:
                fields = new_fields = outcome.request
                keys, fresh = None, []
    carried = None if marks is None else _left(steps, messages, marks, current, quiets)
    return PipelineResult(current, tuple(changes), tuple(failures), new_fields, carried)


def _left(
    steps: Sequence[tuple[Rule, RuleContext]],
    messages: list[Any],
    marks: dict[int, Mark],
    current: list[Any],
    quiets: list[int],
) -> Carried:
    clean = current is messages
    return Carried(steps, len(messages), marks, current, clean, None, 0, tuple(quiets))


def quiet(fields: bool, outcome: Outcome, given: list[Any]) -> bool:
    """Whether a step that read the request's fields as they came is quiet
    (``Carried.quiet``): it gave back no fields, and (``fields``: a ``fields`` step) changed
    nothing at all of the list ``given``."""
    if outcome.request is not None:
        return False
    return not fields or not (outcome.changes or outcome.messages is not given)


def _asleep(
    scan: Scan | None,
    woken_by: frozenset[str],
    signals_of: dict[Scan, frozenset[str] | None],
    current: list[Any],
) -> bool:
    """The step's walk (walked now if it was not yet) set none of the signals that wake it."""
    if scan is None:
        return False
    if scan not in signals_of:
        signals_of[scan] = _signals(scan, current)
    signals = signals_of[scan]
    return signals is not None and woken_by.isdisjoint(signals)


def horizon_of(rule: Rule, ctx: RuleContext) -> Horizon | None:
    """The rule's horizon, if it holds under the step's options."""
    horizon = rule.horizon
    if horizon is None or (horizon.holds is not None and not horizon.holds(ctx.options)):
        return None
    return horizon


def _applied(
    marks: dict[int, Mark] | None,
    position: int,
    rule: Rule,
    ctx: RuleContext,
    current: list[Any],
    *,
    quiets: list[int],
) -> Outcome:
    """Run a step over the whole list and, when the run is recorded, mark what it did (a
    ``carried`` rule through its ``resume`` from the start, which is its ``apply``:
    tests/rules/test_horizons.py), and note it in ``quiets`` (a list let go once the step is
    given other fields than the request's own) if it is quiet (``Carried.quiet``)."""
    if marks is None:
        return rule.apply(current, ctx)
    horizon = horizon_of(rule, ctx)
    outcome = _marked(marks, position, rule, ctx, current, horizon=horizon)
    fields = horizon is not None and horizon.kind == "fields"
    if rule.reads_request and quiet(fields, outcome, current):
        quiets.append(position)
    return outcome


def _marked(
    marks: dict[int, Mark],
    position: int,
    rule: Rule,
    ctx: RuleContext,
    current: list[Any],
    *,
    horizon: Horizon | None,
) -> Outcome:
    """``_applied``'s run, and its mark."""
    resumed = None
    if horizon is not None and horizon.kind == "carried" and horizon.resume is not None:
        resumed = horizon.resume(current, ctx, None)
    if resumed is not None:
        outcome, state = resumed
    else:
        outcome = rule.apply(current, ctx)
        state = None if horizon is not None and horizon.kind != "carried" else MISSING
    replaced = outcome.messages is not current
    if horizon is not None and horizon.kind == "fields":
        if replaced:  # it wrote a message after all: its mark says so, and it cannot resume
            marks[position] = Mark(len(current), len(outcome.messages), state, (), True)
        return outcome
    marks[position] = Mark(len(current), len(outcome.messages), state, outcome.changes, replaced)
    return outcome


def _carry(walked: dict[Scan, frozenset[str] | None], rule: Rule) -> None:
    """After ``rule`` changed the list: each walk's signals with those the rule may have set
    (``Rule.introduces``), or ``None`` (untrusted: the later rules run their own prescans). A
    scan not walked yet walks the changed list when a step first needs it."""
    introduces = rule.introduces
    for scan, signals in walked.items():
        if signals is not None and introduces is not None and rule.scan is scan:
            walked[scan] = signals | introduces if introduces else signals
        else:
            walked[scan] = None


def _signals(scan: Scan, messages: list[Any]) -> frozenset[str] | None:
    try:
        return scan(messages)
    except Exception:  # fail-open: a walk that trips means every rule runs in full
        return None


def default_steps(
    rules: Sequence[Rule],
    settings: Mapping[str, Mapping[str, Any] | bool] | None = None,
    *,
    log_content: bool = False,
) -> list[tuple[Rule, RuleContext]]:
    """Steps for ``rules`` with each rule's default toggle, overridden by ``settings``.

    ``settings`` maps a rule name to ``True``/``False`` or to ``{"enabled": bool, **options}``.
    Names are assumed valid (the proxy's config loader validates them at startup).
    """
    settings = settings or {}
    steps: list[tuple[Rule, RuleContext]] = []
    for rule in rules:
        setting = settings.get(rule.name, {})
        if isinstance(setting, bool):
            enabled, options = setting, {}
        else:
            options = dict(setting)
            enabled = bool(options.pop("enabled", rule.default))
        if enabled:
            steps.append((rule, rule.context(options, log_content=log_content)))
    return steps
