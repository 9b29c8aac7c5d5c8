"""One request's trip through chatmend, top to bottom:
route and limits -> read -> sanitize -> relay -> account.

``handle`` is the app's catch-all route (proxy/app.py answers the probes before it). Each step
is one function below, in the order a request meets them; a step that answers the request
itself (an error, a refusal) returns that answer, and the trip ends there. What is said about
the request (metrics, log events, ``X-Chatmend-*`` headers) is in proxy/account.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import orjson
from aiohttp import ClientError, web
from multidict import CIMultiDict

from proxy import account, body, errors, page, prefix
from proxy.account import RequestState
from proxy.apis import ServedApi, served_api, served_named
from proxy.appkeys import (
    INFLIGHT_KEY,
    LEARNED_KEY,
    METRICS_KEY,
    OFFLOAD_KEY,
    PREFIX_KEY,
    REASONING_KEY,
    RECENT_KEY,
    RUNTIME_KEY,
    SESSION_KEY,
    SUGGESTIONS_KEY,
    TRACER_KEY,
)
from proxy.config import Config
from proxy.credentials import apply_upstream_credentials, authorized
from proxy.learned import LearnedRepairs
from proxy.log import get_logger
from proxy.metrics import Metrics
from proxy.offload import Offloader
from proxy.recover import (
    RECOVERABLE,
    RECOVERED_HEADER,
    Policy,
    Retry,
    may_retry,
    plan_retry,
    record,
    reported,
)
from proxy.routing import RefusedPath, Route, Runtime, route_path
from proxy.sanitize import PlanSource, Sanitized, sanitize_body
from proxy.stash.hooks import RequestReasoning
from proxy.stash.keys import request_scope
from proxy.streaming import RelayResult, relay
from proxy.upstream import anthropic_betas, open_upstream, request_headers, upstream_url
from rules.engine.base import NO_FACTS, RequestFacts

#: The methods chatmend forwards. TRACE would echo the request headers back, a route's own
#: upstream key included; CONNECT and the rest have no business with an HTTP API.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

log = get_logger()

#: What sending a body upstream gives: its status and the relay's result, or chatmend's own
#: error response (the upstream could not be reached).
Answer = tuple[int, RelayResult] | web.Response


@dataclass(frozen=True, slots=True)
class Body:
    """A request's body as read: ``raw`` as it came (forwarded when no rule changed it),
    ``decoded`` what the rules read (``raw`` inflated, if it came compressed), and ``api``, the
    API whose body chatmend repairs on this path (``None``: passed through as it came)."""

    raw: bytes | None = None
    decoded: bytes | None = None
    api: ServedApi | None = None


@dataclass(frozen=True, slots=True)
class Repair:
    """What the rules made of a body (``None``: they did not run), and the reasoning the stash
    recalled for it (its response is then observed)."""

    sanitized: Sanitized | None = None
    reasoning: RequestReasoning | None = None
    #: The plan source the rules ran under: the route's, or with a learned repair enforced.
    source: PlanSource | None = None
    #: The client's credential scope (``proxy.stash.keys.request_scope``; ``None``: no
    #: credential): the prefix cache's space, the stash's and the learned repairs' key.
    scope: str | None = None


async def handle(request: web.Request) -> web.StreamResponse:
    """Serve one request, contain unexpected errors, and account for it once."""
    state = RequestState.of(request)
    app = request.app
    meter = app[METRICS_KEY]
    status = 499  # stays so if the client disconnects and the handler is cancelled
    try:
        response = account.answered(state, await _serve(request, state))
        status = response.status
        return response
    except web.HTTPException as exc:  # aiohttp's own answers (none expected from the route)
        status = exc.status
        raise
    except (asyncio.CancelledError, ConnectionResetError):  # the client left mid-request
        state.outcome = state.outcome or "client_disconnected"
        raise
    except Exception as exc:  # nothing a client sends may crash the server
        log.error("request_failed", request_id=state.request_id, error=type(exc).__name__)
        status = 500
        return account.answered(state, errors.internal_error())
    finally:
        if state.hold is not None:
            state.hold.release()
        account.done(meter, request, state, status)
        account.remember(app.get(RECENT_KEY), request, state, status)
        account.traced(app.get(TRACER_KEY), request, state, status)


async def _serve(request: web.Request, state: RequestState) -> web.StreamResponse:
    runtime = request.app[RUNTIME_KEY].current  # read once: a reload does not touch this request
    epoch = request.app[LEARNED_KEY].epoch  # what it learns is dropped if a reload comes first
    # 1. Route and limits: nothing is read of a request chatmend will not serve.
    route = _admit(request, state, runtime)
    if isinstance(route, web.Response):
        return route
    # 2. Read: the body as it came, and decoded where chatmend repairs it.
    read = await _read(request, state, runtime.config)
    if isinstance(read, web.Response):
        return read
    # 3. Sanitize: the route's rules, fail-open within the deadline.
    repair = await _sanitize(request, state, route, read, runtime.config)
    if isinstance(repair, web.Response):
        return repair
    # 4. Relay: send it upstream and stream the answer back (a 400 a rule repairs: once more).
    return await _relay(request, state, route, read, repair, config=runtime.config, epoch=epoch)


# 1. Route and limits ------------------------------------------------------------------------


def _admit(request: web.Request, state: RequestState, runtime: Runtime) -> Route | web.Response:
    """The route for the request's path, or the refusal of a path, a method, a size or a
    client without the route's token."""
    meter = request.app[METRICS_KEY]
    try:
        path = route_path(request.rel_url.raw_path)
    except RefusedPath as exc:
        return _refused(meter, state, "path", errors.bad_path(str(exc)), reason=str(exc))
    if RECENT_KEY in request.app and page.claims(path):
        # Under the page's name but not one of its paths: never forwarded, with the
        # admin's Authorization on it.
        state.outcome = "rejected"
        return errors.closing(page.not_a_page())
    route = runtime.route_for(path)
    state.route = route.name
    if runtime.retired and runtime.retired_prefix(path, route) is not None:
        # A credentialed route a reload removed: never another route's upstream.
        return _refused(meter, state, "removed_route", errors.route_removed())
    if request.method not in METHODS:
        allowed = ", ".join(sorted(METHODS))
        return _refused(meter, state, "method", errors.method_not_allowed(allowed))
    early = body.refused_early(request, runtime.config)
    if early is not None:
        limit = "header_size" if early.status == 431 else "body_size"
        return _refused(meter, state, limit, early)
    if not authorized(route.config, request.headers):
        state.outcome = "unauthorized"
        return errors.closing(errors.unauthorized(route.name))
    return route


