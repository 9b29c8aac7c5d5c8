"""One request's trip through chatmend, top to bottom:
admit -> read -> repair -> send (-> recover) -> answer, then done.

``handle`` is the app's catch-all route (proxy/server/app.py answers the probes before it). The
request is one ``Flow`` (proxy/observe/flow.py) from start to end. Each step is one function
below, in the order a request meets them; a step that answers the request itself (an error, a
refusal) returns that answer, and the trip ends there. Each step fills the flow and announces
itself on the app's ``Events`` (``request_read``, ``limited``, ``repaired``,
``response_started``, ``response_ended``, ``upstream_failed``, ``answered``, ``done``): what is
said about the request (metrics, log lines), the page's capture, the span and the stash's counts
are their subscribers, and nothing here calls them. Nothing below calls back into this module.
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

from proxy.config import Config
from proxy.observe.flow import RELAYED_FOR, Events, Flow, ms, relayed
from proxy.observe.log import get_logger
from proxy.recovery.learned import LearnedRepairs
from proxy.recovery.retry import (
    RECOVERABLE,
    RECOVERED_HEADER,
    Policy,
    Retry,
    may_retry,
    plan_retry,
    record,
    reported,
)
from proxy.relay import body, errors, prefix
from proxy.relay.credentials import apply_upstream_credentials, authorized, request_scope
from proxy.relay.offload import Offloader
from proxy.relay.rewrite import Rewrite, request_tools
from proxy.relay.routing import RefusedPath, Route, Runtime, route_path
from proxy.relay.served import ServedApi, served_api, served_named
from proxy.relay.streaming import RelayResult, relay
from proxy.relay.upstream import (
    anthropic_betas,
    open_upstream,
    request_headers,
    unreachable,
    untraced,
    upstream_url,
)
from proxy.server import page
from proxy.server.appkeys import (
    EVENTS_KEY,
    INFLIGHT_KEY,
    LEARNED_KEY,
    METRICS_KEY,
    OFFLOAD_KEY,
    PREFIX_KEY,
    REASONING_KEY,
    RECENT_KEY,
    RELAY_KEY,
    RUNTIME_KEY,
    SESSION_KEY,
    SUGGESTIONS_KEY,
)
from proxy.stash.hooks import RequestReasoning
from rules.engine.base import NO_FACTS, RequestFacts
from rules.providers.sanitize import PlanSource, Sanitized

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
    #: The client's credential scope (``proxy.relay.credentials.request_scope``; ``None``: no
    #: credential): the prefix cache's space, the stash's and the learned repairs' key.
    scope: str | None = None
    #: The body as parsed on the way (by the prefix cache or the stash lookup; ``None`` if it
    #: was parsed elsewhere or not at all): the reply rules read its tools from it.
    payload: dict[str, Any] | None = None


async def handle(request: web.Request) -> web.StreamResponse:
    """Serve one request, contain unexpected errors, and announce its end once."""
    flow = Flow.start(request)
    try:
        response = flow.answer(await _serve(flow))
        flow.status = response.status
        return response
    except web.HTTPException as exc:  # aiohttp's own answers (none expected from the route)
        flow.status = exc.status
        raise
    except (asyncio.CancelledError, ConnectionResetError):  # the client left mid-request
        flow.outcome = flow.outcome or "client_disconnected"
        raise
    except Exception as exc:  # nothing a client sends may crash the server
        log.error("request_failed", error=type(exc).__name__)
        flow.status = 500
        return flow.answer(errors.internal_error())
    finally:
        if flow.hold is not None:
            flow.hold.release()
        if flow.handed_to is None:  # else the worker it was handed to said it all
            request.app[EVENTS_KEY].done(flow)
        flow.end()


async def _serve(flow: Flow) -> web.StreamResponse:
    app = flow.request.app
    events = app[EVENTS_KEY]
    runtime = app[RUNTIME_KEY].current  # read once: a reload does not touch this request
    epoch = app[LEARNED_KEY].epoch  # what it learns is dropped if a reload comes first
    # 1. Admit: the route, and nothing is read of a request chatmend will not serve.
    route = _admit(flow, events, runtime)
    if isinstance(route, web.Response):
        return route
    # 2. Read: the body as it came, and decoded where chatmend repairs it.
    read = await _read(flow, events, runtime.config)
    if isinstance(read, web.Response):
        return read
    # Under --workers: a session another worker keeps is served there (proxy/relay/owners.py).
    if RELAY_KEY in app and runtime.config.prefix_cache.route_sessions:
        handed = await _hand_over(flow, route, read, runtime.config)
        if handed is not None:
            return handed
    events.request_read(flow)
    # 3. Repair: the route's rules, fail-open within the deadline.
    repair = await _repair(flow, events, route, read, runtime.config)
    if repair.sanitized is not None:
        events.repaired(flow)
        if repair.sanitized.skipped == "json_too_deep":  # nested past what orjson reads
            flow.outcome = "rejected"
            return errors.too_deep()
    # 4. Send: upstream, the answer streamed back (a 400 a rule repairs: once more).
    return await _send(flow, events, route, read, repair, config=runtime.config, epoch=epoch)


# 1. Admit -----------------------------------------------------------------------------------


def _admit(flow: Flow, events: Events, runtime: Runtime) -> Route | web.Response:
    """The route for the request's path, or the refusal of a path, a method, a size or a
    client without the route's token."""
    request = flow.request
    try:
        path = route_path(request.rel_url.raw_path)
    except RefusedPath as exc:
        return _refused(flow, events, "path", errors.bad_path(str(exc)), reason=str(exc))
    if page.claims(path) and RECENT_KEY in request.app:
        # Under the page's name but not one of its paths: never forwarded, with the
        # admin's Authorization on it.
        flow.outcome = "rejected"
        return errors.closing(page.not_a_page())
    route = runtime.route_for(path)
    flow.route = route.name
    if route.config.log_content:
        flow.allow_content()
    if runtime.retired and runtime.retired_prefix(path, route) is not None:
        # A credentialed route a reload removed: never another route's upstream.
        return _refused(flow, events, "removed_route", errors.route_removed())
    if request.method not in METHODS:
        allowed = ", ".join(sorted(METHODS))
        return _refused(flow, events, "method", errors.method_not_allowed(allowed))
    early = body.refused_early(request, runtime.config)
    if early is not None:
        limit = "header_size" if early.status == 431 else "body_size"
        return _refused(flow, events, limit, early)
    if not authorized(route.config, request.headers):
        flow.outcome = "unauthorized"
        return errors.closing(errors.unauthorized(route.name))
    return route


