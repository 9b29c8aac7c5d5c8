"""create_app(config): the probes, the catch-all proxy route (proxy/server/trip.py), and what the
app holds for all its requests (the upstream session, routes, metrics, the reasoning stash, the
worker processes, the subscribers of the request's flow)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from aiohttp import web

from proxy.config import Config
from proxy.observe import otel
from proxy.observe.accounting import Accounting
from proxy.observe.capture import Capture, Recent
from proxy.observe.flow import Events, Subscriber
from proxy.observe.log import SINK
from proxy.observe.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from proxy.observe.metrics import Metrics
from proxy.observe.otel import Tracing
from proxy.recovery.learned import LearnedRepairs
from proxy.recovery.retry import Suggestions
from proxy.relay.body import MAX_HEADER_BYTES, InflightBudget
from proxy.relay.errors import error_response
from proxy.relay.offload import Offloader
from proxy.relay.prefix import PrefixCache
from proxy.relay.routing import Runtime, RuntimeHolder
from proxy.relay.upstream import create_session
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
    RUNTIME_KEY,
    SESSION_KEY,
    SUGGESTIONS_KEY,
    TRACER_KEY,
    UI_KEY,
)
from proxy.server.trip import handle
from proxy.stash import build_stash
from proxy.stash.hooks import ReasoningHooks
from proxy.stash.redis_store import RedisStore
from rules.providers.planner import Planner

__all__ = [
    "LEARNED_KEY",
    "MAX_HEADER_BYTES",
    "METRICS_KEY",
    "OFFLOAD_KEY",
    "PREFIX_KEY",
    "REASONING_KEY",
    "RUNTIME_KEY",
    "SESSION_KEY",
    "SUGGESTIONS_KEY",
    "create_app",
    "planner_of",
]

#: aiohttp's parser limits, under chatmend's own: one header line, the number of header lines,
#: the request line. Past these aiohttp answers a plain-text 400 before any handler runs.
PARSER_LIMITS: dict[str, object] = {
    "max_field_size": 64 * 1024,
    "max_headers": 128,
    "max_line_size": 8190,
    # A compressed request body stays compressed until the handler has checked the client's
    # token and decides to read it (``proxy.relay.body.decoded``, bounded by ``max_body_bytes``).
    "auto_decompress": False,
}


def create_app(config: Config) -> web.Application:
    """The proxy for ``config``; ``app[RUNTIME_KEY].swap`` replaces its routes and rules later
    (``max_body_bytes`` and ``listen`` are fixed for the app's lifetime)."""
    app = web.Application(client_max_size=config.max_body_bytes, handler_args=PARSER_LIMITS)
    app[RUNTIME_KEY] = RuntimeHolder(Runtime.compile(config))
    app[METRICS_KEY] = Metrics()
    app[SUGGESTIONS_KEY] = Suggestions()
    app[INFLIGHT_KEY] = InflightBudget()
    app[OFFLOAD_KEY] = Offloader(
        config.offload_processes, config.offload_body_bytes, app[METRICS_KEY]
    )
    app.on_cleanup.append(_close_offload)
    app[PREFIX_KEY] = PrefixCache(config.prefix_cache)
    app.cleanup_ctx.append(_upstream_session)
    # The reasoning stash (none for `reasoning.store: off`), see proxy/stash.
    stash = build_stash(config.reasoning, app[METRICS_KEY])
    app[REASONING_KEY] = ReasoningHooks(stash, app[METRICS_KEY])
    app.on_cleanup.append(_close_stash)
    # Repairs learned from recovered refusals, shared through the stash's Redis.
    app[LEARNED_KEY] = LearnedRepairs(app[METRICS_KEY])
    if stash is not None and isinstance(stash.store, RedisStore):
        app[LEARNED_KEY].share(stash.store.client, stash.store.prefix)
        app.cleanup_ctx.append(_share_learned)
    # Probes chatmend answers itself, never forwarded, never logged (they come every few
    # seconds): registered before the catch-all, so they match first.
    app.router.add_get(HEALTHZ, healthz)
    app.router.add_get(READYZ, readyz)
    app.router.add_get(METRICS, metrics)
    # OpenTelemetry: one span per request, only when the OTEL_* variables ask for it.
    tracer = otel.tracer_from_env(os.environ)
    if tracer is not None:
        app[TRACER_KEY] = tracer
    # The page at /chatmend/ (off by default) and the recent requests it lists.
    if config.ui.enabled:
        app[RECENT_KEY] = Recent(config.capture)
        app[UI_KEY] = config.ui
        page.add_routes(app, config.ui)
    # Who hears each request's events (proxy/observe/flow.py), once the app is set up.
    app.on_startup.append(_subscribe)
    # One catch-all route whose handler observes the request itself: no middleware chain and
    # no response signal to run per request (both measurable on the hot path).
    app.router.add_route("*", "/{tail:.*}", handle, expect_handler=_expect)
    return app


async def _subscribe(app: web.Application) -> None:
    """The flow's subscribers, fixed when the app starts: the accounting and the reasoning
    stash always; the capture when the page is on, the tracing when there is a tracer."""
    subscribers: list[Subscriber] = [Accounting(app[METRICS_KEY]), app[REASONING_KEY]]
    if RECENT_KEY in app:
        subscribers.append(Capture(app[RECENT_KEY]))
    if TRACER_KEY in app:
        subscribers.append(Tracing(app[TRACER_KEY]))
    app[EVENTS_KEY] = Events(subscribers)


HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"


def _misdirected(request: web.Request) -> web.Response | None:
    """While the page is on, ``/metrics`` and ``/readyz`` answer only the ``Host`` it answers
    (``proxy.server.page.host_named``): a DNS-rebinding page would read them too."""
    ui = request.app.get(UI_KEY)
    if ui is None or page.host_named(request, ui):
        return None
    return page.misdirected()


async def metrics(request: web.Request) -> web.Response:
    """Prometheus exposition of this instance's counters (served here, never forwarded)."""
    refused = _misdirected(request)
    if refused is not None:
        return refused
    meter = request.app[METRICS_KEY]
    meter.sync_log_failures(SINK.failures)
    body = meter.exposition()
    return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the process answers HTTP."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Readiness: the config is loaded and the upstream session is open (it closes on shutdown,
    so a draining instance stops receiving traffic)."""
    refused = _misdirected(request)
    if refused is not None:
        return refused
    session = request.app.get(SESSION_KEY)
    if session is None or session.closed:
        return web.json_response({"status": "not_ready", "reason": "upstream_session"}, status=503)
    if SINK.failing:  # the last log line could not be written: requests go unrecorded
        return web.json_response(
            {"status": "not_ready", "reason": "log_sink", "log_write_failures": SINK.failures},
            status=503,
        )
    holder = request.app[RUNTIME_KEY]
    routes = {route.name: route.config.profile for route in holder.current.routes}
    return web.json_response(
        {
            "status": "ready",
            "profile": routes["default"],
            "routes": routes,
            "config_generation": holder.generation,
        }
    )


def planner_of(app: web.Application, route: str = "default") -> Planner:
    """The planner a route's requests run under now (tests and tools)."""
    return next(r.planner for r in app[RUNTIME_KEY].current.routes if r.name == route)


async def _upstream_session(app: web.Application) -> AsyncIterator[None]:
    session = create_session(app[RUNTIME_KEY].current.config.default.upstream)
    app[SESSION_KEY] = session
    yield
    await session.close()


async def _close_offload(app: web.Application) -> None:
    app[OFFLOAD_KEY].close()


async def _expect(request: web.Request) -> web.Response | None:
    """``Expect: 100-continue`` is answered by the handler once the request passed its checks
    (a refused request never gets a 100, so its body is never sent); other expectations get
    a 417. The header is not forwarded (``proxy.relay.upstream``)."""
    if request.headers.get("Expect", "").strip().lower() == "100-continue":
        return None
    response = error_response(
        417,
        "Only 'Expect: 100-continue' is supported.",
        "expectation_failed",
        "invalid_request_error",
    )
    response.force_close()
    return response


async def _share_learned(app: web.Application) -> AsyncIterator[None]:
    """Read the replicas' learned repairs from Redis while the app runs."""
    task = asyncio.get_running_loop().create_task(app[LEARNED_KEY].run_refresh())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _close_stash(app: web.Application) -> None:
    stash = app[REASONING_KEY].stash
    if stash is not None:
        await stash.close()
