"""Recovery (``recover:``, on by default): a refusal that got through, repaired once and
retried.

When the upstream answers 400 or 422 (nothing was processed, so a retry is safe), chatmend reads
the refusal (``proxy.classify.read_error``: the catalogue's texts, then its stable parts) and a
rule repairs a class it carries (``rules.providers.contract.repairs``); an unclassified refusal
that names a message, a field, a role or a tool call gets the repairs of what it names
(``escalation``, never one that drops data). The client's body runs again under the request's
plan with that repair enforced; if that changes the body chatmend sent, it is sent once more with
the same headers and the retry's answer is relayed (``X-Chatmend-Recovered: <rules>;
class=<class>``). What recovered it is then learned (proxy/learned.py).

Never worse than without it: never for a refusal about context length, auth, the model, rate or
size; only when the repair changes the body, at most once, never for a body over
``max_body_bytes`` or a client that went away; the retry's own answer (a refusal too) is relayed
as it comes, the first error logged. Only ids, indices and class names are logged, never
content. The first answer was read whole and released (``proxy.streaming``: a 4xx under 256 KiB
is) before the retry opens a new one.

The mechanism knows an API only by its name (``chat``, ``responses``, ``messages``): another
one needs its rows in the repair table and a ``sanitize_body`` that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from proxy.classify import Reading, classes, read_error
from proxy.log import get_logger
from proxy.metrics import Metrics
from proxy.sanitize import PlanSource, Sanitized, plan_for, sanitize_body
from proxy.streaming import RelayResult
from rules.engine.base import Change, RequestFacts
from rules.providers.apis import CHAT_API, MESSAGES_API, RESPONSES_API, api_named
from rules.providers.contract.repairs import Repair, repair_for
from rules.providers.planner import with_repair

RECOVERED_HEADER = "X-Chatmend-Recovered"
#: The statuses recovery reads: a refusal of the request as sent, nothing processed (a 422 is
#: how pydantic-based servers and Mistral refuse a schema).
RECOVERABLE = (400, 422)

log = get_logger()


@dataclass(frozen=True, slots=True)
class Retry:
    """The repaired body to send again, and why."""

    error_class: str
    #: The rules of the repair that changed the body, and their repair options.
    rules: Mapping[str, Mapping[str, Any]]
    sanitized: Sanitized
    #: The index of the list the provider's text cites, if any.
    index: int | None
    #: The request's ``model`` (what a learned repair is kept for).
    model: Any = None
    #: The field path the provider's text names (``messages[1].tool_calls[0].type``), if any.
    path: str | None = None

    @property
    def header(self) -> str:
        return f"{','.join(self.rules)}; class={self.error_class}"


def plan_retry(
    error: bytes,
    original: bytes,
    first: Sanitized,
    planner: PlanSource,
    api: str,
    *,
    given: RequestFacts | None = None,
    reading: Reading | None = None,
) -> Retry | None:
    """The retry a refusal with body ``error`` calls for, or ``None``: the first class the
    error carries (most specific first) whose repair, enforced over the plan of the request,
    makes the client's ``original`` body differ from ``first``, the body sent; failing a class,
    the escalation (``escalation``) if the refusal names a message, a field, a role or a tool
    call. Never for a refusal about something else (context length, auth, the model, rate,
    size). The rules named are the repair's rules whose changes differ from the first run's."""
    reading = reading if reading is not None else read_error(error, api_named(api).field)
    if reading.about is not None:
        return None
    repairs = [repair for code in reading.codes if (repair := repair_for(api, code))]
    if not repairs and not reading.codes:
        escalated = escalation(api, reading)
        repairs = [escalated] if escalated is not None else []
    if not repairs:
        return None
    try:
        model = orjson.loads(original).get("model")
    except (orjson.JSONDecodeError, AttributeError):
        return None  # not a body the rules read (sanitize_body skipped it too)
    for repair in repairs:
        plan = with_repair(plan_for(planner, model, api_named(api)), repair.rules)
        result = sanitize_body(original, plan, api, given=given)
        if result.skipped or result.body == first.body:
            continue
        rules = {
            name: options
            for name, options in repair.rules.items()
            if _changes_of(name, result) != _changes_of(name, first)
        }
        if rules:
            return Retry(repair.code, rules, result, reading.index, model, reading.path)
    return None


#: The class an escalated retry is logged and counted under.
ESCALATED = "escalated"

#: Escalation (a refusal that names something but matches no class): what it names -> the
#: classes whose repairs it gets, per API. Only repairs that keep what the client sent (no
#: orphan result dropped, no image stripped, no turn invented): the upstream's text is not
#: known, so it does not get to pick a repair that loses data.
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
#: API (chat only: its per-role field allowlist).
_KEY_NAMED: Mapping[str, tuple[str, ...]] = {CHAT_API.name: ("bookkeeping_field", "unknown_field")}
#: Rules an escalation never runs, though a class's repair holds them: they drop what the
#: client sent (an orphan result's text; a message for an empty one).
_DROPS_DATA = frozenset({"orphan-tool-results", "messages-empty-messages"})


def escalation(api: str, reading: Reading) -> Repair | None:
    """The repair an unclassified refusal gets: for each thing it names (a tool call, a role,
    content, a field), the repairs of that family; for a message named with nothing more,
    every family. A named message key adds the per-role field allowlist
    (``unknown-message-fields``: only with a key named, as it drops the keys the allowlist
    does not hold)."""
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
            if rule not in _DROPS_DATA:
                rules[rule] = {**rules.get(rule, {}), **options}
    return Repair(ESCALATED, api, rules) if rules else None


def _changes_of(rule: str, result: Sanitized) -> list[Change]:
    return [change for change in result.changes if change.rule == rule]


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
    request: web.Request, first: RelayResult, retry: Retry, *, request_id: str, max_body_bytes: int
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
        log.info("recovery_skipped", request_id=request_id, reason=reason)
    return reason is None


def record(
    retry: Retry,
    status: int,
    answer: RelayResult | None,
    *,
    request_id: str,
    route: str,
    meter: Metrics,
    suggestions: Suggestions,
) -> None:
    """Log what the retry did (``request_recovered``, else ``recovery_failed`` with the first
    error's class), count a recovery, suggest its rule once per route."""
    fields = {
        "request_id": request_id,
        "route": route,
        "rules": list(retry.rules),
        "error_class": retry.error_class,
        "index": retry.index,
        "path": retry.path,
        "attempt": 1,
        "status": status,
    }
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
