"""Recovery (``recover:``, off by default): a 400 that got through, repaired once and retried.

When the upstream answers 400 (nothing was processed, so a retry is safe) with an error text the
catalogue knows (``proxy.metrics.classes``) and a rule repairs that class
(``rules.providers.contract.repairs``), the client's body runs again under the request's plan with
that
repair enforced; if that changes the body chatmend sent, it is sent once more with the same
headers and the retry's answer is relayed (``X-Chatmend-Recovered: <rules>; class=<class>``).

Never worse than without it: only a 400 of a known class, only when the repair changes the
body, at most once, never for a body over ``max_body_bytes`` or a client that went away; the
retry's own answer (a 400 too) is relayed as it comes, the first error logged. Only ids, indices
and class names are logged, never content. The first answer was read whole and released
(``proxy.streaming``: a 4xx under 256 KiB is) before the retry opens a new one.

The mechanism knows an API only by its name (``chat``, ``responses``): a third one needs its
rows in the repair table and a ``sanitize_body`` that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from proxy.log import get_logger
from proxy.metrics import Metrics, classes, error_text
from proxy.provenance import cited_index
from proxy.sanitize import FIELDS, PlanSource, Sanitized, plan_for, sanitize_body
from proxy.streaming import RelayResult
from rules.engine.base import Change, Given
from rules.providers.contract.repairs import repair_for
from rules.providers.planner import with_repair

RECOVERED_HEADER = "X-Chatmend-Recovered"

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
    given: Given | None = None,
) -> Retry | None:
    """The retry a 400 with body ``error`` calls for, or ``None``: the first class the error
    text matches (most specific first) whose repair, enforced over the plan of the request, makes
    the client's ``original`` body differ from ``first``, the body sent. The rules named are the
    repair's rules whose changes differ from the first run's."""
    repairs = [repair for code in classes(error) if (repair := repair_for(api, code))]
    if not repairs:
        return None
    try:
        model = orjson.loads(original).get("model")
    except (orjson.JSONDecodeError, AttributeError):
        return None  # not a body the rules read (sanitize_body skipped it too)
    for repair in repairs:
        plan = with_repair(plan_for(planner, model, api), repair.rules)
        result = sanitize_body(original, plan, api, given=given)
        if result.skipped or result.body == first.body:
            continue
        rules = {
            name: options
            for name, options in repair.rules.items()
            if _changes_of(name, result) != _changes_of(name, first)
        }
        if rules:
            index = cited_index(error_text(error), FIELDS[api])
            return Retry(repair.code, rules, result, index)
    return None


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
        "attempt": 1,
        "status": status,
    }
    if status >= 400:
        found = classes(answer.readable if answer else None)
        log.warning("recovery_failed", **fields, retry_class=found[0] if found else "unclassified")
        return
    log.info("request_recovered", **fields)
    for rule in retry.rules:
        meter.recovered.labels(route, rule, retry.error_class).inc()
    suggestions.offer(route, retry)
