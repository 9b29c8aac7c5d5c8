"""What chatmend says about one request, in one place: its metrics, its log events and the
``X-Chatmend-*`` headers of its response.

The handler (proxy/handler.py) fills a ``RequestState`` on the way through and calls these at
the step they describe; nothing here changes a body or decides where it goes.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from yarl import URL

from proxy import otel
from proxy.body import Hold
from proxy.capture import MAX_LISTED_CHANGES, Bodies, Entry, Recent, clipped, model_of
from proxy.log import MAX_FIELD_ITEMS, get_logger
from proxy.metrics import Metrics, classify
from proxy.provenance import explain
from proxy.sanitize import Sanitized
from proxy.streaming import RelayResult
from rules.engine.base import Change
from rules.providers.apis import api_named, safety_of

log = get_logger()

REQUEST_ID_HEADER = "X-Request-ID"
#: chatmend's own id for the request, always generated (128 random bits): unique, unguessable,
#: the key of its log lines and of its entry on the page (``/chatmend/``).
CHATMEND_ID_HEADER = "X-Chatmend-Request-Id"
CHANGES_HEADER = "X-Chatmend-Changes"
#: On a 4xx to a rewritten body whose error text cites an index: ``messages[2]=messages[3];
#: rules=a,b`` (the index chatmend sent = the client's; ``inserted`` for a message it added).
CLIENT_INDEX_HEADER = "X-Chatmend-Client-Index"
OVERHEAD_HEADER = "X-Chatmend-Overhead-Ms"
#: Why a repaired body went as it came anyway, each counted as a limit: nested past what orjson
#: writes (255 levels), or a signed block with a duplicate key.
LIMITED_SKIPS = frozenset({"unserializable", "duplicate_signed_keys"})
_VALID_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")


@dataclass(slots=True)
class RequestState:
    """What one request collects on its way through, for its one ``request_done`` line."""

    request_id: str
    #: The client's own ``X-Request-ID`` (up to 128 visible ASCII characters, else ``None``):
    #: echoed back and logged as ``client_request_id``, never used as a key (two clients may
    #: send the same one).
    client_request_id: str | None = None
    upstream_ms: float | None = None
    sanitize_ms: float | None = None
    changes: int = 0
    outcome: str | None = None
    #: Rules that changed the body, and the count of changes report mode only logged.
    rules: tuple[str, ...] = ()
    reported: int = 0
    started: float = field(default_factory=time.perf_counter)
    #: For the metrics: the config route, the API repaired (``chat``, ``responses``, else
    #: ``other``), the profile the body ran under, chatmend's own time up to the upstream's
    #: headers (``None`` if the upstream was never reached).
    route: str = "default"
    api: str = "other"
    profile: str = "none"
    overhead_ms: float | None = None
    #: The request's share of the in-flight body budget (``proxy.body.Hold``), given back when
    #: it is done.
    hold: Hold | None = None
    #: For the page (proxy/capture.py): the changes of the body sent (the first
    #: ``MAX_LISTED_CHANGES``), whether recovery sent it, and the bodies before and after (set
    #: only for a body rewritten, recovered or refused by the upstream).
    listed: tuple[Change, ...] = ()
    recovered: bool = False
    before: bytes | None = None
    after: bytes | None = None
    #: The body as the client sent it (decoded; a reference, not a copy): the page reads its
    #: model name from it.
    original: bytes | None = None
    #: How the prefix cache read the body (proxy/prefix.py): ``hit``, ``miss``, ``skip``;
    #: ``None`` if it did not.
    prefix: str | None = None

    @classmethod
    def of(cls, request: web.Request) -> RequestState:
        """A fresh state with a new id, and the client's ``X-Request-ID`` if it is printable."""
        given = request.headers.get(REQUEST_ID_HEADER)
        client = given if given is not None and _VALID_REQUEST_ID.fullmatch(given) else None
        return cls(os.urandom(16).hex(), client)

    def took(
        self, changes: tuple[Change, ...], omitted: tuple[tuple[str, str, int], ...] = ()
    ) -> None:
        """The changes the body sent upstream carries (what the headers and the log describe),
        and those a worker counted without listing them (``Sanitized.omitted``)."""
        self.changes = len(changes) + sum(count for _, _, count in omitted)
        self.listed = changes[:MAX_LISTED_CHANGES]
        self.rules = tuple(sorted({change.rule for change in changes} | {r for r, _, _ in omitted}))


def headers(state: RequestState, *, reached: bool = False) -> dict[str, str]:
    """The request ids (chatmend's; the client's echoed, else chatmend's again), what chatmend
    changed (``2; rules=a,b``, plus ``; reported=N`` in report mode) and its own time: until
    the upstream answered, minus the upstream's, or until its own answer (milliseconds). Only
    a request that reached the upstream is observed in the overhead histogram: an early 401 or
    413 would drag it toward zero."""
    changes = str(state.changes)
    if state.rules:
        changes += "; rules=" + ",".join(state.rules)
    if state.reported:
        changes += f"; reported={state.reported}"
    overhead = max((time.perf_counter() - state.started) * 1000 - (state.upstream_ms or 0.0), 0.0)
    if reached:
        state.overhead_ms = overhead
    return {
        CHATMEND_ID_HEADER: state.request_id,
        REQUEST_ID_HEADER: state.client_request_id or state.request_id,
        CHANGES_HEADER: changes,
        OVERHEAD_HEADER: f"{overhead:.3f}",
    }