def _refused(
    flow: Flow, events: Events, limit: str, response: web.Response, **fields: object
) -> web.Response:
    flow.outcome = "rejected"
    events.limited(flow, limit, **fields)
    return errors.closing(response)


def _overloaded(flow: Flow, events: Events, config: Config, hold: body.Hold) -> web.Response:
    """A big body past the in-flight budget: 503 with ``Retry-After``, counted, closed."""
    response = errors.overloaded(config.inflight_body_bytes)
    return _refused(flow, events, "inflight_body_bytes", response, held=hold.budget.held)


# 2. Read ------------------------------------------------------------------------------------


async def _read(flow: Flow, events: Events, config: Config) -> Body | web.Response:
    """The body within ``client_body_timeout`` and ``max_body_bytes``, decoded (within
    ``max_body_bytes`` too) when it is one chatmend repairs."""
    request = flow.request
    if not request.body_exists:
        return Body()
    # The bodies in flight together stay within inflight_body_bytes; a big one past
    # it is refused before it is read (its announced size), once read, or while it inflates.
    hold = request.app[INFLIGHT_KEY].hold(config.inflight_body_bytes, config.offload_body_bytes)
    flow.hold = hold
    announced = request.content_length
    if announced is not None and not hold.take(announced):
        return _overloaded(flow, events, config, hold)
    try:
        raw = await body.read(request, config)
    except web.HTTPRequestEntityTooLarge:
        return _refused(flow, events, "body_size", errors.too_large(config.max_body_bytes))
    except TimeoutError:
        flow.outcome = "client_timeout"
        return errors.body_timeout(config.client_body_timeout)
    if announced is None and not hold.take(len(raw)):
        return _overloaded(flow, events, config, hold)
    api = served_api(request.method, request.path)
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if api is None or encoding in ("", "identity"):
        return Body(raw, raw, api)
    try:
        decoded = await body.decoded(raw, encoding, config.max_body_bytes, hold)
    except body.TooLarge:
        return _refused(flow, events, "decoded_size", errors.too_large(config.max_body_bytes))
    except body.Overloaded:
        return _overloaded(flow, events, config, hold)
    if decoded is None:  # an encoding chatmend does not read, or broken: sent as it came
        flow.unread = "encoding"
        return Body(raw)
    return Body(raw, decoded, api)


