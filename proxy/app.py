"""create_app(config): the catch-all proxy route, its observer, the upstream session."""

from __future__ import annotations

import asyncio
import os
import re
import time
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from aiohttp import ClientError, ClientSession, HttpVersion11, web
from multidict import CIMultiDict

from proxy.config import Config
from proxy.credentials import apply_upstream_credentials, authorized
from proxy.errors import error_response
from proxy.log import SINK, get_logger
from proxy.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from proxy.metrics import Metrics, classify
from proxy.offload import Offloader
from proxy.provenance import explain
from proxy.recover import RECOVERED_HEADER, Suggestions, may_retry, plan_retry, record
from proxy.routing import RefusedPath, Route, Runtime, RuntimeHolder, route_path
from proxy.sanitize import FIELDS, Sanitized, sanitize_body
from proxy.stash import build_stash
from proxy.stash.hooks import ReasoningHooks, RequestReasoning
from proxy.streaming import RelayResult, relay
from proxy.upstream import create_session, open_upstream, request_headers, upstream_url
from rules.engine.base import Change
from rules.providers.planner import Planner

SESSION_KEY = web.AppKey("session", ClientSession)
RUNTIME_KEY = web.AppKey("runtime", RuntimeHolder)
METRICS_KEY = web.AppKey("metrics", Metrics)
REASONING_KEY = web.AppKey("reasoning", ReasoningHooks)
SUGGESTIONS_KEY = web.AppKey("recovery_suggestions", Suggestions)
OFFLOAD_KEY = web.AppKey("offload", Offloader)

REQUEST_ID_HEADER = "X-Request-ID"
_VALID_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")

#: Request headers chatmend accepts: names and values of all header lines together, in bytes
#: (nginx allows 32 KiB, Envoy 60 KiB). More gets a 431 in the OpenAI shape.
MAX_HEADER_BYTES = 32 * 1024
#: aiohttp's parser limits, under chatmend's own: one header line, the number of header lines,
#: the request line. Past these aiohttp answers a plain-text 400 before any handler runs.
PARSER_LIMITS: dict[str, object] = {
    "max_field_size": 64 * 1024,
    "max_headers": 128,
    "max_line_size": 8190,
    # A compressed request body stays compressed until the handler has checked the client's
    # token and decides to read it (``_decoded``, bounded by ``max_body_bytes`` decoded).
    "auto_decompress": False,
}
#: The methods chatmend forwards. TRACE would echo the request headers back, a route's own
#: upstream key included; CONNECT and the rest have no business with an HTTP API.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Request encodings chatmend decodes to repair a body (others go upstream as they came).
DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})
#: Decoded bytes per step of inflating a body; the event loop runs between two steps.
INFLATE_STEP = 256 * 1024

log = get_logger()

#: What sending a body upstream gives: its status and the relay's result, or chatmend's own
#: error response (the upstream could not be reached).
Answer = tuple[int, RelayResult] | web.Response


@dataclass(slots=True)
class RequestState:
    """What one request collects on its way through, for its one ``request_done`` line."""

    request_id: str
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


def create_app(config: Config) -> web.Application:
    """The proxy for ``config``; ``app[RUNTIME_KEY].swap`` replaces its routes and rules later
    (``max_body_bytes`` and ``listen`` are fixed for the app's lifetime)."""
    app = web.Application(client_max_size=config.max_body_bytes, handler_args=PARSER_LIMITS)
    app[RUNTIME_KEY] = RuntimeHolder(Runtime.compile(config))
    app[METRICS_KEY] = Metrics()
    app[SUGGESTIONS_KEY] = Suggestions()
    app[OFFLOAD_KEY] = Offloader(config.offload_processes)
    app.on_cleanup.append(_close_offload)
    app.cleanup_ctx.append(_upstream_session)
    # issue 4: the reasoning stash (none for `reasoning.store: off`), see proxy/stash.
    stash = build_stash(config.reasoning, app[METRICS_KEY])
    app[REASONING_KEY] = ReasoningHooks(stash, app[METRICS_KEY])
    app.on_cleanup.append(_close_stash)
    # Probes chatmend answers itself, never forwarded, never logged (they come every few
    # seconds): registered before the catch-all, so they match first.
    app.router.add_get(HEALTHZ, healthz)
    app.router.add_get(READYZ, readyz)
    app.router.add_get(METRICS, metrics)
    # One catch-all route whose handler observes the request itself: no middleware chain and
    # no response signal to run per request (both measurable on the hot path).
    app.router.add_route("*", "/{tail:.*}", observe_request, expect_handler=_expect)
    return app


HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"


async def metrics(request: web.Request) -> web.Response:
    """Prometheus exposition of this instance's counters (served here, never forwarded)."""
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
    session = create_session(app[RUNTIME_KEY].current.config.upstream)
    app[SESSION_KEY] = session
    yield
    await session.close()


async def _close_offload(app: web.Application) -> None:
    app[OFFLOAD_KEY].close()


async def _expect(request: web.Request) -> web.Response | None:
    """``Expect: 100-continue`` is answered by the handler once the request passed its checks
    (a refused request never gets a 100, so its body is never sent); other expectations get
    a 417. The header is not forwarded (``proxy.upstream``)."""
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


async def _close_stash(app: web.Application) -> None:
    stash = app[REASONING_KEY].stash
    if stash is not None:
        await stash.close()


def _request_id(request: web.Request) -> str:
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if _VALID_REQUEST_ID.fullmatch(given) else os.urandom(16).hex()


async def observe_request(request: web.Request) -> web.StreamResponse:
    """Assign the request id, contain unexpected errors, and log one ``request_done`` line."""
    state = RequestState(_request_id(request))
    started = time.perf_counter()
    status = 499  # stays so if the client disconnects and the handler is cancelled
    try:
        response = await proxy_request(request, state)
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
        response = error_response(500, "chatmend internal error", "proxy_error", "server_error")
        response.headers.update(_chatmend_headers(state))
        return response
    finally:
        _count(request.app[METRICS_KEY], state, status)
        log.info(
            "request_done",
            request_id=state.request_id,
            method=request.method,
            path=request.path,
            status=status,
            duration_ms=_ms(started),
            upstream_ms=state.upstream_ms,
            sanitize_ms=state.sanitize_ms,
            changes=state.changes,
            outcome=state.outcome,
        )


def is_chat_completions(request: web.Request) -> bool:
    """POST to any path ending in /chat/completions, with or without /v1 or a trailing slash."""
    return request.method == "POST" and request.path.rstrip("/").endswith("/chat/completions")


def is_responses(request: web.Request) -> bool:
    """POST to any path ending in /responses (the Responses API), with or without a trailing
    slash."""
    return request.method == "POST" and request.path.rstrip("/").endswith("/responses")


def api_of(request: web.Request) -> str | None:
    """The API whose body chatmend repairs on this route: ``chat``, ``responses`` or ``None``."""
    if is_chat_completions(request):
        return "chat"
    return "responses" if is_responses(request) else None


async def proxy_request(request: web.Request, state: RequestState) -> web.StreamResponse:
    """Forward any request upstream; repair chat-completions and Responses bodies on the way.

    Every response it returns is unprepared or prepared with chatmend's headers set: chatmend's
    own answers (errors) carry them too.
    """
    response = await _forward(request, state)
    if not response.prepared:
        response.headers.update(_chatmend_headers(state))
    return response


