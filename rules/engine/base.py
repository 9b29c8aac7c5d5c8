"""The contract every repair rule follows: Rule, Option, Change, Outcome, RuleContext."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

#: A message as the client sent it. Rules must tolerate anything here: a message may be a
#: non-dict, a field may have any JSON type.
Message = dict[str, Any]

#: Fix safety (ruff's fix applicability): what a change may do to the request. The one
#: vocabulary, declared on each rule's record (``Rule.safety``) and read by recovery, escalation,
#: learned repairs, ``chatmend check``, the docs and the page:
#:
#: - ``safe``: every piece of the conversation the client sent reaches the provider (each text,
#:   content part and image, each tool call with its name and arguments, each tool result,
#:   each thinking block) and chatmend writes no words of its own: an id renamed in the call
#:   and its result together, a message moved or merged, a JSON type coerced, what carried
#:   nothing removed (an empty list, an empty text block), a shape filled with what says nothing
#:   (``""``, ``type: function``, the empty schema), keys no provider reads dropped (an agent's
#:   own bookkeeping).
#: - ``unsafe``: the conversation is kept, but the request asks or says something else: a
#:   sampling value, ``tool_choice`` or thinking changed, a request parameter or a message field
#:   dropped, a tool renamed, a turn, a stub result, a placeholder or a text rendering written
#:   by chatmend.
#: - ``lossy``: something the client sent does not reach the provider: a message, a text, a
#:   part or image, a thinking block, tool arguments, a tool result.
Safety = Literal["safe", "unsafe", "lossy"]
#: The classes, mildest first.
SAFETY_CLASSES: tuple[Safety, ...] = ("safe", "unsafe", "lossy")


def worst(classes: Iterable[Safety]) -> Safety:
    """The worst of ``classes`` (``safe`` for none)."""
    return max(classes, key=SAFETY_CLASSES.index, default="safe")


@dataclass(frozen=True, slots=True)
class Change:
    """One rewrite, described by ids and counts, never by message text."""

    rule: str
    #: Position of the message in the list the rule received (rules run in order, so a later
    #: rule's indices refer to the list as the earlier rules left it).
    index: int
    #: What happened, snake_case past tense: ``merged``, ``renamed_id``, ``dropped_key``, ...
    action: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "index": self.index, "action": self.action, **self.detail}


class WorkBudgetExceeded(Exception):
    """A rule met an input that would cost more than its work budget (a hostile shape): it
    stops, and the pipeline skips it like any rule that raised (fail-open)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a rule returns: the (possibly identical) list and the rewrites it made."""

    messages: list[Any]
    changes: tuple[Change, ...] = ()
    #: For a rule that reads the request (``Rule.reads_request``): the new top-level fields of
    #: the request (a fresh dict built by ``rules.engine.request.with_fields``; ``messages`` in
    #: it is ignored), or ``None`` if unchanged.
    request: dict[str, Any] | None = None


#: What an option holds: the type of its default (the config loader checks values against it).
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Option(Generic[T]):
    """A rule option: declared next to the rule that reads it, validated at startup (a value of
    its default's type, or one of its choices), so ``of`` gives the rule a ``T``."""

    name: str
    default: T
    doc: str
    #: Allowed values; ``None`` means any value of the default's type.
    choices: tuple[Any, ...] | None = None

    def of(self, source: RuleContext | Mapping[str, Any]) -> T:
        """This option's value in a rule's context (or its options mapping): the operator's or
        the profile's, else the default declared here, the one place it is written."""
        options = source.options if isinstance(source, RuleContext) else source
        value: T = options.get(self.name, self.default)
        return value

    def validate(self, value: Any) -> str | None:
        """Return an error text if ``value`` is not acceptable, else ``None``."""
        if self.choices is not None:
            if value not in self.choices:
                allowed = ", ".join(repr(c) for c in self.choices)
                return f"must be one of {allowed}, got {value!r}"
            return None
        expected = type(self.default)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            return f"must be of type {expected.__name__}, got {type(value).__name__}"
        return None


@dataclass(frozen=True, slots=True)
class TextOption(Option[str]):
    """A text option that must hold visible text: an empty or blank placeholder message is
    itself a rejection ("Assistant message must have either content or tool_calls", Mistral;
    "text content blocks must contain non-whitespace text", Anthropic)."""

    def of(self, source: RuleContext | Mapping[str, Any]) -> str:
        """The option's text if it is visible, else the default (a library caller may pass
        options the config loader never validated: an empty placeholder would be a new
        defect)."""
        value = Option.of(self, source)
        return value if isinstance(value, str) and value.strip() else self.default

    def validate(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return f"must be of type str, got {type(value).__name__}"
        if not value.strip():
            return "must be a non-empty text (not only whitespace)"
        return None


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the server knows about a request, given to the rules that read it
    (``Rule.reads_facts``, or a ``Rule.recall``): the request's ``scope`` (the route and the
    client's credential, hashed), the values it ``recalled`` from what it kept of earlier
    responses, for the keys the plan's rules asked for (``Rule.recall``; a rule reads only the
    keys it computes itself, so one mapping serves all), and the request's ``betas``: for a
    Messages request, the values of its ``anthropic-beta`` headers (comma-separated, trimmed,
    lower-cased), which a rule cannot see in the body. Empty outside the proxy, as for a
    request without them."""

    scope: str = ""
    recalled: Mapping[str, Any] = field(default_factory=dict)
    betas: frozenset[str] = frozenset()
    #: The keys the request's turns asked for (``recalled`` holds those found), or ``None``
    #: where not known: the next request of the session, given the same values for them,
    #: leaves those turns as this one did (rules/engine/resume.py).
    wanted: Sequence[str] | None = None

    @property
    def own(self) -> bool:
        """These facts are one request's own (values recalled for it, or the keys it asked
        for): a plan given them is new for each request, and no memo of plans or steps keeps it
        (it would keep the texts and keys of requests long gone)."""
        return bool(self.recalled) or self.wanted is not None

    @property
    def empty(self) -> bool:
        """Nothing to give: the plan runs as compiled (a ``scope`` alone says nothing: a rule
        reads it only to find what was ``recalled``)."""
        return not (self.recalled or self.betas)


NO_FACTS = RequestFacts()


@dataclass(frozen=True, slots=True)
class StashQuery:
    """How a rule asks the server for what it kept from earlier responses (the reasoning
    stash): whether a request is one the rule ``serves`` (its response is then worth keeping),
    and the ``keys`` it would read, given the request, the scope and where to start in its
    messages (``0``: all of them). Both are pure, and a message's keys depend on that message,
    the request's fields and the scope alone: a session's next request, its last one plus a
    turn, reads only the messages it adds (proxy/stash/hooks.py)."""

    serves: Callable[[Mapping[str, Any], RuleContext], bool]
    keys: Callable[[Mapping[str, Any], RuleContext, str, int], list[str]]


@dataclass(frozen=True, slots=True)
class RuleContext:
    """What a rule may know besides the messages: its options, the privacy switch and, for a
    rule that declares ``reads_request``, the request's top-level fields."""

    options: Mapping[str, Any] = field(default_factory=dict)
    #: When true a rule may put message-derived text into a Change (operator opt-in).
    log_content: bool = False
    #: The request as the earlier rules left it (``model``, ``tools``, ``tool_choice``, ...),
    #: given only to rules with ``reads_request``; read-only. Its ``messages`` key may be stale:
    #: the rule's ``messages`` argument is the current list.
    request: Mapping[str, Any] = field(default_factory=dict)
    #: What the server gives the rules for this request (``RequestFacts``; empty outside the proxy,
    #: and for a rule that does not read it: ``Rule.gets_facts``).
    given: RequestFacts = NO_FACTS
    #: The signals of ``Rule.scan`` that can wake this step (``Rule.woken_by`` of its options), or
    #: ``None``: the step always runs.
    woken_by: frozenset[str] | None = None

    def with_request(self, request: Mapping[str, Any]) -> RuleContext:
        """This context with ``request``: ``dataclasses.replace`` spelled out (it introspects the
        fields on every call; the pipeline does this once per request-level step)."""
        return RuleContext(self.options, self.log_content, request, self.given, self.woken_by)


