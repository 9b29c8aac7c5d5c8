"""Relay an upstream response to the client as it arrives (SSE included); clean up both sides."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from aiohttp import ClientError, ClientResponse, web
from multidict import CIMultiDict

from proxy.relay.errors import error_response
from proxy.relay.upstream import response_headers, untraced

EVENT_STREAM = "text/event-stream"


@dataclass(slots=True)
class RelayResult:
    response: web.StreamResponse
    #: ``completed``, ``client_disconnected`` or ``upstream_failed`` (``partial`` only inside
    #: ``relay``).
    outcome: str
    bytes_relayed: int
    error: str | None = None
    #: The body, when it was small enough to be read whole (for classifying rejections).
    body: bytes | None = None
    #: ``body`` inflated, for an error body the upstream gzipped or deflated (clients offer
    #: both, and ``Accept-Encoding`` goes through): what classifying and recovery read.
    decoded: bytes | None = None

    @property
    def readable(self) -> bytes | None:
        """The body as the classifier reads it: inflated if it came compressed."""
        return self.decoded if self.decoded is not None else self.body


#: A response that announces a Content-Length at most this big (and is not an event stream)
#: is read whole and sent in one write with its headers: a plain completion then costs one
#: socket write instead of three. Anything else is relayed chunk by chunk as it arrives.
BUFFER_MAX_BYTES = 256 * 1024


class Rewriter(Protocol):
    """Rewrites the relayed body (the reply rules, proxy/relay/rewrite.py): ``feed`` gives the
    bytes to write for each chunk of a stream, ``finish`` what it still holds at the end,
    ``whole`` a whole body rewritten (``None``: unchanged). The observer reads what it wrote."""

    def feed(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...

    def whole(self, body: bytes) -> bytes | None: ...

    def header(self) -> str: ...


#: The header a whole body the reply rules rewrote carries (proxy/relay/rewrite.py).
RESPONSE_CHANGES_HEADER = "X-Chatmend-Response-Changes"


def rewritable(request: web.Request, upstream: ClientResponse) -> bool:
    """Whether the reply rules may read this answer: a 200 to a POST, not compressed (the
    request offered only ``identity`` when they were armed), and an event stream without a
    Content-Length (a rewritten stream's length is not the upstream's)."""
    coding = upstream.headers.get("Content-Encoding", "").strip().lower()
    if upstream.status != 200 or request.method != "POST" or coding not in ("", "identity"):
        return False
    return upstream.content_type != EVENT_STREAM or upstream.content_length is None


class Observer(Protocol):
    """Watches the relayed body (proxy/stash/observer.py): ``feed`` gets each chunk after it
    was written, ``finish`` is called once the body ended cleanly. Neither may raise."""

    def feed(self, chunk: bytes) -> None: ...

    def finish(self) -> None: ...


async def relay(
    request: web.Request,
    upstream: ClientResponse,
    extra_headers: Mapping[str, str],
    observer: Observer | None = None,
    rewriter: Rewriter | None = None,
) -> RelayResult:
    """Copy status, headers and body; stream the body chunk by chunk unless small and sized.

    If the client goes away the upstream connection is closed at once (so a stream stops
    generating tokens). If the upstream fails mid-body, the client connection is closed
    without the final chunk, so the client sees a truncated response, not a complete one.
    """
    headers = response_headers(upstream.headers)
    headers.update(extra_headers)
    rewriter = rewriter if rewriter is not None and rewritable(request, upstream) else None
    whole = await _whole(request, upstream, headers, observer, rewriter)
    if isinstance(whole, RelayResult):
        return whole
    head = whole  # the start of an unsized body, read before deciding how to relay it
    if head or (rewriter is not None and upstream.content_type != EVENT_STREAM):
        rewriter = None  # past what a whole body may be: relayed as it comes
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    response.content_length = upstream.content_length
    relayed = 0
    finished = False
    try:
        await response.prepare(request)
        if head:
            await response.write(head)
            relayed += len(head)
            if observer is not None:
                observer.feed(head)
        if rewriter is not None:
            relayed += await _relay_rewritten(response, upstream, rewriter, observer)
        elif observer is None:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
                relayed += len(chunk)
        else:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
                relayed += len(chunk)
                observer.feed(chunk)
            observer.finish()
        finished = True
        return RelayResult(response, "completed", relayed)
    except ConnectionResetError:  # the client went away; aiohttp's reset error subclasses this
        return RelayResult(response, "client_disconnected", relayed)
    except (ClientError, TimeoutError) as exc:
        return await _broken(request, response, rewriter, relayed, exc)
    finally:  # also on cancellation, which is how aiohttp reports a client disconnect
        if finished:
            upstream.release()
        else:
            upstream.close()


async def _broken(
    request: web.Request,
    response: web.StreamResponse,
    rewriter: Rewriter | None,
    relayed: int,
    exc: ClientError | TimeoutError,
) -> RelayResult:
    """The upstream broke off mid-body: what the rules held goes first (the client's text), then
    the client's connection is closed without the terminating chunk (it must see the break)."""
    untraced(exc)  # no cycle holds the request's body (proxy/relay/upstream.py)
    if rewriter is not None:
        await _flush(response, rewriter)
    if request.transport is not None:
        request.transport.close()
    return RelayResult(response, "upstream_failed", relayed, type(exc).__name__)


async def _whole(
    request: web.Request,
    upstream: ClientResponse,
    headers: CIMultiDict[str],
    observer: Observer | None,
    rewriter: Rewriter | None,
) -> RelayResult | bytes:
    """A body relayed whole, when it is one to read whole (small and sized, an unsized error,
    or an unsized JSON answer the reply rules read): its result; else the start of it that
    was read before it turned out too big (``b""`` if none), for the stream path."""
    if not (
        _small_and_whole(request, upstream)
        or _unsized_error(request, upstream)
        or (rewriter is not None and _unsized_json(upstream))
    ):
        return b""
    result = await _relay_whole(request, upstream, headers, rewriter)
    if result.outcome == "partial":
        return result.body or b""
    if observer is not None and result.outcome == "completed" and result.body is not None:
        observer.feed(result.body)
        observer.finish()
    return result


async def _relay_rewritten(
    response: web.StreamResponse,
    upstream: ClientResponse,
    rewriter: Rewriter,
    observer: Observer | None,
) -> int:
    """A stream through the reply rules: each chunk's rewritten bytes written (and observed)
    as soon as the rules let them go, then what they held at the end. The upstream's bytes."""
    relayed = 0
    async for chunk in upstream.content.iter_any():
        relayed += len(chunk)
        out = rewriter.feed(chunk)
        if out:
            await response.write(out)
            if observer is not None:
                observer.feed(out)
    tail = rewriter.finish()
    if tail:
        await response.write(tail)
        if observer is not None:
            observer.feed(tail)
    if observer is not None:
        observer.finish()
    return relayed


async def _flush(response: web.StreamResponse, rewriter: Rewriter) -> None:
    """Best effort: what the rules held, written before a broken stream is cut."""
    try:
        tail = rewriter.finish()
        if tail:
            await response.write(tail)
    except (ConnectionResetError, ClientError, RuntimeError):
        pass


def _unsized_json(upstream: ClientResponse) -> bool:
    """An unsized answer that is not an event stream (a chunked JSON completion): read whole
    for the reply rules if it turns out small, else relayed as it comes."""
    return upstream.content_length is None and upstream.content_type != EVENT_STREAM


def _small_and_whole(request: web.Request, upstream: ClientResponse) -> bool:
    """A body announced small enough to buffer. Not for HEAD, 204 or 304, whose
    Content-Length describes a body that is not sent and must be relayed as it came."""
    size = upstream.content_length
    return (
        size is not None
        and size <= BUFFER_MAX_BYTES
        and upstream.content_type != EVENT_STREAM
        and request.method != "HEAD"
        and upstream.status not in (204, 304)
    )


def _unsized_error(request: web.Request, upstream: ClientResponse) -> bool:
    """A 4xx without a Content-Length (chunked, as some CDNs send every answer): read whole if
    it turns out small, so it can be classified (and recovered, proxy/recovery/retry.py)."""
    return (
        upstream.content_length is None
        and 400 <= upstream.status < 500
        and upstream.content_type != EVENT_STREAM
        and request.method != "HEAD"
    )


async def _read_capped(upstream: ClientResponse) -> tuple[bytes, bool]:
    """The body, and whether it ended within ``BUFFER_MAX_BYTES`` (else what was read)."""
    parts: list[bytes] = []
    size = 0
    while size <= BUFFER_MAX_BYTES:
        chunk = await upstream.content.readany()
        if not chunk:
            return b"".join(parts), True
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts), False


