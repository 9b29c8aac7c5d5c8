"""Reading a request within chatmend's limits: header bytes, body bytes, time, decoded bytes."""

from __future__ import annotations

import asyncio
import zlib
from itertools import chain

from aiohttp import HttpVersion11, web

from proxy.config import Config
from proxy.errors import error_response, too_large

#: Request headers chatmend accepts: names and values of all header lines together, in bytes
#: (nginx allows 32 KiB, Envoy 60 KiB). More gets a 431 in the OpenAI shape.
MAX_HEADER_BYTES = 32 * 1024
#: Request encodings chatmend decodes to repair a body (others go upstream as they came).
DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})
#: Decoded bytes per step of inflating a body; the event loop runs between two steps.
INFLATE_STEP = 256 * 1024


class TooLarge(Exception):
    """A body that decodes to more than ``max_body_bytes``."""


class Overloaded(Exception):
    """The requests in flight hold ``inflight_body_bytes`` of bodies already: a big body waits."""


class InflightBudget:
    """What the requests in flight hold of their bodies (as read, and decoded), together: an
    overload manager in the manner of Envoy's, for memory. One per server process."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = 0

    def hold(self, limit: int, large: int) -> Hold:
        """A request's share: ``limit`` for them all, ``large`` the size of a body it may
        refuse (smaller bodies are counted, never refused)."""
        return Hold(self, limit, large)


class Hold:
    """The bytes one request holds; ``release`` once it is done (``proxy.handler.handle``)."""

    __slots__ = ("budget", "large", "limit", "size")

    def __init__(self, budget: InflightBudget, limit: int, large: int) -> None:
        self.budget = budget
        self.limit = limit
        self.large = large
        self.size = 0

    def take(self, size: int) -> bool:
        """Count ``size`` more bytes; ``False`` if the request's body is large and all together
        now hold more than the limit (the caller refuses it; ``release`` gives the bytes back)."""
        self.size += size
        self.budget.held += size
        return self.size <= self.large or self.budget.held <= self.limit

    def release(self) -> None:
        self.budget.held -= self.size
        self.size = 0


def refused_early(request: web.Request, config: Config) -> web.Response | None:
    """The limits checked before any body is read: a response if one is exceeded."""
    if sum(map(len, chain.from_iterable(request.raw_headers))) > MAX_HEADER_BYTES:
        return error_response(
            431,
            f"Request headers exceed chatmend's limit ({MAX_HEADER_BYTES} bytes).",
            "request_headers_too_large",
            "invalid_request_error",
        )
    announced = request.content_length
    if announced is not None and announced > config.max_body_bytes:
        return too_large(config.max_body_bytes)
    return None


async def read(request: web.Request, config: Config) -> bytes:
    """The whole body, within ``client_body_timeout`` (no timer if it is already all here).
    A client waiting on ``Expect: 100-continue`` is told to send it first (the request passed
    its checks: a refused one never gets a 100, so its body is never sent)."""
    if request.version == HttpVersion11 and "Expect" in request.headers:
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own expect handler does
    if request.content.is_eof():
        return await request.read()
    async with asyncio.timeout(config.client_body_timeout):
        return await request.read()


async def decoded(raw: bytes, encoding: str, limit: int, hold: Hold | None = None) -> bytes | None:
    """A gzip or deflate body inflated, ``INFLATE_STEP`` bytes at a time (the event loop runs
    in between), never past ``limit`` decoded bytes (``TooLarge``) nor past what ``hold`` may
    take (``Overloaded``); ``None`` if the encoding is not one chatmend reads or the data is
    broken."""
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
                        raise TooLarge
                    if hold is not None and not hold.take(len(chunk)):
                        raise Overloaded
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
