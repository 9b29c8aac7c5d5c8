"""Recovery (``recover:``, on by default): a refusal that got through, repaired once and
retried.

When the upstream answers 400 or 422 (nothing was processed, so a retry is safe), chatmend reads the
refusal (``rules.providers.refusals.read_error``: the catalogue's texts, then its stable parts) and
tries, in order: the repair of what it *names* (``rules.providers.named_repairs``: a parameter, a
field at a path, a role, a content part type, an id, an order; read against the request itself), the
repair of each class it carries (``rules.providers.contract.repairs``; a class catalogued for
another API by its twin in the request's, ``repair_in``), and, for a refusal that
names a message but nothing more, the escalation (``escalation``). The client's body runs again
under the request's plan with that repair enforced; if that changes the body chatmend sent, it is
sent once more with the same headers and the retry's answer is relayed (``X-Chatmend-Recovered:
<rules>; class=<class>``). What recovered it is then learned, for that client only
(proxy/recovery/learned.py).

What a retry may change is read from each rule's fix safety (``Rule.safety``), change by change
(``Policy``): a ``safe`` change always; an ``unsafe`` one only for what the refusal names (a
class or a named thing, never an escalation); a ``lossy`` one only for what the refusal names and
where the route opts in (``recover.lossy``). A rule whose changes go further is left out of the
repair and the rest runs again. Every unsafe or lossy change of a retry is logged, by ids,
counts and names, never content.

Never worse than without it: never for a refusal about context length, auth, the model, rate or
size; only when the repair changes the body, at most once, never for a body over
``max_body_bytes`` or a client that went away; the retry's own answer (a refusal too) is relayed
as it comes, the first error logged. The first answer was read whole and released
(``proxy.relay.streaming``: a 4xx under 256 KiB is) before the retry opens a new one. A route in
``mode: report`` gets no retry: what recovery would send is logged (``recovery_reported``).

The mechanism knows an API only by its name (``chat``, ``responses``, ``messages``): another
one needs its rows in the repair table and a ``sanitize_body`` that reads it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from proxy.observe.log import get_logger
from proxy.observe.metrics import Metrics
from proxy.relay.streaming import RelayResult
from rules.engine.base import Change, RequestFacts, Safety
from rules.providers.apis import CHAT_API, MESSAGES_API, RESPONSES_API, api_named, safety_of
from rules.providers.contract.repairs import Repair, repair_for, repair_in
from rules.providers.named_repairs import SERVER_TOOL_CLASSES, named_repairs, server_tool_named
from rules.providers.planner import with_repair
from rules.providers.refusals import Reading, classes, read_error
from rules.providers.sanitize import (
    PlanSource,
    Sanitized,
    plan_for,
    read_with_surrogates,
    sanitize_body,
)

RECOVERED_HEADER = "X-Chatmend-Recovered"
#: The statuses recovery reads: a refusal of the request as sent, nothing processed (a 422 is
#: how pydantic-based servers and Mistral refuse a schema).
RECOVERABLE = (400, 422)

log = get_logger()

Rules = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Policy:
    """What a retry may change (``Rule.safety``, change by change): ``safe`` always,
    ``unsafe`` only for what the refusal names, ``lossy`` only for what it names and for the
    rules in ``lossy`` (``recover.lossy``; ``*``: every rule)."""

    lossy: frozenset[str] = frozenset()

    def allows(self, kind: Safety, rule: str, *, named: bool) -> bool:
        if kind == "safe":
            return True
        if not named:
            return False
        return kind == "unsafe" or "*" in self.lossy or rule in self.lossy


NO_LOSS = Policy()


@dataclass(frozen=True, slots=True)
class Retry:
    """The repaired body to send again, and why."""

    error_class: str
    #: The rules of the repair whose changes differ from the first send's, with their options
    #: (the header, the log, the suggestion).
    rules: Rules
    sanitized: Sanitized
    #: The index of the list the provider's text cites, if any.
    index: int | None
    #: The request's ``model`` (what a learned repair is kept for).
    model: Any = None
    #: The field path the provider's text names (``messages[1].tool_calls[0].type``), if any.
    path: str | None = None
    #: The whole repair that recovered the request, as it ran (the rules ``rules`` names and
    #: the others of its repair that stood with them): what is learned, never a part of it.
    plan: Rules = field(default_factory=dict)
    #: The changes the repair made that the first send had not (each one's class is its rule's).
    changes: tuple[Change, ...] = ()
    #: The repair's rules left out: their changes went further than the policy allows.
    withheld: tuple[str, ...] = ()
    #: Whether the refusal named what was repaired (a class, a named thing): else escalated.
    named: bool = True

    @property
    def header(self) -> str:
        return f"{','.join(self.rules)}; class={self.error_class}"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A repair to try: its class, its rules, and whether the refusal names what it repairs."""

    code: str
    rules: Rules
    named: bool = True