def _refused(
    meter: Metrics, state: RequestState, limit: str, response: web.Response, **fields: object
) -> web.Response:
    state.outcome = "rejected"
    account.limited(meter, state, limit, **fields)
    return errors.closing(response)


def _overloaded(meter: Metrics, state: RequestState, config: Config) -> web.Response:
    """A big body past the in-flight budget: 503 with ``Retry-After``, counted, closed."""
    response = errors.overloaded(config.inflight_body_bytes)
    held = None if state.hold is None else state.hold.budget.held
    return _refused(meter, state, "inflight_body_bytes", response, held=held)


def api_of(request: web.Request) -> ServedApi | None:
    """The API whose body chatmend repairs on this request (``proxy.apis.served_api``)."""
    return served_api(request.method, request.path)


# 2. Read ------------------------------------------------------------------------------------


async def _read(request: web.Request, state: RequestState, config: Config) -> Body | web.Response:
    """The body within ``client_body_timeout`` and ``max_body_bytes``, decoded (within
    ``max_body_bytes`` too) when it is one chatmend repairs."""
    if not request.body_exists:
        return Body()
    app = request.app
    meter = app[METRICS_KEY]
    # The bodies in flight together stay within inflight_body_bytes; a big one past
    # it is refused before it is read (its announced size), once read, or while it inflates.
    hold = state.hold = app[INFLIGHT_KEY].hold(
        config.inflight_body_bytes, config.offload_body_bytes
    )
    announced = request.content_length
    if announced is not None and not hold.take(announced):
        return _overloaded(meter, state, config)
    try:
        raw = await body.read(request, config)
    except web.HTTPRequestEntityTooLarge:
        return _refused(meter, state, "body_size", errors.too_large(config.max_body_bytes))
    except TimeoutError:
        state.outcome = "client_timeout"
        return errors.body_timeout(config.client_body_timeout)
    if announced is None and not hold.take(len(raw)):
        return _overloaded(meter, state, config)
    api = api_of(request)
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if api is None or encoding in ("", "identity"):
        return Body(raw, raw, api)
    try:
        decoded = await body.decoded(raw, encoding, config.max_body_bytes, hold)
    except body.TooLarge:
        return _refused(meter, state, "decoded_size", errors.too_large(config.max_body_bytes))
    except body.Overloaded:
        return _overloaded(meter, state, config)
    if decoded is None:  # an encoding chatmend does not read, or broken: sent as it came
        log.info("payload_not_sanitized", request_id=state.request_id, reason="encoding")
        return Body(raw)
    return Body(raw, decoded, api)