async def _hand_over(
    flow: Flow, route: Route, read: Body, config: Config
) -> web.StreamResponse | None:
    """The answer of the worker keeping this request's session, when that is another worker
    and it answers; ``None``: served here (its own session, a body chatmend does not repair or
    that goes to an offload process, a request relayed here already, an owner unreachable)."""
    request = flow.request
    if (
        read.api is None
        or read.decoded is None
        or read.raw is None
        or not config.prefix_cache.enabled
        or len(read.decoded) > config.offload_body_bytes  # repaired without the cache
        or relayed(request)
    ):
        return None
    app = request.app
    relay = app[RELAY_KEY]
    scope = request_scope(route.config.upstream.url, request.headers, request.rel_url.query)
    space = (route.name, read.api.name, scope)  # the prefix cache's space (_prefix_read)
    owner = relay.workers.owner(space, read.decoded, read.api.api.field)
    if owner is None or owner == relay.workers.index:
        return None
    meter = app[METRICS_KEY]
    flow.handed_to = owner  # from here the owner says it all, a client that leaves included
    relayed_to = meter.child(meter.handovers, "relayed")
    response = await relay.forward(request, read.raw, owner, relayed_to.inc)
    if response is None:
        flow.handed_to = None
        meter.child(meter.handovers, "unreachable").inc()
    return response


# 3. Repair ----------------------------------------------------------------------------------


async def _repair(flow: Flow, events: Events, route: Route, read: Body, config: Config) -> Repair:
    """The rules over the decoded body, in a worker process if it is big; the body goes as it
    came if they do not finish within ``sanitize_deadline`` (or the worker fails)."""
    if read.decoded is None or read.api is None:
        return Repair()
    request = flow.request
    flow.api = read.api.name
    app = request.app
    offload = app[OFFLOAD_KEY]
    big = offload.enabled and len(read.decoded) > config.offload_body_bytes
    reasoning: RequestReasoning | None = None
    sanitized: Sanitized | None = None
    source: PlanSource = route.planner
    # The client's credential: the prefix cache's session space and the stash's key.
    scope = request_scope(route.config.upstream.url, request.headers, request.rel_url.query)
    started = time.perf_counter()  # the body parsed once, by the prefix cache if it can
    reading = prefix.SKIP if big else _prefix_read(flow, route, read, scope)
    try:
        if big:  # parsed and repaired in a worker process (proxy/relay/offload.py)
            async with asyncio.timeout(config.sanitize_deadline):
                waiting = time.perf_counter()
                reasoning = await _recall(flow, route, read, reading, scope, offload=offload)
                started += time.perf_counter() - waiting  # the stash's wait is not the rules'
                sanitized = await offload.sanitize(
                    read.decoded,
                    route.planner,
                    read.api.name,
                    given=given_to_rules(request, read.api, reasoning),
                    deadline=config.sanitize_deadline,
                )
        else:  # here, on the event loop; the deadline can only act where it waits: the stash
            waiting = time.perf_counter()
            reasoning = _recall_here(flow, route, read, reading, scope)
            if reasoning is not None and reasoning.wanted:
                async with asyncio.timeout(config.sanitize_deadline):
                    await app[REASONING_KEY].recall(reasoning)
            started += time.perf_counter() - waiting  # the stash's wait is not the rules'
            given = given_to_rules(request, read.api, reasoning)
            source, sanitized = _inline(
                app, route, read, reading, scope, reasoning=reasoning, given=given
            )
    except TimeoutError:
        # Fail-open: the body goes as it came, as if chatmend were not there.
        events.limited(flow, "sanitize_deadline", seconds=config.sanitize_deadline)
    except Exception as exc:
        if not big:
            raise
        # A broken worker process or pool: fail-open too.
        log.error("offload_failed", error=type(exc).__name__)
    payload = reading.payload if reasoning is None else reasoning.payload
    if sanitized is None:
        return Repair(None, reasoning, scope=scope, payload=payload)
    flow.sanitize_ms = ms(started)
    flow.record(sanitized)
    return Repair(sanitized, reasoning, source, scope, payload)