Apply = Callable[[list[Any], RuleContext], Outcome]

#: A rule's run over what a request adds to the previous one (``Horizon.resume``): the new
#: messages (as the earlier rules left them), the rule's context and the state it carried at
#: the end of the previous request's list (``None``: the list's start); what it makes of the new
#: messages (a change's ``index`` counted from the first of them) and its state after them, or
#: ``None`` when what came before cannot stand (the pipeline then runs every rule whole).
Resume = Callable[[list[Any], RuleContext, Any], tuple[Outcome, Any] | None]


@dataclass(frozen=True, slots=True)
class Horizon:
    """How far back a new message can change a rule's decisions (rules/engine/resume.py): when a
    request is the previous one plus a turn, the pipeline runs the rule over the new turn only,
    with the state it carried, and keeps what it decided for the messages before.

    ``kind`` is ``message`` (each message is decided by itself and the request's fields:
    nothing carried), ``fields`` (a request-level rule that reads no message: it runs over the
    request's fields, which every request brings whole) or ``carried`` (``resume`` goes on from
    the state it returned for the previous request). ``holds`` says under which options the
    declaration holds (``None``: all); under others the rule runs whole.
    tests/rules/test_horizons.py holds each declaration to it over generated histories."""

    kind: Literal["message", "fields", "carried"]
    resume: Resume | None = None
    holds: Callable[[Mapping[str, Any]], bool] | None = None