async def _relay_whole(
    request: web.Request,
    upstream: ClientResponse,
    headers: CIMultiDict[str],
    rewriter: Rewriter | None = None,
) -> RelayResult:
    """Read a small body, then send headers and body together. An unsized body that turns out
    bigger than ``BUFFER_MAX_BYTES`` is a ``partial`` result: its start, for the stream path."""
    try:
        if upstream.content_length is None:
            body, whole = await _read_capped(upstream)
            if not whole:
                return RelayResult(web.Response(), "partial", 0, body=body)
        else:
            body = await upstream.read()
    except (ClientError, TimeoutError) as exc:
        untraced(exc)  # no cycle holds the request's body (proxy/relay/upstream.py)
        upstream.close()
        response = error_response(
            502, "The upstream broke off its response.", "upstream_broken", "upstream_error"
        )
        return RelayResult(response, "upstream_failed", 0, type(exc).__name__)
    except BaseException:
        upstream.close()
        raise
    upstream.release()
    if rewriter is not None:
        rewritten = rewriter.whole(body)
        if rewritten is not None:
            body = rewritten
            headers[RESPONSE_CHANGES_HEADER] = rewriter.header()
    response = web.Response(
        status=upstream.status, reason=upstream.reason, headers=headers, body=body
    )
    decoded = None
    if upstream.status >= 400:
        decoded = inflate_error(body, upstream.headers.get("Content-Encoding", ""))
    return RelayResult(response, "completed", len(body), body=body, decoded=decoded)


#: An error body is inflated to at most this many bytes: more is not an error text.
ERROR_TEXT_MAX_BYTES = 1024 * 1024


def inflate_error(body: bytes, encoding: str) -> bytes | None:
    """A gzip or deflate error body inflated (at most ``ERROR_TEXT_MAX_BYTES``), else ``None``
    (not compressed, another encoding, or broken: the body is then read as it is)."""
    coding = encoding.strip().lower()
    if coding not in ("gzip", "x-gzip", "deflate"):
        return None
    for wbits in (32 + zlib.MAX_WBITS, -zlib.MAX_WBITS):  # gzip or zlib; raw deflate
        try:
            return zlib.decompressobj(wbits).decompress(body, ERROR_TEXT_MAX_BYTES)
        except zlib.error:
            continue
    return None