async def _recall(
    flow: Flow,
    route: Route,
    read: Body,
    reading: prefix.Reading,
    scope: str | None,
    *,
    offload: Offloader,
) -> RequestReasoning | None:
    """What the reasoning stash recalls for a big body (proxy/stash): one lookup before the
    rules, its parse and its walk in a worker."""
    assert read.decoded is not None and read.api is not None
    if read.api.tool_turn is None:
        return None
    return await flow.request.app[REASONING_KEY].before_rules(
        route.planner,
        read.decoded,
        scope,
        offload=offload.call,
        api=read.api.name,
        mark=read.api.tool_turn,
        parsed=reading.payload,
    )


def _recall_here(
    flow: Flow, route: Route, read: Body, reading: prefix.Reading, scope: str | None
) -> RequestReasoning | None:
    """What the reasoning stash wants for this body (proxy/stash), over the body as the prefix
    cache parsed it: its keys, fetched from the store by ``ReasoningHooks.recall``."""
    assert read.decoded is not None and read.api is not None
    if read.api.tool_turn is None:
        return None
    return flow.request.app[REASONING_KEY].read(
        route.planner,
        read.decoded,
        scope,
        api=read.api.name,
        mark=read.api.tool_turn,
        parsed=reading.payload,
        carried=reading.resume,  # the session's last request: its turns' keys are known
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
    cache = app[PREFIX_KEY]  # resumed from the session's last request (prefix_cache.resume)
    sanitized = cache.repair(
        reading, read.decoded, source, read.api.name, parsed=parsed, given=given
    )
    if cache.config.resume and reading.resume is not None:
        meter = app[METRICS_KEY]
        meter.child(meter.prefix_resumes, "resumed" if sanitized.resumed else "whole").inc()
    return source, sanitized


def _prefix_read(flow: Flow, route: Route, read: Body, scope: str | None) -> prefix.Reading:
    """The body read through the prefix cache (proxy/relay/prefix.py), in the space of its
    credential ``scope``, route and API, and counted."""
    assert read.api is not None and read.decoded is not None
    app = flow.request.app
    cache = app[PREFIX_KEY]
    if not cache.config.enabled:
        return prefix.SKIP
    try:
        reading = cache.read((route.name, read.api.name, scope), read.api.api, read.decoded)
    except Exception as exc:  # fail-open: the cache only saves work; the body is read whole
        log.error("prefix_cache_failed", error=type(exc).__name__)
        return prefix.SKIP
    flow.prefix = reading.outcome
    meter = app[METRICS_KEY]
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
    """The plan source for this body (``proxy.recovery.learned``): the route's planner, with what
    was learned for this client, route, upstream, API and model enforced; and the body parsed,
    if that took parsing it (a route with nothing learned pays one dict lookup, no parse)."""
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
    """What the server gives the rules of this request (``RequestFacts``): what the stash
    recalled for it and, for a Messages request, its ``anthropic-beta`` values; ``None`` when
    there is nothing to give (no RequestFacts is built, the plan runs as compiled)."""
    given = None if reasoning is None else reasoning.given
    if api is not None and api.anthropic_headers and "anthropic-beta" in request.headers:
        betas = anthropic_betas(request.headers)
        if betas:
            given = replace(given or NO_FACTS, betas=betas)
    return given


# 4. Send ------------------------------------------------------------------------------------


def _upstream_headers(
    request: web.Request,
    route: Route,
    read: Body,
    repair: Repair,
    *,
    rewritten: bool,
    replies: bool,
) -> CIMultiDict[str]:
    """The headers the upstream gets: the client's, with the route's credential, no
    ``Content-Encoding`` for a rewritten body (sent decoded), only ``identity`` offered for an
    answer the reply rules read, and only the encodings the observer reads offered for a
    response it will observe."""
    headers = request_headers(request.headers)
    if RELAYED_FOR in headers and relayed(request):
        headers.popall(RELAYED_FOR)  # the relaying worker's word to this one, not the client's
    if rewritten:
        headers.popall("Content-Encoding", None)  # the new body is sent decoded
    if replies and "Accept-Encoding" in headers:
        headers["Accept-Encoding"] = "identity"  # the reply rules read the answer as it is
    apply_upstream_credentials(route.config, headers, read.api)
    hooks = request.app[REASONING_KEY]
    profile = None if repair.sanitized is None else repair.sanitized.profile
    if hooks.observes(route.planner, profile, repair.reasoning):
        hooks.offer_readable_encodings(headers)
    return headers


async def _send(
    flow: Flow,
    events: Events,
    route: Route,
    read: Body,
    repair: Repair,
    *,
    config: Config,
    epoch: int,
) -> web.StreamResponse:
    """Send the body upstream (the client's bytes, compressed or not, if no rule changed them)
    and relay the answer; a 400 of a class a rule repairs is repaired and sent once more."""
    sanitized = repair.sanitized
    rewritten = sanitized is not None and sanitized.changed
    replies = await _replies(flow, route, read, repair, config)
    headers = _upstream_headers(
        flow.request, route, read, repair, rewritten=rewritten, replies=replies is not None
    )
    send = partial(
        _exchange,
        flow=flow,
        events=events,
        route=route,
        headers=headers,
        api=read.api,
        profile=None if sanitized is None else sanitized.profile,
        reasoning=repair.reasoning,
        replies=replies,
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
            flow,
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
    # 5. Answer: what the upstream answered is the request's.
    flow.original, flow.sanitized, flow.recovered = read.decoded, sanitized, recovered
    return _answered(flow, events, *answer, replies)


def _answered(
    flow: Flow, events: Events, status: int, result: RelayResult, replies: Rewrite | None
) -> web.StreamResponse:
    """The upstream's answer, the request's: what it was, what the reply rules did to it."""
    flow.response, flow.outcome = result.response, result.outcome
    flow.refusal = result.readable if 400 <= status < 500 else None
    if replies is not None and replies.kind is not None:
        flow.reply(replies.changes, replies.reported, replies.held_ms)
    events.answered(flow)
    if result.outcome == "upstream_failed":
        events.upstream_failed(flow, result.error, bytes_relayed=result.bytes_relayed)
    return result.response


async def _replies(
    flow: Flow, route: Route, read: Body, repair: Repair, config: Config
) -> Rewrite | None:
    """The reply rules for the answer (proxy/relay/rewrite.py): those of the profile the body
    ran under, armed by the request's tools; ``None`` when none can act on it."""
    sanitized = repair.sanitized
    if sanitized is None or read.api is None or read.api.replies is None or not read.decoded:
        return None
    plan = route.planner.replies(sanitized.profile)
    request = repair.payload
    # No tools declared: no call can come back. Asked of the body as parsed when it was (a
    # search of its bytes for '"tools"' reads all of a long history: JSON is full of quotes).
    declared = "tools" in request if request is not None else b'"tools"' in read.decoded
    if not plan or not declared:
        return None
    if request is None:  # parsed in a worker: only the tools come back from one
        offload = flow.request.app[OFFLOAD_KEY]
        if offload.enabled and len(read.decoded) > config.offload_body_bytes:
            try:
                request = await offload.run(
                    request_tools, read.decoded, deadline=config.sanitize_deadline
                )
            except Exception as exc:  # fail-open: the answer is relayed as it comes
                log.error("offload_failed", error=type(exc).__name__)
                return None
        else:
            request = request_tools(read.decoded)
    return None if request is None else read.api.replies(plan, request)


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
    flow: Flow,
    events: Events,
    route: Route,
    headers: CIMultiDict[str],
    api: ServedApi | None,
    profile: str | None,
    reasoning: RequestReasoning | None,
    replies: Rewrite | None = None,
) -> Answer:
    """Send ``body`` upstream and relay the answer: its status and the relay's result, or
    chatmend's own error response if the upstream could not be reached."""
    request = flow.request
    app = request.app
    started = time.perf_counter()
    upstream_base = route.config.upstream.url
    try:
        upstream = await open_upstream(
            app[SESSION_KEY],
            request.method,
            upstream_url(upstream_base, route.upstream_path(request.rel_url.raw_path_qs)),
            headers,
            body,
            timeout=route.timeout,
        )
    except TimeoutError as exc:
        untraced(exc)  # no cycle holds the request's body (proxy/relay/upstream.py)
        flow.outcome = "upstream_timeout"
        events.upstream_failed(flow, type(exc).__name__)
        return errors.upstream_timeout()
    except ClientError as exc:
        untraced(exc)
        flow.outcome = "upstream_unreachable"
        events.upstream_failed(flow, type(exc).__name__, **unreachable(exc, upstream_base))
        return errors.upstream_unreachable()
    flow.upstream_ms = ms(started)
    events.response_started(flow)
    hooks = app[REASONING_KEY]
    try:
        # The stash reads a 200 answer as it is relayed, and stores what it kept before the
        # answer ends (proxy/stash/hooks.py).
        observer = None
        if api is not None:
            observer = hooks.observer(
                route.planner, profile, reasoning, upstream, kind=api.observer
            )
        result = await relay(
            request, upstream, {**flow.headers(reached=True), **extra_headers}, observer, replies
        )
        await hooks.after_relay(observer)
    finally:
        events.response_ended(flow)
    return upstream.status, result


async def _recover(
    flow: Flow,
    route: Route,
    repair: Repair,
    first: RelayResult,
    *,
    original: bytes,
    send: Callable[[bytes, Mapping[str, str]], Awaitable[Answer]],
    config: Config,
    epoch: int,
) -> tuple[Sanitized, Answer] | None:
    """Send the retry a 400 calls for (``proxy.recovery.retry``): the body sent and the answer,
    or ``None`` (the first answer stands; in report mode, what would have been sent is logged)."""
    sanitized = repair.sanitized
    # A body only the standard library reads (lone surrogates) was skipped by a plan without the
    # surrogate rule: recovery reads it as the rules would.
    if sanitized is None or first.readable is None:
        return None
    if sanitized.skipped not in (None, "body_not_json"):
        return None
    request = flow.request
    retry = plan_retry(
        first.readable,
        original,
        sanitized,
        repair.source or route.planner,
        flow.api,
        given=given_to_rules(request, served_named(flow.api), repair.reasoning),
        policy=Policy(route.config.recover.lossy),
    )
    if retry is None:
        return None
    meter = request.app[METRICS_KEY]
    if route.config.mode == "report":  # report mode forwards the client's bytes, nothing else
        reported(retry, route=route.name, meter=meter)
        return None
    if not may_retry(request, first, retry, max_body_bytes=config.max_body_bytes):
        return None
    # What X-Chatmend-Changes and request_done describe is the body the upstream accepted.
    flow.took(retry.sanitized.changes)
    flow.recovered_from, flow.recovered_class = first.readable, retry.error_class
    answer = await send(retry.sanitized.body, {RECOVERED_HEADER: retry.header})
    status, result = (answer.status, None) if isinstance(answer, web.Response) else answer
    record(
        retry,
        status,
        result,
        route=route.name,
        meter=meter,
        suggestions=request.app[SUGGESTIONS_KEY],
    )
    if status < 400:
        _learn(request, route, repair, retry, api=flow.api, epoch=epoch)
    return retry.sanitized, answer


def _learn(
    request: web.Request, route: Route, repair: Repair, retry: Retry, *, api: str, epoch: int
) -> None:
    """What recovered the request, for this client's next requests (``proxy.recovery.learned``)."""
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
