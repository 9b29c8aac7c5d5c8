"""One request's trip as one object (mitmproxy's flow), and the named events it goes through.

The trip (proxy/server/trip.py) creates a ``Flow`` when a request arrives, fills it as it goes
(the route, the API, what the rules did, the upstream's answer) and announces each step on the
app's ``Events``: ``request_read``, ``limited``, ``repaired``, ``response_started``,
``response_ended``, ``upstream_failed``, ``answered``, ``done``. What is said about a request
(the accounting: metrics and log lines), what the page keeps (the capture), the span (tracing)
and the reasoning stash's counts are subscribers: each reads the flow at the events it names
and none is called by hand.

A subscriber subclasses ``Subscriber`` and overrides the events it cares about; ``Events``
keeps, per event, only the overridden methods, so an event no subscriber cares about costs one
loop over an empty tuple. A subscriber that raises is logged (``subscriber_failed``) and
skipped, like a rule: the request goes on.

The request's id is bound once, when the flow starts (``structlog.contextvars``): every log line
of the request carries it without being told. A route that logs content (``log_content``) says
so once too (``allow_content``); the log's rendering processor (``proxy.observe.log.Render``,
through ``capped``) drops message-derived text from every other line (proxy/observe/log.py).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import Token
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import structlog
from aiohttp import web

from proxy.observe.log import CONTENT_ALLOWED, get_logger
from rules.engine.base import Change
from rules.providers.sanitize import Sanitized

log = get_logger()

#: The header a relaying worker names its client's address in (proxy/relay/owners.py): read
#: only on a request that came over a worker's unix socket (``relayed``), where no client can
#: reach, and dropped before that request goes upstream (proxy/server/trip.py). A client's own
#: header of that name on a request it sent here directly passes as any other header.
RELAYED_FOR: Final = "X-Chatmend-Relayed-For"


def relayed(request: web.Request) -> bool:
    """Whether ``request`` came from another worker (over this worker's unix socket)."""
    transport = request.transport
    return transport is not None and isinstance(transport.get_extra_info("sockname"), str)


REQUEST_ID_HEADER = "X-Request-ID"
#: chatmend's own id for the request, always generated (128 random bits): unique, unguessable,
#: the key of its log lines and of its entry on the page (``/chatmend/``).
CHATMEND_ID_HEADER = "X-Chatmend-Request-Id"
CHANGES_HEADER = "X-Chatmend-Changes"
OVERHEAD_HEADER = "X-Chatmend-Overhead-Ms"
_VALID_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
#: Changes a flow lists (the page shows them; the rest are counted), each clipped by the capture
#: (``proxy.observe.capture.clipped``): a change's detail carries the clients' strings (ids,
#: names), so a 100 KB tool-call id would otherwise be kept whole, with every change that names
#: it.
MAX_LISTED_CHANGES = 50


class Releasable(Protocol):
    """What a request holds until it is done (its share of the in-flight body budget)."""

    def release(self) -> None: ...


@dataclass(slots=True)
class Flow:
    """What one request is and what became of it, filled in by the trip as it goes."""

    request: web.Request
    #: chatmend's own id for the request (``X-Chatmend-Request-Id``, ``request_id`` in the log).
    id: str
    #: The client's own ``X-Request-ID`` (up to 128 visible ASCII characters, else ``None``):
    #: echoed back and logged as ``client_request_id``, never used as a key (two clients may
    #: send the same one).
    client_request_id: str | None = None
    started: float = field(default_factory=time.perf_counter)
    #: The config route, the API repaired (``chat``, ``responses``, ``messages``, else
    #: ``other``), the profile the body ran under.
    route: str = "default"
    api: str = "other"
    profile: str = "none"
    #: How it ended (``completed``, ``rejected``, ``client_disconnected``, ...) and the status
    #: of its answer (499 until it has one: the client left).
    outcome: str | None = None
    status: int = 499
    #: Why a body of an API chatmend repairs is not read for its rules (``encoding``: one it
    #: does not decode, or broken), else ``None``.
    unread: str | None = None
    #: How the prefix cache read the body (proxy/relay/prefix.py): ``hit``, ``miss``, ``skip``;
    #: ``None`` if it did not.
    prefix: str | None = None
    #: The worker the request was relayed to, keeping its session (proxy/relay/owners.py): that
    #: worker answers, logs and counts it; ``None``: served here.
    handed_to: int | None = None
    #: For a request another worker relayed here, the client that worker names (``RELAYED_FOR``,
    #: read as it arrived: the socket is gone once it closes); else ``None``.
    relayed_for: str | None = None
    #: Milliseconds: the upstream's time to its headers, the rules', and chatmend's own time up
    #: to the upstream's headers (``None`` if the upstream was never reached).
    upstream_ms: float | None = None
    sanitize_ms: float | None = None
    overhead_ms: float | None = None
    #: What the rules made of the body (``None``: they did not run), then, once it is sent,
    #: what went upstream (the retry's, when recovery sent one).
    sanitized: Sanitized | None = None
    #: The changes of the body sent (counted, listed for the page up to ``MAX_LISTED_CHANGES``,
    #: their rules), and the count of changes report mode only logged.
    changes: int = 0
    listed: tuple[Change, ...] = ()
    rules: tuple[str, ...] = ()
    reported: int = 0
    #: Whether recovery sent the body that was answered; if it did, the refusal it recovered
    #: from (the first answer's body, as read, and the class recovery read it as).
    recovered: bool = False
    recovered_from: bytes | None = None
    recovered_class: str | None = None
    #: What the reply rules changed in the answer the client got (proxy/relay/rewrite.py; the
    #: first ``MAX_LISTED_CHANGES``), and what those in report mode would have changed.
    replied: tuple[Change, ...] = ()
    reply_reported: tuple[Change, ...] = ()
    #: The longest a stream's events were held by the reply rules (milliseconds).
    reply_held_ms: float | None = None
    #: Once the upstream answered: the body as the client sent it (decoded; a reference, not a
    #: copy), chatmend's answer, and the upstream's refusal as the classifier reads it (a 4xx
    #: body read whole, inflated).
    original: bytes | None = None
    response: web.StreamResponse | None = None
    refusal: bytes | None = None
    #: What the request holds until it is done.
    hold: Releasable | None = None
    #: The log context bound for the request (reset when it is done).
    bound: Mapping[str, Token[Any]] = field(default_factory=dict)

    @classmethod
    def start(cls, request: web.Request) -> Flow:
        """A new flow with a new id, the client's ``X-Request-ID`` if it is printable, and the
        id bound to every log line of the request."""
        given = request.headers.get(REQUEST_ID_HEADER)
        client = given if given is not None and _VALID_REQUEST_ID.fullmatch(given) else None
        flow = cls(request, os.urandom(16).hex(), client)
        if RELAYED_FOR in request.headers and relayed(request):
            flow.relayed_for = request.headers[RELAYED_FOR]
        flow.bound = structlog.contextvars.bind_contextvars(request_id=flow.id)
        return flow

    @property
    def client(self) -> str:
        """The address of the client that sent the request: the peer's, or for a request
        another worker relayed, the one that worker named (its own client's)."""
        if self.relayed_for is not None:
            return self.relayed_for
        return self.request.remote or ""

    def allow_content(self) -> None:
        """The request's route logs content (``log_content: true``): its lines keep the
        message-derived text the rules describe (proxy/observe/log.py)."""
        self.bound = {
            **self.bound,
            **structlog.contextvars.bind_contextvars(**{CONTENT_ALLOWED: True}),
        }

    def end(self) -> None:
        """Unbind the request's log context."""
        structlog.contextvars.reset_contextvars(**self.bound)

    def record(self, result: Sanitized) -> None:
        """What the rules made of the body: the profile it ran under, the changes it carries,
        and the count of those report mode only logged."""
        self.sanitized = result
        self.profile = result.profile or "none"
        if result.changes or result.omitted:  # the clean path lists nothing
            self.took(result.changes, result.omitted)
        self.reported = len(result.reported)

    def took(
        self, changes: tuple[Change, ...], omitted: tuple[tuple[str, str, int], ...] = ()
    ) -> None:
        """The changes the body sent upstream carries (what the headers and the log describe),
        and those a worker counted without listing them (``Sanitized.omitted``)."""
        self.changes = len(changes) + sum(count for _, _, count in omitted)
        self.listed = changes[:MAX_LISTED_CHANGES]
        self.rules = tuple(sorted({change.rule for change in changes} | {r for r, _, _ in omitted}))

    def reply(
        self, changes: list[Change], reported: list[Change], held_ms: float | None = None
    ) -> None:
        """What the reply rules did to the answer, would have done in report mode, and the
        longest they held a stream's events."""
        self.reply_held_ms = held_ms
        self.replied = tuple(changes[:MAX_LISTED_CHANGES])
        self.reply_reported = tuple(reported[:MAX_LISTED_CHANGES])

    def headers(self, *, reached: bool = False) -> dict[str, str]:
        """chatmend's headers on its answer: the request ids (chatmend's; the client's echoed,
        else chatmend's again), what chatmend changed (``2; rules=a,b``, plus ``; reported=N``
        in report mode) and its own time: until the upstream answered, minus the upstream's,
        or until its own answer (milliseconds). Only a request that reached the upstream is
        observed in the overhead histogram: an early 401 or 413 would drag it toward zero."""
        changes = str(self.changes)
        if self.rules:
            changes += "; rules=" + ",".join(self.rules)
        if self.reported:
            changes += f"; reported={self.reported}"
        overhead = max((time.perf_counter() - self.started) * 1000 - (self.upstream_ms or 0.0), 0.0)
        if reached:
            self.overhead_ms = overhead
        return {
            CHATMEND_ID_HEADER: self.id,
            REQUEST_ID_HEADER: self.client_request_id or self.id,
            CHANGES_HEADER: changes,
            OVERHEAD_HEADER: f"{overhead:.3f}",
        }

    def answer(self, response: web.StreamResponse) -> web.StreamResponse:
        """``response`` with chatmend's headers, unless it is already on its way (a relayed
        response was prepared with them)."""
        if not response.prepared:
            response.headers.update(self.headers())
        return response


def ms(since: float) -> float:
    """Milliseconds since ``since`` (``time.perf_counter``), to the microsecond."""
    return round((time.perf_counter() - since) * 1000, 3)


class Subscriber:
    """Something that reads flows at their named events: override the events it cares about
    (the others cost nothing, ``Events`` never calls them). None may change where a request
    goes or what it sends; one may add a header to an answer not yet sent."""

    def request_read(self, flow: Flow) -> None:
        """The body is read (and decoded where chatmend repairs it), or was not sent."""

    def limited(self, flow: Flow, limit: str, fields: Mapping[str, object]) -> None:
        """The request met one of chatmend's limits (``limit``, with what it measured)."""

    def repaired(self, flow: Flow) -> None:
        """The rules ran over the body (``flow.sanitized``, ``flow.sanitize_ms``)."""

    def response_started(self, flow: Flow) -> None:
        """The upstream answered with its headers (``flow.upstream_ms``); its body follows."""

    def response_ended(self, flow: Flow) -> None:
        """The upstream's answer is relayed, or broke off, or the client left."""

    def upstream_failed(self, flow: Flow, error: str | None, fields: Mapping[str, object]) -> None:
        """The upstream could not be reached, or broke off mid-answer (``error``: its type)."""

    def answered(self, flow: Flow) -> None:
        """The upstream's answer (a retry's, when recovery sent one) is the request's:
        ``flow.response``, ``flow.refusal``, ``flow.sanitized`` (what was sent)."""

    def done(self, flow: Flow) -> None:
        """The request is over (``flow.status``, ``flow.outcome``), however it ended."""


#: Every event, in the order a request meets them.
EVENTS: tuple[str, ...] = (
    "request_read",
    "limited",
    "repaired",
    "response_started",
    "response_ended",
    "upstream_failed",
    "answered",
    "done",
)


class Events:
    """The app's subscribers, per event: only those that override it, in the order given."""

    def __init__(self, subscribers: Sequence[Subscriber]) -> None:
        self.subscribers = tuple(subscribers)
        calls: dict[str, tuple[Callable[..., None], ...]] = {
            name: tuple(
                getattr(subscriber, name)
                for subscriber in self.subscribers
                if getattr(type(subscriber), name) is not getattr(Subscriber, name)
            )
            for name in EVENTS
        }
        self._request_read = calls["request_read"]
        self._limited = calls["limited"]
        self._repaired = calls["repaired"]
        self._response_started = calls["response_started"]
        self._response_ended = calls["response_ended"]
        self._upstream_failed = calls["upstream_failed"]
        self._answered = calls["answered"]
        self._done = calls["done"]

    def request_read(self, flow: Flow) -> None:
        _each(self._request_read, "request_read", flow)

    def limited(self, flow: Flow, limit: str, **fields: object) -> None:
        _each(self._limited, "limited", flow, limit, fields)

    def repaired(self, flow: Flow) -> None:
        _each(self._repaired, "repaired", flow)

    def response_started(self, flow: Flow) -> None:
        _each(self._response_started, "response_started", flow)

    def response_ended(self, flow: Flow) -> None:
        _each(self._response_ended, "response_ended", flow)

    def upstream_failed(self, flow: Flow, error: str | None, **fields: object) -> None:
        _each(self._upstream_failed, "upstream_failed", flow, error, fields)

    def answered(self, flow: Flow) -> None:
        _each(self._answered, "answered", flow)

    def done(self, flow: Flow) -> None:
        _each(self._done, "done", flow)


def _each(calls: tuple[Callable[..., None], ...], event: str, *args: Any) -> None:
    """Call each subscriber; one that raises is logged and skipped (mitmproxy's ``safecall``)."""
    for call in calls:
        try:
            call(*args)
        except Exception as exc:
            subscriber = type(getattr(call, "__self__", call)).__name__
            log.error(
                "subscriber_failed", subscriber=subscriber, on=event, error=type(exc).__name__
            )
