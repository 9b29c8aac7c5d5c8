"""Relay an upstream response to the client as it arrives (SSE included); clean up both sides."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from aiohttp import ClientError, ClientResponse, web
from multidict import CIMultiDict

from proxy.relay.errors import error_response
from proxy.relay.upstream import response_headers

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
) -> RelayResult:
    """Copy status, headers and body; stream the body chunk by chunk unless small and sized.

    If the client goes away the upstream connection is closed at once (so a stream stops
    generating tokens). If the upstream fails mid-body, the client connection is closed
    without the final chunk, so the client sees a truncated response, not a complete one.
    """
    headers = response_headers(upstream.headers)
    headers.update(extra_headers)
    head = b""  # the start of an unsized error body, read before deciding how to relay it
    if _small_and_whole(request, upstream) or _unsized_error(request, upstream):
        result = await _relay_whole(request, upstream, headers)
        if result.outcome == "partial":
            head = result.body or b""
        else:
            if observer is not None and result.outcome == "completed" and result.body is not None:
                observer.feed(result.body)
                observer.finish()
            return result
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    if upstream.content_length is not None:
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
        if observer is None:
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
        if request.transport is not None:
            request.transport.close()  # no terminating chunk: the client must see the break
        return RelayResult(response, "upstream_failed", relayed, type(exc).__name__)
    finally:  # also on cancellation, which is how aiohttp reports a client disconnect
        if finished:
            upstream.release()
        else:
            upstream.close()


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
    request: web.Request, upstream: ClientResponse, headers: CIMultiDict[str]
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
        upstream.close()
        response = error_response(
            502, "The upstream broke off its response.", "upstream_broken", "upstream_error"
        )
        return RelayResult(response, "upstream_failed", 0, type(exc).__name__)
    except BaseException:
        upstream.close()
        raise
    upstream.release()
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