# 3. Sanitize --------------------------------------------------------------------------------


async def _sanitize(
    request: web.Request, state: RequestState, route: Route, read: Body, config: Config
) -> Repair | web.Response:
    """The rules over the decoded body, in a worker process if it is big; the body goes as it
    came if they do not finish within ``sanitize_deadline`` (or the worker fails)."""
    if read.decoded is None or read.api is None:
        return Repair()
    state.api = read.api.name
    app = request.app
    offload = app[OFFLOAD_KEY]
    big = offload.enabled and len(read.decoded) > config.offload_body_bytes
    reasoning: RequestReasoning | None = None
    sanitized: Sanitized | None = None
    source: PlanSource = route.planner
    # The client's credential: the prefix cache's session space and the stash's key.
    scope = request_scope(route.config.upstream.url, request.headers, request.rel_url.query)
    started = time.perf_counter()  # the body parsed once, by the prefix cache if it can
    reading = prefix.SKIP if big else _prefix_read(request, state, route, read, scope)
    try:
        async with asyncio.timeout(config.sanitize_deadline):
            if read.api.tool_turn is not None:  # one stash lookup before the rules
                waiting = time.perf_counter()
                reasoning = await _recall(
                    request, route, read, reading, scope, offload=offload if big else None
                )
                started += time.perf_counter() - waiting  # the stash's wait is not the rules'
            given = given_to_rules(request, read.api, reasoning)
            if big:  # parsed and repaired in a worker process (proxy/offload.py)
                sanitized = await offload.sanitize(
                    read.decoded,
                    route.planner,
                    read.api.name,
                    given=given,
                    deadline=config.sanitize_deadline,
                )
            else:  # here, on the event loop
                source, sanitized = _inline(
                    app, route, read, reading, scope, reasoning=reasoning, given=given
                )
    except TimeoutError:
        # Fail-open: the body goes as it came, as if chatmend were not there.
        limit = "sanitize_deadline"
        account.limited(app[METRICS_KEY], state, limit, seconds=config.sanitize_deadline)
    except Exception as exc:
        if not big:
            raise
        # A broken worker process or pool: fail-open too.
        log.error("offload_failed", request_id=state.request_id, error=type(exc).__name__)
    if sanitized is None:
        return Repair(None, reasoning, scope=scope)
    account.sanitized(app[METRICS_KEY], state, request.path, sanitized, started)
    app[REASONING_KEY].report(state.request_id, sanitized.changes)
    if sanitized.skipped == "json_too_deep":
        state.outcome = "rejected"
        return errors.too_deep()
    return Repair(sanitized, reasoning, source, scope)


