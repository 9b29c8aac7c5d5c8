"""The one upstream ClientSession, the header policy, and opening an upstream request."""

from __future__ import annotations

import os

from aiohttp import ClientResponse, ClientSession, ClientTimeout, DummyCookieJar, TCPConnector
from multidict import CIMultiDict, CIMultiDictProxy, MultiMapping
from yarl import URL

from proxy.config import UpstreamConfig

# Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, never the next one.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Request headers aiohttp recomputes for the upstream request. A compressed request body
# arrives still compressed (the server's auto_decompress is off) and keeps its
# Content-Encoding unless the proxy rewrites it. Expect is answered by chatmend itself:
# forwarded, aiohttp would wait for the upstream's 100 before sending the body.
REQUEST_RECOMPUTED = frozenset({"host", "content-length", "expect"})
# Response headers chatmend owns on its side of the connection.
RESPONSE_RECOMPUTED = frozenset({"content-length"})
# Headers aiohttp would add on its own: a transparent proxy sends only what the client sent.
# Accept-Encoding matters most: with auto_decompress off, an added "gzip" would hand the
# client a compressed body it never asked for.
NO_AUTO_HEADERS = ("Accept-Encoding", "User-Agent", "Accept", "Content-Type")


def create_session(config: UpstreamConfig) -> ClientSession:
    """One pooled session for the app's lifetime, shared by every client: bodies are relayed
    still compressed, and no cookie is kept."""
    timeout = ClientTimeout(
        total=None,  # a stream may last many minutes
        connect=config.connect_timeout,
        sock_read=config.read_timeout,  # idle time between two reads
    )
    return ClientSession(
        connector=TCPConnector(limit=0, ttl_dns_cache=300),
        timeout=timeout,
        auto_decompress=False,
        skip_auto_headers=NO_AUTO_HEADERS,
        # No jar (``None`` would be aiohttp's default one): a cookie the upstream sets is its
        # client's (``Set-Cookie`` goes back to it as it came), never sent on another's request.
        cookie_jar=DummyCookieJar(),
    )


_REQUEST_DROPPED = REQUEST_RECOMPUTED | HOP_BY_HOP
_RESPONSE_DROPPED = RESPONSE_RECOMPUTED | HOP_BY_HOP


def _dropped(headers: CIMultiDictProxy[str], always: frozenset[str]) -> frozenset[str]:
    """Lower-case names to drop: the fixed set plus any named in ``Connection``."""
    named = headers.getall("Connection", ())
    if not named:
        return always  # the common case: no per-request set to build
    extra = {token.strip().lower() for value in named for token in value.split(",")}
    return always | extra


def request_headers(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """Client request headers to send upstream."""
    drop = _dropped(headers, _REQUEST_DROPPED)
    return CIMultiDict([(k, v) for k, v in headers.items() if k.lower() not in drop])


def response_headers(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """Upstream response headers to send to the client."""
    drop = _dropped(headers, _RESPONSE_DROPPED)
    return CIMultiDict([(k, v) for k, v in headers.items() if k.lower() not in drop])


def anthropic_betas(headers: MultiMapping[str]) -> frozenset[str]:
    """The values of a request's ``anthropic-beta`` headers (each a comma-separated list),
    trimmed and lower-cased; empty without the header."""
    values = headers.getall("anthropic-beta", ())
    return frozenset(beta.strip().lower() for value in values for beta in value.split(",")) - {""}


def upstream_url(base: str, path_qs: str) -> URL:
    """Join the configured base with the request's *relative* path and query.

    ``path_qs`` comes from ``request.rel_url``, never from the request line or Host header,
    so whatever the client sends, the scheme and host are the configured upstream's. aiohttp
    only routes paths that start with ``/``; the check below keeps that true even if it did
    not, since text glued right after the host (``.evil.example``, ``:8080``, ``@evil``)
    would change the authority.
    """
    if not path_qs.startswith("/"):
        path_qs = "/" + path_qs
    return URL(base + path_qs, encoded=True)


async def open_upstream(
    session: ClientSession,
    method: str,
    url: URL,
    headers: CIMultiDict[str],
    body: bytes | None,
    *,
    timeout: ClientTimeout | None = None,
) -> ClientResponse:
    """Send the request (under the route's ``timeout``, else the session's); the response body
    is left unread for the relay."""
    if timeout is None:
        return await session.request(method, url, headers=headers, data=body, allow_redirects=False)
    return await session.request(
        method, url, headers=headers, data=body, allow_redirects=False, timeout=timeout
    )


def unreachable(exc: BaseException, upstream: str) -> dict[str, str]:
    """Why an upstream could not be reached, for the log: its host and port and the cause (the
    operating system's words, e.g. ``Connection refused``, or the DNS error), never the URL's
    path, query or user info (a key may sit in them)."""
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
    return {"host": host, "cause": cause[:200]}


def untraced(exc: BaseException) -> None:
    """Drop the tracebacks of an upstream error and of the errors it came from, once handled.

    aiohttp keeps the exception of a failed connection (its connector's last error) or of a
    broken body (its reader's) where that exception's traceback reaches back, through the
    frames of the request that met it and so its body: a cycle that only the collector frees,
    dozens of dead requests' bodies later during an outage. chatmend logs an error's type and
    cause, never its frames (tests/proxy/test_failure_garbage.py)."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__cause__ or error.__context__