def answered(state: RequestState, response: web.StreamResponse) -> web.StreamResponse:
    """``response`` with chatmend's headers, unless it is already on its way (a relayed
    response was prepared with them)."""
    if not response.prepared:
        response.headers.update(headers(state))
    return response


def limited(meter: Metrics, state: RequestState, limit: str, **fields: object) -> None:
    """Count and log a request that met one of chatmend's limits."""
    meter.limits.labels(limit).inc()
    log.warning("limit_exceeded", request_id=state.request_id, limit=limit, **fields)


def sanitized(
    meter: Metrics, state: RequestState, path: str, result: Sanitized, started: float
) -> None:
    """Count and log what the rules did to a body (``started``: when they began)."""
    state.sanitize_ms = ms(started)
    state.profile = result.profile or "none"
    if _untouched(result):  # the clean path: nothing to count, nothing more to log
        state.changes, state.listed, state.rules, state.reported = 0, (), (), 0
        return
    state.took(result.changes, result.omitted)
    state.reported = len(result.reported)
    # Counted per (rule, action), not per change: a body with 100,000 changes costs a few
    # increments.
    for (rule, action), count in result.tally().items():
        meter.child(meter.rewrites, rule, action).inc(count)
    capped = {c.rule for c in result.changes if "over_cost_cap" in c.detail}
    for rule in sorted(capped):
        limited(meter, state, "arguments_cost_cap", rule=rule)
    for (rule, action), count in Counter((c.rule, c.action) for c in result.reported).items():
        meter.reported.labels(rule, action).inc(count)
    for failure in result.failures:
        meter.rule_failures.labels(failure.rule).inc()
        if failure.error == "WorkBudgetExceeded":  # a hostile shape: the rule was skipped
            limited(meter, state, "work_budget", rule=failure.rule)
        log.error(
            "rule_failed",
            request_id=state.request_id,
            rule=failure.rule,
            error=failure.error,
            where=failure.where,
        )
    for violation in result.violations:
        meter.violations.labels(state.profile, violation.code).inc()
    if result.skipped in LIMITED_SKIPS:
        # The rules ran and repaired it, but the repair cannot be sent: counted.
        limited(meter, state, result.skipped)
    elif result.skipped:
        log.info("payload_not_sanitized", request_id=state.request_id, reason=result.skipped)
    if result.changed:
        _changes(
            "payload_sanitized", state, path, result.profile, result.changes, omitted=result.omitted
        )
    if result.reported:
        # Report mode: what the rules would have changed; the body went as the rules left it
        # without them (the original bytes, in global report mode).
        _changes("payload_reported", state, path, result.profile, result.reported)
    if result.violations:
        # What the provider will still reject: a rule switched off, or a defect no rule repairs.
        log.warning(
            "contract_violation",
            request_id=state.request_id,
            profile=result.profile,
            count=len(result.violations),
            codes=dict(Counter(v.code for v in result.violations)),
            violations=[v.as_dict() for v in result.violations],
        )


def _untouched(result: Sanitized) -> bool:
    """Whether the rules left nothing to say: no change made or reported, no failure, no
    violation, no skip."""
    return not (
        result.changes
        or result.omitted
        or result.reported
        or result.failures
        or result.violations
        or result.skipped
    )


def _changes(
    event: str,
    state: RequestState,
    path: str,
    profile: str | None,
    changes: tuple[Change, ...],
    *,
    omitted: tuple[tuple[str, str, int], ...] = (),
) -> None:
    rules = Counter(change.rule for change in changes)
    for rule, _, count in omitted:
        rules[rule] += count
    count = sum(rules.values())
    # The first changes, as the log would cap the list (proxy.log): never 100,000 dicts built.
    shown = MAX_FIELD_ITEMS if count <= MAX_FIELD_ITEMS else MAX_FIELD_ITEMS - 1
    # Each unsafe or lossy change says so (``Rule.safety``): what it changed or dropped is in
    # its detail (ids, counts, names; never content unless the route logs content).
    listed: list[Any] = [_described(change) for change in changes[:shown]]
    if count > len(listed):
        listed.append(f"...[{count - len(listed)} more]")
    log.info(
        event,
        request_id=state.request_id,
        path=path,
        profile=profile,
        count=count,
        rules=dict(rules),
        changes=listed,
    )


def _described(change: Change) -> dict[str, Any]:
    kind = safety_of(change)
    return change.as_dict() if kind == "safe" else {**change.as_dict(), "safety": kind}