async def _recall(
    request: web.Request,
    route: Route,
    read: Body,
    reading: prefix.Reading,
    scope: str | None,
    *,
    offload: Offloader | None,
) -> RequestReasoning | None:
    """What the reasoning stash recalls for this body (proxy/stash): one lookup before the
    rules, over the body as the prefix cache parsed it (or in a worker, for a big body)."""
    assert read.decoded is not None and read.api is not None
    return await request.app[REASONING_KEY].before_rules(
        route.planner,
        read.decoded,
        scope,
        offload=None if offload is None else offload.call,
        api=read.api.name,
        parsed=reading.payload,
    )


def _inline(
    app: web.Application,
    route: Route,
    read: Body,
    reading: prefix.Reading,
    scope: str | None,
    *,
    reasoning: RequestReasoning | None,
    given: RequestFacts | None,
) -> tuple[PlanSource, Sanitized]:
    """The rules over a body parsed once (by the prefix cache, or by the stash lookup), with
    what was learned for its client and route: the plan source they ran under, and what they
    made of it."""
    assert read.decoded is not None and read.api is not None
    parsed = reading.payload if reasoning is None else reasoning.payload
    source, parsed = _learned(app[LEARNED_KEY], route, read, parsed, scope)
    sanitized = sanitize_body(
        read.decoded,
        source,
        read.api.name,
        parsed=parsed,
        given=given,
        walked=reading.walked,
        layout=reading.layout,
    )
    return source, sanitized


def _prefix_read(
    request: web.Request, state: RequestState, route: Route, read: Body, scope: str | None
) -> prefix.Reading:
    """The body read through the prefix cache (proxy/prefix.py), in the space of its
    credential ``scope``, route and API, and counted."""
    assert read.api is not None and read.decoded is not None
    cache = request.app[PREFIX_KEY]
    if not cache.config.enabled:
        return prefix.SKIP
    try:
        reading = cache.read((route.name, read.api.name, scope), read.api.api, read.decoded)
    except Exception as exc:  # fail-open: the cache only saves work; the body is read whole
        log.error("prefix_cache_failed", request_id=state.request_id, error=type(exc).__name__)
        return prefix.SKIP
    state.prefix = reading.outcome
    meter = request.app[METRICS_KEY]
    meter.child(meter.prefix_reads, reading.outcome).inc()
    if reading.reused:
        meter.prefix_reused.inc(reading.reused)
    meter.prefix_bytes.set(cache.charged)
    meter.prefix_entries.set(cache.entries)
    return reading


def _learned(
    learned: LearnedRepairs,
    route: Route,
    read: Body,
    parsed: dict[str, Any] | None,
    scope: str | None,
) -> tuple[PlanSource, dict[str, Any] | None]:
    """The plan source for this body (``proxy.learned``): the route's planner, with what was
    learned for this client, route, upstream, API and model enforced; and the body parsed, if
    that took parsing it (a route with nothing learned pays one dict lookup, no parse)."""
    if (
        scope is None
        or not learned.on_route(route.name)
        or route.config.mode == "report"
        or read.api is None
    ):
        return route.planner, parsed
    if parsed is None:
        try:
            loaded = orjson.loads(read.decoded or b"")
        except orjson.JSONDecodeError:
            return route.planner, None
        if not isinstance(loaded, dict):
            return route.planner, None
        parsed = loaded
    upstream = route.config.upstream.url
    model = parsed.get("model")
    source = learned.source(
        route=route.name,
        upstream=upstream,
        api=read.api.name,
        model=model,
        scope=scope,
        planner=route.planner,
    )
    return source, parsed