def read_body(original: bytes) -> tuple[dict[str, Any], bool] | None:
    """The client's body as an object, and whether orjson read it (else the standard library,
    keeping lone surrogates, as ``sanitize_body`` reads it); ``None`` for anything else."""
    try:
        payload = orjson.loads(original)
        readable = True
    except orjson.JSONDecodeError:
        payload = read_with_surrogates(original)
        readable = False
    return (payload, readable) if isinstance(payload, dict) else None


def candidates(api: str, reading: Reading, payload: Mapping[str, Any]) -> Iterator[Candidate]:
    """What to try for a refusal, in order: what it names, read against the request
    (``rules.providers.named_repairs``); each class it carries, read in the request's API (a
    class catalogued for another API repaired by its twin there: ``repair_in``); failing both,
    the escalation (not named)."""
    named = named_repairs(api, reading, payload)
    for repair in named:
        yield Candidate(repair.code, repair.rules)
    tried: set[str] = set()
    for code in reading.codes:
        classed = repair_in(api, code)
        if classed is None or classed.code in tried:
            continue
        if classed.code in SERVER_TOOL_CLASSES and not server_tool_named(api, reading, payload):
            continue  # its path names a client tool: removing the built-in ones fixes nothing
        tried.add(classed.code)
        yield Candidate(classed.code, classed.rules)
    if not named and not reading.codes:
        escalated = escalation(api, reading)
        if escalated is not None:
            yield Candidate(escalated.code, escalated.rules, named=False)


def plan_retry(
    error: bytes,
    original: bytes,
    first: Sanitized,
    planner: PlanSource,
    api: str,
    *,
    given: RequestFacts | None = None,
    reading: Reading | None = None,
    policy: Policy = NO_LOSS,
) -> Retry | None:
    """The retry a refusal with body ``error`` calls for, or ``None``: the first candidate
    (``candidates``) whose repair, enforced over the plan of the request with only the changes
    ``policy`` allows, makes the client's ``original`` body differ from ``first``, the body
    sent. Never for a refusal about something else (context length, auth, the model, rate,
    size). A body only the standard library reads (lone surrogates) gets its API's surrogate
    repair too."""
    reading = reading if reading is not None else read_error(error, api_named(api).field)
    if reading.about is not None:
        return None
    read = read_body(original)
    if read is None:
        return None  # not a body the rules read (sanitize_body skipped it too)
    payload, readable = read
    model = payload.get("model")
    trial = _Trial(original, first, planner, api, model, given, policy)
    for candidate in candidates(api, reading, payload):
        rules = dict(candidate.rules)
        if not readable:
            rules.setdefault(_SURROGATES[api], {})
        retry = trial.attempt(candidate, rules)
        if retry is not None:
            return Retry(
                retry.error_class,
                retry.rules,
                retry.sanitized,
                reading.index,
                model,
                reading.path,
                retry.plan,
                retry.changes,
                retry.withheld,
                candidate.named,
            )
    return None


#: Each API's lone-surrogate rule: a retry of a body only the standard library read needs it.
_SURROGATES = {
    CHAT_API.name: "lone-surrogates",
    RESPONSES_API.name: "responses-lone-surrogates",
    MESSAGES_API.name: "messages-lone-surrogates",
}