def rejected(
    meter: Metrics,
    state: RequestState,
    result: RelayResult,
    *,
    original: bytes | None,
    sent: Sanitized | None,
    api: str | None,
) -> None:
    """Count a 4xx by its error class; when chatmend had rewritten the body, log what was
    applied and, when the provider's text cites an index of the list chatmend sent, the
    client's index for it (also in the ``X-Chatmend-Client-Index`` header of a response not
    yet sent). The body stays as it is."""
    meter.rejections.labels(str(result.response.status), classify(result.readable)).inc()
    if sent is None or not sent.changed or original is None or api is None:
        return
    field = api_named(api).field
    # The whole body: the index may be in the message or in a field beside it (``param``).
    text = result.readable.decode("utf-8", "replace") if result.readable else None
    mapped = explain(original, sent.body, field, text)
    client = None if mapped is None or mapped[1] is None else f"{field}[{mapped[1]}]"
    log.warning(
        "upstream_rejected_rewritten",
        request_id=state.request_id,
        status=result.response.status,
        error_class=classify(result.readable),
        rules=list(state.rules),
        changes=state.changes,
        cited=None if mapped is None else f"{field}[{mapped[0]}]",
        client_index=None if mapped is None else mapped[1],
        inserted_by_chatmend=mapped is not None and mapped[1] is None,
    )
    if mapped is not None and not result.response.prepared:
        value = f"{field}[{mapped[0]}]={client or 'inserted'}; rules={','.join(state.rules)}"
        result.response.headers[CLIENT_INDEX_HEADER] = value


def upstream_failed(state: RequestState, error: str | None, **fields: object) -> None:
    log.warning("upstream_failed", request_id=state.request_id, error=error, **fields)


def unreachable(state: RequestState, exc: BaseException, upstream: str) -> None:
    """An upstream chatmend could not reach: logged with its host and port and the cause
    (the operating system's words, e.g. ``Connection refused``, or the DNS error), never the
    URL's path, query or user info (a key may sit in them)."""
    url = URL(upstream)
    host = f"{url.host}:{url.port}" if url.port is not None else str(url.host)
    os_error = getattr(exc, "os_error", None)
    cause = type(exc).__name__
    if isinstance(os_error, OSError):
        cause = (
            os.strerror(os_error.errno)
            if isinstance(os_error.errno, int) and os_error.errno > 0
            else os_error.strerror or type(os_error).__name__
        )
    upstream_failed(state, type(exc).__name__, host=host, cause=cause[:200])


def done(meter: Metrics, request: web.Request, state: RequestState, status: int) -> None:
    """The request's one ``request_done`` line and its counters."""
    meter.child(meter.requests, state.route, state.api, str(status), state.profile).inc()
    if state.overhead_ms is not None:
        meter.overhead_seconds.observe(state.overhead_ms / 1000)
    log.info(
        "request_done",
        request_id=state.request_id,
        client_request_id=state.client_request_id,
        method=request.method,
        path=request.path,
        status=status,
        duration_ms=ms(state.started),
        upstream_ms=state.upstream_ms,
        sanitize_ms=state.sanitize_ms,
        changes=state.changes,
        outcome=state.outcome,
        prefix=state.prefix,
    )


def sent(
    state: RequestState,
    original: bytes | None,
    body: Sanitized | None,
    status: int,
    *,
    recovered: bool,
) -> None:
    """What the page may show of a relayed request: whether recovery sent it and, for a body
    rewritten, recovered or refused by the upstream, the body before and after."""
    state.recovered = recovered
    state.original = original
    if original is None:
        return
    if recovered or (body is not None and body.changed) or 400 <= status < 500:
        state.before = original
        state.after = original if body is None or not body.changed else body.body


def remember(recent: Recent | None, request: web.Request, state: RequestState, status: int) -> None:
    """Add the request to the page's list (and its bodies to the capture), if the page is on."""
    if recent is None:
        return
    entry = Entry(
        request_id=state.request_id,
        at=time.time(),
        route=state.route,
        api=state.api,
        method=request.method,
        path=request.path[:256],
        status=status,
        model=model_of(state.original),
        rules=state.rules,
        changes=state.changes,
        overhead_ms=state.overhead_ms,
        recovered=state.recovered,
        outcome=state.outcome,
        client=request.remote or "",
        listed=clipped(state.listed),
    )
    both = (
        None if state.before is None or state.after is None else Bodies(state.before, state.after)
    )
    recent.record(entry, both)


def traced(tracer: object | None, request: web.Request, state: RequestState, status: int) -> None:
    """The request's OpenTelemetry span (proxy/otel.py), when a tracer is set up."""
    if tracer is None:
        return
    end = time.time_ns()
    start = end - int((time.perf_counter() - state.started) * 1e9)
    attributes = {
        "chatmend.request_id": state.request_id,
        "chatmend.route": state.route,
        "chatmend.api": state.api,
        "chatmend.model": model_of(state.original),
        "chatmend.profile": state.profile,
        "chatmend.rules": list(state.rules),
        "chatmend.changes": state.changes,
        "chatmend.recovered": state.recovered,
        "chatmend.overhead_ms": state.overhead_ms,
        "chatmend.outcome": state.outcome,
        "http.request.method": request.method,
        "http.response.status_code": status,
        "url.path": request.path[:256],
    }
    otel.record(tracer, start, end, attributes)


def ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