def given_to_rules(
    request: web.Request, api: ServedApi | None, reasoning: RequestReasoning | None
) -> RequestFacts | None:
    """What the server gives the rules of this request (``RequestFacts``): what the stash recalled
    for it and, for a Messages request, its ``anthropic-beta`` values; ``None`` when there is
    nothing to give (no RequestFacts is built, the plan runs as compiled)."""
    given = None if reasoning is None else reasoning.given
    if api is not None and api.anthropic_headers and "anthropic-beta" in request.headers:
        betas = anthropic_betas(request.headers)
        if betas:
            given = replace(given or NO_FACTS, betas=betas)
    return given


# 4. Relay -----------------------------------------------------------------------------------


def _upstream_headers(
    request: web.Request, route: Route, read: Body, repair: Repair, *, rewritten: bool
) -> CIMultiDict[str]:
    """The headers the upstream gets: the client's, with the route's credential, no
    ``Content-Encoding`` for a rewritten body (sent decoded), and only the encodings the
    observer reads offered for a response it will observe."""
    headers = request_headers(request.headers)
    if rewritten:
        headers.popall("Content-Encoding", None)  # the new body is sent decoded
    apply_upstream_credentials(route.config, headers, read.api)
    hooks = request.app[REASONING_KEY]
    profile = None if repair.sanitized is None else repair.sanitized.profile
    if hooks.observes(route.planner, profile, repair.reasoning):
        hooks.offer_readable_encodings(headers)
    return headers


async def _relay(
    request: web.Request,
    state: RequestState,
    route: Route,
    read: Body,
    repair: Repair,
    *,
    config: Config,
    epoch: int,
) -> web.StreamResponse:
    """Send the body upstream (the client's bytes, compressed or not, if no rule changed them)
    and relay the answer; a 400 of a class a rule repairs is repaired and sent once more."""
    sanitized, reasoning = repair.sanitized, repair.reasoning
    rewritten = sanitized is not None and sanitized.changed
    headers = _upstream_headers(request, route, read, repair, rewritten=rewritten)
    profile = None if sanitized is None else sanitized.profile
    send = partial(
        _exchange,
        request=request,
        state=state,
        route=route,
        headers=headers,
        profile=profile,
        reasoning=reasoning,
    )
    answer = await send(sanitized.body if sanitized is not None and rewritten else read.raw, {})
    if isinstance(answer, web.Response):
        return answer
    recovered = False
    if (
        sanitized is not None
        and read.decoded
        and _recoverable(answer[0], route, read.decoded, config)
    ):
        headers.popall("Content-Encoding", None)  # the retry goes decoded
        retried = await _recover(
            request,
            state,
            route,
            repair,
            answer[1],
            original=read.decoded,
            send=send,
            config=config,
            epoch=epoch,
        )
        if retried is not None:
            sanitized, answer = retried
            recovered = True
            if isinstance(answer, web.Response):
                return answer
    status, result = answer
    account.sent(state, read.decoded, sanitized, status, recovered=recovered)
    if 400 <= status < 500:
        meter = request.app[METRICS_KEY]
        account.rejected(meter, state, result, original=read.decoded, sent=sanitized, api=state.api)
    state.outcome = result.outcome
    if result.outcome == "upstream_failed":
        account.upstream_failed(state, result.error, bytes_relayed=result.bytes_relayed)
    return result.response


def _recoverable(status: int, route: Route, decoded: bytes, config: Config) -> bool:
    """Whether recovery may repair and resend a body the upstream refused with ``status``: on,
    and the body small enough for the retry's repair to run inline."""
    return (
        status in RECOVERABLE
        and route.config.recover.active
        and len(decoded) <= config.offload_body_bytes
    )