@dataclass(frozen=True, slots=True)
class _Trial:
    """What every candidate of one refusal runs against: the client's body, the body sent, the
    request's plan source, and what the retry may change."""

    original: bytes
    first: Sanitized
    planner: PlanSource
    api: str
    model: Any
    given: RequestFacts | None
    policy: Policy

    def attempt(self, candidate: Candidate, rules: dict[str, Mapping[str, Any]]) -> Retry | None:
        """``candidate``'s repair (``rules``), run and checked against the policy: a rule whose
        new changes go further than the policy allows is left out and the rest runs again (at
        most once per rule)."""
        withheld: list[str] = []
        while rules:
            plan = with_repair(plan_for(self.planner, self.model, api_named(self.api)), rules)
            result = sanitize_body(self.original, plan, self.api, given=self.given)
            if result.skipped or result.body == self.first.body:
                return None
            new = _new_changes(rules, result, self.first)
            refused = {
                change.rule
                for change in new
                if not self.policy.allows(safety_of(change), change.rule, named=candidate.named)
            }
            if refused:
                withheld += sorted(refused)
                rules = {name: options for name, options in rules.items() if name not in refused}
                continue
            changed = {change.rule for change in new}
            named = {name: options for name, options in rules.items() if name in changed}
            if not named:
                return None
            return Retry(
                candidate.code,
                named,
                result,
                None,
                plan=dict(rules),
                changes=tuple(new),
                withheld=tuple(withheld),
            )
        return None


def _new_changes(rules: Rules, result: Sanitized, first: Sanitized) -> list[Change]:
    """The changes of the repair's rules in ``result`` that ``first`` did not make (the same
    change made by both is the plan's own, not the repair's)."""
    before = Counter(_key(change) for change in first.changes if change.rule in rules)
    new: list[Change] = []
    for change in result.changes:
        if change.rule not in rules:
            continue
        key = _key(change)
        if before[key]:
            before[key] -= 1
        else:
            new.append(change)
    return new


def _key(change: Change) -> str:
    return repr(change.as_dict())


#: The class an escalated retry is logged and counted under.
ESCALATED = "escalated"

#: Escalation (a refusal that names something but matches no class): what it names -> the
#: classes whose repairs it gets, per API. The upstream's text is not known, so only the
#: ``safe`` changes of these repairs run (``Policy``, not named): nothing the client sent is
#: dropped, no turn or stub invented, no request field changed.
_NAMED: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    CHAT_API.name: {
        "tool_call": (
            "missing_tool_call_id",
            "unanswered_tool_call",
            "duplicate_tool_call_id",
            "invalid_arguments",
            "missing_tool_call_type",
            "empty_tool_calls",
        ),
        "role": ("unknown_role", "roles_not_alternating"),
        "content": ("content_null", "content_not_string"),
        "field": ("bookkeeping_field",),
    },
    RESPONSES_API.name: {
        "tool_call": ("responses_unanswered_call", "responses_duplicate_item"),
    },
    MESSAGES_API.name: {
        "tool_call": ("messages_unanswered_tool_use", "messages_duplicate_tool_use_id"),
        "role": ("messages_roles_alternate", "messages_first_not_user"),
        "content": ("messages_empty_text_block",),
    },
}
#: Escalation of a refusal that names a message key: the classes whose repairs drop keys, per
#: API (chat only: the agent's bookkeeping keys; the per-role allowlist is unsafe).
_KEY_NAMED: Mapping[str, tuple[str, ...]] = {CHAT_API.name: ("bookkeeping_field",)}


def escalation(api: str, reading: Reading) -> Repair | None:
    """The repair an unclassified refusal gets: for each thing it names (a tool call, a role,
    content, a field), the repairs of that family; for a message named with nothing more,
    every family; a named message key adds the bookkeeping keys. Only their ``safe`` changes
    run (``Policy``)."""
    if not reading.names:
        return None
    table = _NAMED.get(api, {})
    kinds = set(reading.names & set(table))
    if not kinds and reading.names <= {"message", "field"}:
        kinds = set(table) - {"field"}  # a message named, nothing more: every family
    codes = [code for kind in sorted(kinds) for code in table[kind]]
    if reading.key is not None:
        codes += _KEY_NAMED.get(api, ())
    rules: dict[str, dict[str, Any]] = {}
    for code in codes:
        repair = repair_for(api, code)
        for rule, options in repair.rules.items() if repair else ():
            rules[rule] = {**rules.get(rule, {}), **options}
    return Repair(ESCALATED, api, rules) if rules else None