def per_message(apply: Apply, holds: Callable[[Mapping[str, Any]], bool] | None = None) -> Horizon:
    """The horizon of a rule that decides each message by itself."""
    return Horizon("message", _Stateless(apply), holds)


def fields_only(apply: Apply) -> Horizon:
    """The horizon of a request-level rule that reads no message."""
    return Horizon("fields", _Stateless(apply))


def carried(resume: Resume, holds: Callable[[Mapping[str, Any]], bool] | None = None) -> Horizon:
    """The horizon of a rule that carries a state from one message to the next."""
    return Horizon("carried", resume, holds)


class _Stateless:
    """``Horizon.resume`` of a rule that carries nothing: its ``apply`` (a class, not a closure:
    rule records go to worker processes, pickled)."""

    __slots__ = ("apply",)

    def __init__(self, apply: Apply) -> None:
        self.apply = apply

    def __call__(self, messages: list[Any], ctx: RuleContext, state: Any) -> tuple[Outcome, Any]:
        return self.apply(messages, ctx), None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Stateless, (self.apply,))


@dataclass(frozen=True, slots=True)
class Rule:
    """A named, toggleable repair. ``apply`` must never mutate its argument."""

    name: str
    summary: str
    #: The defect and the repair (docs/rules.md).
    defect: str
    repair: str
    #: Its fix safety (``Safety``): one class for every change it makes, or a class per change
    #: ``action`` it reports, each one listed (tests/rules/test_safety.py holds every rule to its
    #: declaration, with an oracle of its own).
    safety: Safety | Mapping[str, Safety]
    default: bool
    apply: Apply
    options: tuple[Option[Any], ...] = ()
    #: True for a rule that reads or rewrites request-level fields (``tools``, ``tool_choice``):
    #: the pipeline then passes the request in ``RuleContext.request`` and takes back
    #: ``Outcome.request``.
    reads_request: bool = False
    #: The one walk of its API that reads the list's signals (``rules.chat.scan.scan``): the
    #: pipeline walks once per distinct scan and skips the rules it does not wake.
    scan: Callable[[list[Any]], frozenset[str] | None] | None = None
    #: The ``scan`` signals under which ``apply`` may change anything, given the rule's
    #: options: the pipeline skips the rule when a clean walk set none of them. ``None``: the
    #: rule always runs its own prescan. Must never miss a case (tests/rules/test_scan.py).
    woken_by: Callable[[Mapping[str, Any]], frozenset[str] | None] | None = None
    #: The ``scan`` signals a change by this rule may set that the list it was given did not
    #: set, whatever its options (``frozenset()``: none; its repair only removes what it acts
    #: on). The pipeline then keeps the walk's signals, with these added, for the later rules,
    #: and the walk still models the changed list. ``None``: it may set any, and every later
    #: rule runs its own prescan. Must never miss a case (tests/rules/test_scan.py).
    introduces: frozenset[str] | None = None
    #: For a rule that restores what the server kept from earlier responses: what to keep and
    #: what to look up (``StashQuery``); the values come back in ``RuleContext.given``.
    recall: StashQuery | None = None
    #: True for a rule that reads ``RuleContext.given`` without recalling (a rule with
    #: ``recall`` reads it anyway): only such steps get the request's ``RequestFacts``
    #: (``Plan.given``).
    reads_facts: bool = False
    #: How the rule resumes over a request's new turn (``Horizon``); ``None``: it cannot say,
    #: and a request it runs on is repaired whole.
    horizon: Horizon | None = None

    def safety_of(self, action: str) -> Safety:
        """The class of a change of this rule with ``action`` (an action its declaration does
        not list counts as ``lossy``: what is not declared is not trusted)."""
        if isinstance(self.safety, str):
            return self.safety
        return self.safety.get(action, "lossy")

    @property
    def classes(self) -> tuple[Safety, ...]:
        """The classes its changes can have, mildest first."""
        given = {self.safety} if isinstance(self.safety, str) else set(self.safety.values())
        return tuple(kind for kind in SAFETY_CLASSES if kind in given)

    @property
    def worst(self) -> Safety:
        """The worst class a change of this rule can have."""
        return worst(self.classes)

    @property
    def gets_facts(self) -> bool:
        """The rule reads ``RuleContext.given``: its step gets what the server gives."""
        return self.reads_facts or self.recall is not None

    def context(
        self, overrides: Mapping[str, Any] | None = None, *, log_content: bool = False
    ) -> RuleContext:
        """Build this rule's context: declared defaults overlaid with ``overrides``."""
        opts = {o.name: o.default for o in self.options}
        if overrides:
            opts.update(overrides)
        woken_by = None if self.woken_by is None else self.woken_by(opts)
        return RuleContext(options=opts, log_content=log_content, woken_by=woken_by)


def is_message(value: Any, role: str) -> bool:
    """True if ``value`` is a dict message with the given role."""
    return isinstance(value, dict) and value.get("role") == role
