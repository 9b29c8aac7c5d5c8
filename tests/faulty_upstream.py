"""An upstream that fails on cue, at the socket level, and the leak check that follows a fault.

``FaultyUpstream`` is a bare asyncio server speaking just enough HTTP/1.1 to misbehave exactly:
reset the connection (RST) or close it (FIN) at any point, stall, cut a sized body or an SSE
stream short, or answer any status with any bytes. It records every request it parses and when
each connection was closed by the proxy, so a test can prove there was no retry and no
connection left open.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import ClientSession

#: What the server does with one parsed request: write to ``writer`` (or not) and return
#: ``True`` to keep the connection for another request, ``False`` to end it.
Behaviour = Callable[["Request", asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FaultyUpstream:
    #: Behaviours for the next requests, in order; ``default`` once the list is used up.
    script: list[Behaviour] = field(default_factory=list)
    default: Behaviour | None = None
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    #: ``time.monotonic()`` when the proxy closed a connection (EOF or reset seen here).
    peer_closed_at: list[float] = field(default_factory=list)
    open_connections: int = 0
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def start(self) -> FaultyUpstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def wait_peer_closed(self, count: int = 1, timeout: float = 2.0) -> float:
        """Wait until the proxy has closed ``count`` connections; the time of the last one."""
        deadline = time.monotonic() + timeout
        while len(self.peer_closed_at) < count:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the proxy closed {len(self.peer_closed_at)} of {count} upstream "
                    f"connections within {timeout}s"
                )
            await asyncio.sleep(0.01)
        return self.peer_closed_at[count - 1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        self.open_connections += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:  # the proxy closed the connection between requests
                    self.peer_closed_at.append(time.monotonic())
                    return
                self.requests.append(request)
                behaviour = self.script.pop(0) if self.script else self.default
                assert behaviour is not None, f"no behaviour left for {request.target}"
                if not await behaviour(request, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            self.peer_closed_at.append(time.monotonic())
        finally:
            self.open_connections -= 1
            self._handlers.discard(task)
            if not writer.is_closing():
                writer.close()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    assert "transfer-encoding" not in headers, "the proxy sends bodies with a Content-Length"
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, target, headers, body)


# ---------------------------------------------------------------------------------------------
# Behaviours
# ---------------------------------------------------------------------------------------------


def reset(writer: asyncio.StreamWriter) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), as a crashed upstream would."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def wait_for_peer_close(reader: asyncio.StreamReader) -> None:
    """Stall: send nothing more until the proxy gives up and closes the connection."""
    while await reader.read(65536):
        pass
    raise ConnectionResetError("closed by the proxy while stalled")


def head(status: int, headers: dict[str, str], reason: str = "Whatever") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def respond(
    status: int, body: bytes, headers: dict[str, str] | None = None, *, keep_alive: bool = False
) -> Behaviour:
    """A complete, well-formed response."""
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    all_headers["Content-Length"] = str(len(body))
    if not keep_alive:
        all_headers["Connection"] = "close"

    async def behave(_: Request, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(head(status, all_headers) + body)
        await writer.drain()
        return keep_alive

    return behave


def reset_before_headers() -> Behaviour:
    async def behave(_: Request, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        reset(writer)
        return False

    return behave


def close_before_headers() -> Behaviour:
    async def behave(_: Request, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.close()
        return False

    return behave


def stall_before_headers() -> Behaviour:
    async def behave(_: Request, reader: asyncio.StreamReader, __: asyncio.StreamWriter) -> bool:
        await wait_for_peer_close(reader)
        return False

    return behave


def reset_mid_body(announced: int, sent: int) -> Behaviour:
    """Announce ``announced`` bytes, send ``sent`` of them, then reset."""

    async def behave(_: Request, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        headers = {"Content-Type": "application/json", "Content-Length": str(announced)}
        writer.write(head(200, headers) + b"x" * sent)
        await writer.drain()
        await asyncio.sleep(0.05)  # let the proxy read what was sent before the reset
        reset(writer)
        return False

    return behave


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_event(n: int) -> bytes:
    return b'data: {"choices": [{"delta": {"content": "part%d "}}]}\n\n' % n


SSE_HEADERS = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}


def sse(events: int, then: str, *, delay: float = 0.0, tail: bytes = b"") -> Behaviour:
    """A chunked SSE stream of ``events`` events, then ``then``: ``end`` (terminating chunk,
    then the connection is closed),
    ``reset``, ``eof`` (FIN without the terminating chunk) or ``stall``. ``tail`` is sent as a
    last chunk before that (e.g. half an event)."""

    async def behave(
        _: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        writer.write(head(200, SSE_HEADERS))
        for n in range(events):
            writer.write(chunk(sse_event(n)))
            await writer.drain()
            if delay:
                await asyncio.sleep(delay)
        if tail:
            writer.write(chunk(tail))
        await writer.drain()
        if then == "end":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return False
        await asyncio.sleep(0.05)  # let the proxy relay what was sent
        if then == "reset":
            reset(writer)
        elif then == "eof":
            writer.close()
        else:
            await wait_for_peer_close(reader)
        return False

    return behave


def sse_body(events: int, tail: bytes = b"") -> bytes:
    """What a client receives from ``sse(events, ..., tail=tail)`` before the ending."""
    return b"".join(sse_event(n) for n in range(events)) + tail


# ---------------------------------------------------------------------------------------------
# Leak checks
# ---------------------------------------------------------------------------------------------


def pending_tasks(baseline: set[asyncio.Task[object]]) -> list[asyncio.Task[object]]:
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t not in baseline and t is not current]


async def assert_no_leaks(
    session: ClientSession, baseline: set[asyncio.Task[object]], timeout: float = 2.0
) -> None:
    """No upstream connection still acquired by a request, no task left over from it."""
    connector = session.connector
    assert connector is not None
    deadline = time.monotonic() + timeout
    while True:
        # aiohttp counts connections handed to requests in ``_acquired`` (no public API).
        acquired = len(connector._acquired)
        tasks = pending_tasks(baseline)
        if not acquired and not tasks:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"leaked: {acquired} upstream connections still acquired, "
                f"tasks {[t.get_coro() for t in tasks]}"
            )
        await asyncio.sleep(0.01)