def enable_line(rule: str, options: Mapping[str, Any]) -> str:
    """The YAML that switches ``rule`` on with ``options``: ``rule: true`` or a flow mapping."""
    if not options:
        return f"{rule}: true"
    given = ", ".join(f"{key}: {orjson.dumps(value).decode()}" for key, value in options.items())
    return f"{rule}: {{enabled: true, {given}}}"


def rules_key(route: str) -> str:
    """Where a route's rules are set: ``rules`` (the default route) or ``routes.<name>.rules``."""
    return "rules" if route == "default" else f"routes.{route}.rules"


class Suggestions:
    """Logs ``recovery_suggests_rule`` once per route and rule (per process)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    def offer(self, route: str, retry: Retry) -> None:
        for rule, options in retry.rules.items():
            if (route, rule) in self._seen:
                continue
            self._seen.add((route, rule))
            log.warning(
                "recovery_suggests_rule",
                route=route,
                rule=rule,
                error_class=retry.error_class,
                key=rules_key(route),
                yaml=enable_line(rule, options),
            )


def may_retry(
    request: web.Request, first: RelayResult, retry: Retry, *, max_body_bytes: int
) -> bool:
    """Whether ``retry`` may be sent in place of the first answer: not if that answer already
    went out, the repaired body is too big, or the client left."""
    reason = None
    if first.response.prepared:
        reason = "answer_already_sent"
    elif len(retry.sanitized.body) > max_body_bytes:
        reason = "body_too_large"
    elif request.transport is None or request.transport.is_closing():
        reason = "client_disconnected"
    if reason is not None:
        log.info("recovery_skipped", reason=reason)
    return reason is None


def described(changes: tuple[Change, ...] | list[Change]) -> list[dict[str, Any]]:
    """The ``unsafe`` and ``lossy`` changes among ``changes``, each with its class: what a
    retry or a learned repair changed or dropped, by ids, counts and names (``Change`` holds no
    content unless the route logs content), at most ``MAX_DESCRIBED``."""
    out = []
    for change in changes:
        kind = safety_of(change)
        if kind != "safe":
            out.append({**change.as_dict(), "safety": kind})
            if len(out) >= MAX_DESCRIBED:
                break
    return out


#: How many unsafe or lossy changes one log line lists (the rest are counted in ``rewrites``).
MAX_DESCRIBED = 50


def _fields(retry: Retry, route: str) -> dict[str, Any]:
    return {
        "route": route,
        "rules": list(retry.rules),
        "error_class": retry.error_class,
        "index": retry.index,
        "path": retry.path,
        "withheld": list(retry.withheld),
        "changed": described(retry.changes),
    }


def reported(retry: Retry, *, route: str, meter: Metrics) -> None:
    """A route in report mode: what recovery would have sent, logged (``recovery_reported``)
    and counted; nothing is sent."""
    meter.recovery_retries.labels(route, retry.error_class, "reported").inc()
    log.info("recovery_reported", **_fields(retry, route))


def record(
    retry: Retry,
    status: int,
    answer: RelayResult | None,
    *,
    route: str,
    meter: Metrics,
    suggestions: Suggestions,
) -> None:
    """Log what the retry did (``request_recovered``, with every unsafe or lossy change it
    made; else ``recovery_failed`` with the first error's class), count a recovery, suggest its
    rule once per route."""
    fields = {**_fields(retry, route), "attempt": 1, "status": status}
    meter.recovery_retries.labels(
        route, retry.error_class, "failed" if status >= 400 else "recovered"
    ).inc()
    if status >= 400:
        found = classes(answer.readable if answer else None)
        log.warning("recovery_failed", **fields, retry_class=found[0] if found else "unclassified")
        return
    log.info("request_recovered", **fields)
    for rule in retry.rules:
        meter.recovered.labels(route, rule, retry.error_class).inc()
    suggestions.offer(route, retry)
