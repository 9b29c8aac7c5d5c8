"""Relay an upstream response to the client as it arrives (SSE included); clean up both sides."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import ClientError, ClientResponse, web

from proxy.upstream import response_headers


@dataclass(slots=True)
class RelayResult:
    response: web.StreamResponse
    #: ``completed``, ``client_disconnected`` or ``upstream_failed``.
    outcome: str
    bytes_relayed: int
    error: str | None = None


async def relay(request: web.Request, upstream: ClientResponse) -> RelayResult:
    """Copy status, headers and body chunk by chunk; never buffer the body.

    If the client goes away the upstream connection is closed at once (so a stream stops
    generating tokens). If the upstream fails mid-body, the client connection is closed
    without the final chunk, so the client sees a truncated response, not a complete one.
    """
    response = web.StreamResponse(
        status=upstream.status, reason=upstream.reason, headers=response_headers(upstream.headers)
    )
    if upstream.content_length is not None:
        response.content_length = upstream.content_length
    relayed = 0
    finished = False
    try:
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
            relayed += len(chunk)
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
