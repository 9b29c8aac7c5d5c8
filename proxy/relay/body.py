"""Reading a request within chatmend's limits: header bytes, body bytes, time, decoded bytes."""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import chain

from aiohttp import HttpVersion11, web

from proxy.config import Config
from proxy.relay.errors import error_response, too_large

#: Request headers chatmend accepts: names and values of all header lines together, in bytes
#: (nginx allows 32 KiB, Envoy 60 KiB). More gets a 431 in the OpenAI shape.
MAX_HEADER_BYTES = 32 * 1024
#: Request encodings chatmend decodes to repair a body (others go upstream as they came).
DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})
#: Decoded bytes per step of inflating a body, and compressed bytes fed to it at a time.
INFLATE_STEP = 256 * 1024
INFLATE_INPUT = 64 * 1024
#: Threads that inflate request bodies, per server process: each step runs there (zlib lets go
#: of the GIL while it inflates), and the event loop only counts what the step gave.
INFLATE_THREADS = 2


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
    """The bytes one request holds; ``release`` once it is done (``proxy.server.trip.handle``)."""

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
    """A gzip or deflate body inflated off the event loop, ``INFLATE_STEP`` bytes at a time in
    the inflating threads (each step counted on the loop), never past ``limit`` decoded bytes
    (``TooLarge``) nor past what ``hold`` may take (``Overloaded``); ``None`` if the encoding is
    not one chatmend reads or the data is broken."""
    if encoding not in DECODABLE:
        return None
    loop = asyncio.get_running_loop()
    pool = _pool()

    def step(
        inflate: Callable[[bytes | memoryview, int], bytes], data: memoryview
    ) -> Awaitable[bytes]:
        return loop.run_in_executor(pool, inflate, data, INFLATE_STEP)

    # gzip and zlib by their header (32 + 15); a raw deflate stream (-15) as some clients send.
    for wbits in (32 + zlib.MAX_WBITS, -zlib.MAX_WBITS):
        try:
            parts = await _inflated(memoryview(raw), wbits, limit, hold, step)
        except zlib.error:
            continue
        if parts is not None:  # joined once, off the loop: a growing buffer would copy itself
            return await loop.run_in_executor(pool, b"".join, parts)
    return None


async def _inflated(
    raw: memoryview,
    wbits: int,
    limit: int,
    hold: Hold | None,
    step: Callable[[Callable[[bytes | memoryview, int], bytes], memoryview], Awaitable[bytes]],
) -> list[bytes] | None:
    """The pieces ``raw`` inflates to (``None``: cut off), fed ``INFLATE_INPUT`` bytes at a time
    (a zlib tail is a copy of what is left of its input: never the whole body per step)."""
    parts: list[bytes] = []
    size = at = 0
    while at < len(raw):  # gzip members may follow each other
        inflater = zlib.decompressobj(wbits)
        pending: bytes | memoryview = b""
        fed = at
        while not inflater.eof:
            if not pending:
                if fed >= len(raw):
                    return None  # cut off
                pending, fed = raw[fed : fed + INFLATE_INPUT], fed + INFLATE_INPUT
            chunk = await step(inflater.decompress, memoryview(pending))
            pending = inflater.unconsumed_tail
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLarge
            if hold is not None and not hold.take(len(chunk)):
                raise Overloaded
        at = min(fed, len(raw)) - len(inflater.unused_data)  # where the next member starts
    return parts


_POOL: list[ThreadPoolExecutor] = []


def _pool() -> ThreadPoolExecutor:
    """The process's inflating threads (started on first use; a forked server process starts
    its own)."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(INFLATE_THREADS, thread_name_prefix="chatmend-inflate"))
    return _POOL[0]


os.register_at_fork(after_in_child=_POOL.clear)