async def _forward(request: web.Request, state: RequestState) -> web.StreamResponse:
    runtime = request.app[RUNTIME_KEY].current  # read once: a reload does not touch this request
    config = runtime.config
    try:
        path = route_path(request.rel_url.raw_path)
    except RefusedPath as exc:
        state.outcome = "rejected"
        _limited(request, state, "path", reason=str(exc))
        return _closing(
            error_response(
                400, f"Request path refused: {exc}.", "invalid_path", "invalid_request_error"
            )
        )
    route = runtime.route_for(path)
    state.route = route.name
    if request.method not in METHODS:
        state.outcome = "rejected"
        _limited(request, state, "method")
        response = error_response(
            405, "Method not allowed.", "method_not_allowed", "invalid_request_error"
        )
        response.headers["Allow"] = ", ".join(sorted(METHODS))
        return _closing(response)
    rejected = _check_request(request, config)
    if rejected is not None:
        state.outcome = "rejected"
        _limited(request, state, "header_size" if rejected.status == 431 else "body_size")
        return _closing(rejected)
    if not authorized(route.config, request.headers):
        state.outcome = "unauthorized"
        return _closing(_unauthorized(route))
    raw: bytes | None = None
    if request.body_exists:
        if request.version == HttpVersion11 and "Expect" in request.headers:
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0  # as aiohttp's own expect handler does
        try:
            raw = await _read_body(request, config)
        except web.HTTPRequestEntityTooLarge:
            state.outcome = "rejected"
            _limited(request, state, "body_size")
            return _closing(_too_large(config))
        except TimeoutError:
            state.outcome = "client_timeout"
            return _body_timeout(config)
    api = api_of(request) if raw is not None else None
    body = raw
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if api is not None and raw is not None and encoding not in ("", "identity"):
        try:
            body = await _decoded(raw, encoding, config.max_body_bytes)
        except _TooLarge:
            state.outcome = "rejected"
            _limited(request, state, "decoded_size")
            return _closing(_too_large(config))
        if body is None:  # an encoding chatmend does not read, or broken: sent as it came
            log.info("payload_not_sanitized", request_id=state.request_id, reason="encoding")
            api = None
    original = body  # the client's (decoded) bytes: to explain or recover a rejection
    reasoning: RequestReasoning | None = None
    sanitized: Sanitized | None = None
    if body is not None and api is not None:
        state.api = api
        offload = request.app[OFFLOAD_KEY]
        big = offload.enabled and len(body) > config.offload_body_bytes
        try:
            async with asyncio.timeout(config.sanitize_deadline):
                if api == "chat":  # issue 4: one stash lookup before the rules (scope: the route)
                    reasoning = await request.app[REASONING_KEY].before_rules(
                        route.planner,
                        body,
                        route.config.upstream.url,
                        request.headers,
                        request.rel_url.query,
                        offload=offload.call if big else None,
                    )
                sanitized = await _sanitize(
                    request, state, body, api, route, reasoning=reasoning, offload=big
                )
        except TimeoutError:
            # Fail-open: the body goes as it came, as if chatmend were not there.
            _limited(request, state, "sanitize_deadline", seconds=config.sanitize_deadline)
        except Exception as exc:
            if not big:
                raise
            # A broken worker process or pool: fail-open too.
            log.error("offload_failed", request_id=state.request_id, error=type(exc).__name__)
        if sanitized is not None and sanitized.skipped == "json_too_deep":
            state.outcome = "rejected"
            return error_response(
                400,
                "The request body nests JSON deeper than 1024 levels, chatmend's limit.",
                "json_too_deep",
                "invalid_request_error",
            )
    # A body the rules left alone goes as it came, compressed or not: byte for byte.
    rewritten = sanitized is not None and sanitized.changed
    out = sanitized.body if sanitized is not None and rewritten else raw

    headers = request_headers(request.headers)
    if rewritten:
        headers.popall("Content-Encoding", None)  # the new body is sent decoded
    apply_upstream_credentials(route.config, headers)
    hooks = request.app[REASONING_KEY]
    profile = None if sanitized is None else sanitized.profile
    if hooks.observes(route.planner, profile, reasoning):
        hooks.offer_readable_encodings(headers)
    send = partial(
        _exchange,
        request=request,
        state=state,
        route=route,
        headers=headers,
        profile=profile,
        reasoning=reasoning,
    )
    answer = await send(out, {})
    if isinstance(answer, web.Response):
        return answer
    status, result = answer
    if (
        status == 400
        and route.config.recover.active
        and sanitized is not None
        and original
        and len(original) <= config.offload_body_bytes  # the retry's repair runs inline
    ):
        # issue 19: a 400 of a class a rule repairs is repaired and sent once more, decoded.
        headers.popall("Content-Encoding", None)
        retried = await _recover(
            request,
            state,
            route,
            result,
            original=original,
            sanitized=sanitized,
            reasoning=reasoning,
            max_body_bytes=config.max_body_bytes,
            send=send,
        )
        if retried is not None:
            sanitized, answer = retried
            if isinstance(answer, web.Response):
                return answer
            status, result = answer
    if 400 <= status < 500:
        request.app[METRICS_KEY].rejections.labels(str(status), classify(result.readable)).inc()
        if sanitized is not None and sanitized.changed and original is not None and api:
            _explain_rejection(state, original, sanitized.body, api, result)
    state.outcome = result.outcome
    if result.outcome == "upstream_failed":
        log.warning(
            "upstream_failed",
            request_id=state.request_id,
            error=result.error,
            bytes_relayed=result.bytes_relayed,
        )
    return result.response


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
    hooks = request.app[REASONING_KEY]
    started = time.perf_counter()
    try:
        upstream = await open_upstream(
            request.app[SESSION_KEY],
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
        log.warning("upstream_failed", request_id=state.request_id, error=type(exc).__name__)
        return error_response(
            504, "The upstream did not answer in time.", "upstream_timeout", "upstream_error"
        )
    except ClientError as exc:
        state.outcome = "upstream_unreachable"
        log.warning("upstream_failed", request_id=state.request_id, error=type(exc).__name__)
        return error_response(
            502, "The upstream could not be reached.", "upstream_unreachable", "upstream_error"
        )
    state.upstream_ms = _ms(started)
    meter = request.app[METRICS_KEY]
    meter.upstream_seconds.observe(state.upstream_ms / 1000)
    meter.streams.inc()
    observer = hooks.observer(route.planner, profile, reasoning, upstream, state.request_id)
    try:
        own = _chatmend_headers(state, reached=True)
        result = await relay(request, upstream, {**own, **extra_headers}, observer)
        await hooks.after_relay(observer)
    finally:
        meter.streams.dec()
    return upstream.status, result


async def _recover(
    request: web.Request,
    state: RequestState,
    route: Route,
    first: RelayResult,
    *,
    original: bytes,
    sanitized: Sanitized,
    reasoning: RequestReasoning | None,
    max_body_bytes: int,
    send: Callable[[bytes, Mapping[str, str]], Awaitable[Answer]],
) -> tuple[Sanitized, Answer] | None:
    """Send the retry a 400 calls for (``proxy.recover``): the body sent and the answer, or
    ``None`` (the first answer stands)."""
    if first.readable is None or sanitized.skipped:
        return None
    retry = plan_retry(
        first.readable,
        original,
        sanitized,
        route.planner,
        state.api,
        scope="" if reasoning is None else reasoning.scope,
        recalled=None if reasoning is None else reasoning.recalled,
    )
    if retry is None or not may_retry(
        request, first, retry, request_id=state.request_id, max_body_bytes=max_body_bytes
    ):
        return None
    # What X-Chatmend-Changes and request_done describe is the body the upstream accepted.
    state.changes = len(retry.sanitized.changes)
    state.rules = tuple(sorted({change.rule for change in retry.sanitized.changes}))
    answer = await send(retry.sanitized.body, {RECOVERED_HEADER: retry.header})
    status, result = (answer.status, None) if isinstance(answer, web.Response) else answer
    record(
        retry,
        status,
        result,
        request_id=state.request_id,
        route=route.name,
        meter=request.app[METRICS_KEY],
        suggestions=request.app[SUGGESTIONS_KEY],
    )
    return retry.sanitized, answer


def _explain_rejection(
    state: RequestState,
    original: bytes,
    sent: bytes,
    api: str,
    result: RelayResult,
) -> None:
    """A rewritten body was still rejected: log what was applied and, when the provider's text
    cites an index of the list chatmend sent, the client's index for it (also in the
    ``X-Chatmend-Client-Index`` header of a response not yet sent). The body stays as it is."""
    field = FIELDS[api]
    # The whole body: the index may be in the message or in a field beside it (``param``).
    text = result.readable.decode("utf-8", "replace") if result.readable else None
    mapped = explain(original, sent, field, text)
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


def _check_request(request: web.Request, config: Config) -> web.Response | None:
    """The limits checked before any body is read: a response if one is exceeded."""
    if sum(len(name) + len(value) for name, value in request.raw_headers) > MAX_HEADER_BYTES:
        return error_response(
            431,
            f"Request headers exceed chatmend's limit ({MAX_HEADER_BYTES} bytes).",
            "request_headers_too_large",
            "invalid_request_error",
        )
    if request.content_length is not None and request.content_length > config.max_body_bytes:
        return _too_large(config)
    return None


async def _read_body(request: web.Request, config: Config) -> bytes:
    """The whole body, within ``client_body_timeout`` (no timer if it is already all here)."""
    if request.content.is_eof():
        return await request.read()
    async with asyncio.timeout(config.client_body_timeout):
        return await request.read()


class _TooLarge(Exception):
    """A body that decodes to more than ``max_body_bytes``."""


async def _decoded(raw: bytes, encoding: str, limit: int) -> bytes | None:
    """A gzip or deflate body inflated, ``INFLATE_STEP`` bytes at a time (the event loop runs
    in between), never past ``limit`` decoded bytes (``_TooLarge``); ``None`` if the encoding
    is not one chatmend reads or the data is broken."""
    if encoding not in DECODABLE:
        return None
    # gzip and zlib by their header (32 + 15); a raw deflate stream (-15) as some clients send.
    for wbits in (32 + zlib.MAX_WBITS, -zlib.MAX_WBITS):
        parts: list[bytes] = []  # joined once at the end: a growing buffer would copy itself
        size = 0
        data = raw
        try:
            while data:
                inflater = zlib.decompressobj(wbits)
                while not inflater.eof:
                    chunk = inflater.decompress(data, INFLATE_STEP)
                    parts.append(chunk)
                    size += len(chunk)
                    if size > limit:
                        raise _TooLarge
                    data = inflater.unconsumed_tail
                    if not data and not chunk:
                        break  # cut off
                    await asyncio.sleep(0)
                if not inflater.eof:
                    break
                data = inflater.unused_data  # gzip members may follow each other
            else:
                return b"".join(parts)
        except zlib.error:
            continue
    return None


def _closing(response: web.Response) -> web.Response:
    """``response``, closing the connection after it: the body it refused may still be on its
    way (aiohttp reads and discards it for at most ``lingering_time``, 10 s, then closes;
    nothing is inflated, nothing kept), and no next request may follow on that connection."""
    response.force_close()
    return response


def _limited(request: web.Request, state: RequestState, limit: str, **fields: object) -> None:
    """Count and log a request that met one of chatmend's limits."""
    request.app[METRICS_KEY].limits.labels(limit).inc()
    log.warning("limit_exceeded", request_id=state.request_id, limit=limit, **fields)


def _unauthorized(route: Route) -> web.Response:
    response = error_response(
        401,
        f"This chatmend route ({route.name}) needs one of its client tokens as "
        "'Authorization: Bearer <token>'; the provider key is held by chatmend.",
        "invalid_api_key",
        "invalid_request_error",
    )
    response.headers["WWW-Authenticate"] = 'Bearer realm="chatmend"'
    return response


def _too_large(config: Config) -> web.Response:
    return error_response(
        413,
        f"Request body exceeds chatmend's max_body_bytes ({config.max_body_bytes} bytes).",
        "request_too_large",
        "invalid_request_error",
    )


def _body_timeout(config: Config) -> web.Response:
    response = error_response(
        408,
        f"The request body did not arrive within client_body_timeout "
        f"({config.client_body_timeout:g} s).",
        "request_timeout",
        "invalid_request_error",
    )
    response.force_close()  # the rest of the body may still be on its way
    return response


async def _sanitize(
    request: web.Request,
    state: RequestState,
    body: bytes,
    api: str,
    route: Route,
    *,
    reasoning: RequestReasoning | None = None,
    offload: bool = False,
) -> Sanitized:
    started = time.perf_counter()
    if offload:  # a big body: parsed and repaired in a worker process (proxy/offload.py)
        result: Sanitized = await request.app[OFFLOAD_KEY].sanitize(
            body,
            route.planner,
            api,
            scope="" if reasoning is None else reasoning.scope,
            recalled=None if reasoning is None else reasoning.recalled,
        )
    elif reasoning is None:
        result = sanitize_body(body, route.planner, api)
    else:
        result = sanitize_body(
            body,
            route.planner,
            api,
            parsed=reasoning.payload,
            scope=reasoning.scope,
            recalled=reasoning.recalled,
        )
    state.sanitize_ms = _ms(started)
    state.changes = len(result.changes)
    state.rules = tuple(sorted({change.rule for change in result.changes}))
    state.reported = len(result.reported)
    state.profile = result.profile or "none"
    meter = request.app[METRICS_KEY]
    for change in result.changes:
        meter.rewrites.labels(change.rule, change.action).inc()
    request.app[REASONING_KEY].report(state.request_id, result.changes)
    for change in result.reported:
        meter.reported.labels(change.rule, change.action).inc()
    for failure in result.failures:
        meter.rule_failures.labels(failure.rule).inc()
        if failure.error == "WorkBudgetExceeded":  # a hostile shape: the rule was skipped
            _limited(request, state, "work_budget", rule=failure.rule)
    for change in result.changes:
        if "over_cost_cap" in change.detail:
            _limited(request, state, "arguments_cost_cap", rule=change.rule)
    for violation in result.violations:
        meter.violations.labels(state.profile, violation.code).inc()
    for failure in result.failures:
        log.error(
            "rule_failed",
            request_id=state.request_id,
            rule=failure.rule,
            error=failure.error,
            where=failure.where,
        )
    if result.skipped:
        log.info("payload_not_sanitized", request_id=state.request_id, reason=result.skipped)
    if result.changed:
        _log_changes("payload_sanitized", request, state, result.profile, result.changes)
    if result.reported:
        # Report mode: what the rules would have changed; the body went as the rules left it
        # without them (the original bytes, in global report mode).
        _log_changes("payload_reported", request, state, result.profile, result.reported)
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
    return result


def _log_changes(
    event: str,
    request: web.Request,
    state: RequestState,
    profile: str | None,
    changes: tuple[Change, ...],
) -> None:
    log.info(
        event,
        request_id=state.request_id,
        path=request.path,
        profile=profile,
        count=len(changes),
        rules=dict(Counter(change.rule for change in changes)),
        changes=[change.as_dict() for change in changes],
    )


CHANGES_HEADER = "X-Chatmend-Changes"
#: On a 4xx to a rewritten body whose error text cites an index: ``messages[2]=messages[3];
#: rules=a,b`` (the index chatmend sent = the client's; ``inserted`` for a message it added).
CLIENT_INDEX_HEADER = "X-Chatmend-Client-Index"
OVERHEAD_HEADER = "X-Chatmend-Overhead-Ms"


def _chatmend_headers(state: RequestState, *, reached: bool = False) -> dict[str, str]:
    """The request id, what chatmend changed (``2; rules=a,b``, plus ``; reported=N`` in report
    mode) and its own time: until the upstream answered, minus the upstream's, or until its
    own answer (milliseconds). Only a request that reached the upstream is observed in the
    overhead histogram: an early 401 or 413 would drag it toward zero."""
    changes = str(state.changes)
    if state.rules:
        changes += "; rules=" + ",".join(state.rules)
    if state.reported:
        changes += f"; reported={state.reported}"
    overhead = max((time.perf_counter() - state.started) * 1000 - (state.upstream_ms or 0.0), 0.0)
    if reached:
        state.overhead_ms = overhead
    return {
        REQUEST_ID_HEADER: state.request_id,
        CHANGES_HEADER: changes,
        OVERHEAD_HEADER: f"{overhead:.3f}",
    }


def _count(meter: Metrics, state: RequestState, status: int) -> None:
    meter.requests.labels(state.route, state.api, str(status), state.profile).inc()
    if state.overhead_ms is not None:
        meter.overhead_seconds.observe(state.overhead_ms / 1000)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