async def _exchange(
    body: bytes | None,
    extra_headers: Mapping[str, str],
    *,
    request: web.Request,
    state: RequestState,
    route: Route,
    headers: CIMultiDict[str],
    profile: str | None,
    reasoning: RequestReasoning | None,
) -> Answer:
    """Send ``body`` upstream and relay the answer: its status and the relay's result, or
    chatmend's own error response if the upstream could not be reached."""
    app = request.app
    hooks = app[REASONING_KEY]
    started = time.perf_counter()
    try:
        upstream = await open_upstream(
            app[SESSION_KEY],
            request.method,
            upstream_url(
                route.config.upstream.url, route.upstream_path(request.rel_url.raw_path_qs)
            ),
            headers,
            body,
            timeout=route.timeout,
        )
    except TimeoutError as exc:
        state.outcome = "upstream_timeout"
        account.upstream_failed(state, type(exc).__name__)
        return errors.upstream_timeout()
    except ClientError as exc:
        state.outcome = "upstream_unreachable"
        account.unreachable(state, exc, route.config.upstream.url)
        return errors.upstream_unreachable()
    state.upstream_ms = account.ms(started)
    meter = app[METRICS_KEY]
    meter.upstream_seconds.observe(state.upstream_ms / 1000)
    meter.streams.inc()
    observer = hooks.observer(route.planner, profile, reasoning, upstream, state.request_id)
    try:
        own = account.headers(state, reached=True)
        result = await relay(request, upstream, {**own, **extra_headers}, observer)
        await hooks.after_relay(observer)
    finally:
        meter.streams.dec()
    return upstream.status, result


async def _recover(
    request: web.Request,
    state: RequestState,
    route: Route,
    repair: Repair,
    first: RelayResult,
    *,
    original: bytes,
    send: Callable[[bytes, Mapping[str, str]], Awaitable[Answer]],
    config: Config,
    epoch: int,
) -> tuple[Sanitized, Answer] | None:
    """Send the retry a 400 calls for (``proxy.recover``): the body sent and the answer, or
    ``None`` (the first answer stands; in report mode, what would have been sent is logged)."""
    sanitized = repair.sanitized
    # A body only the standard library reads (lone surrogates) was skipped by a plan without the
    # surrogate rule: recovery reads it as the rules would.
    if sanitized is None or first.readable is None:
        return None
    if sanitized.skipped not in (None, "body_not_json"):
        return None
    retry = plan_retry(
        first.readable,
        original,
        sanitized,
        repair.source or route.planner,
        state.api,
        given=given_to_rules(request, served_named(state.api), repair.reasoning),
        policy=Policy(route.config.recover.lossy),
    )
    if retry is None:
        return None
    meter = request.app[METRICS_KEY]
    if route.config.mode == "report":  # report mode forwards the client's bytes, nothing else
        reported(retry, request_id=state.request_id, route=route.name, meter=meter)
        return None
    if not may_retry(
        request, first, retry, request_id=state.request_id, max_body_bytes=config.max_body_bytes
    ):
        return None
    # What X-Chatmend-Changes and request_done describe is the body the upstream accepted.
    state.took(retry.sanitized.changes)
    answer = await send(retry.sanitized.body, {RECOVERED_HEADER: retry.header})
    status, result = (answer.status, None) if isinstance(answer, web.Response) else answer
    record(
        retry,
        status,
        result,
        request_id=state.request_id,
        route=route.name,
        meter=meter,
        suggestions=request.app[SUGGESTIONS_KEY],
    )
    if status < 400 and state.api is not None:
        _learn(request, route, repair, retry, api=state.api, epoch=epoch)
    return retry.sanitized, answer


def _learn(
    request: web.Request, route: Route, repair: Repair, retry: Retry, *, api: str, epoch: int
) -> None:
    """What recovered the request, for this client's next requests (``proxy.learned``)."""
    request.app[LEARNED_KEY].learn(
        route=route.name,
        upstream=route.config.upstream.url,
        api=api,
        model=retry.model,
        scope=repair.scope,
        rules=retry.plan,
        error_class=retry.error_class,
        ttl=route.config.recover.learn_ttl,
        epoch=epoch,
    )
