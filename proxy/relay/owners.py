"""Sessions kept by one worker: under ``chatmend serve --workers N``, each session's requests
are served by the worker whose prefix cache holds it (docs/performance.md#workers).

The kernel hands each new connection to any worker. An agent that keeps its connection stays
on one, but one that reconnects for every request (or a pool of connections shared by many
sessions) lands on any of them, and a worker that never saw the session parses and walks its
whole history (a prefix cache miss, proxy/relay/prefix.py). So each session has an owner: its
session key (the prefix cache's space, that is the route, the API and the client's credential
scope, then the start of its history) hashed to a worker index. A worker that reads a request
another worker owns relays it to that worker over the owner's own unix socket (``Workers.path``)
and streams the answer back byte for byte: one loopback hop, for the requests another worker
would read from its cache. The owner serves it as any request (its rules, its log line, its
metrics); the worker that relayed it counts the hand-over only.

The history's start is what the session's first request already holds, so every later request
of the session (that one plus turns) hashes the same: the list's first item, and the one after
it when the first is a ``system`` or ``developer`` message (the prompt many sessions share), at
most ``WINDOW`` bytes. It never decides what a request becomes, only where it is served: a key
that changes (a client that rewrites its first message) costs a miss, as without routing. An
owner that cannot be reached (restarting, draining) is not waited for: the request is served
where it landed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aiohttp import ClientError, ClientSession, ClientTimeout, DummyCookieJar, UnixConnector, web

from proxy.observe.flow import RELAYED_FOR
from proxy.relay.upstream import HOP_BY_HOP, untraced

#: The longest path a unix socket takes (``sun_path``, less its terminating NUL, on Linux).
UNIX_PATH_MAX: Final = 107
#: Bytes of the history read for a session key (a longer first message: its first bytes).
WINDOW: Final = 64 * 1024
#: Roles of a leading message many sessions share (the agent's prompt): the key reads on.
_SHARED_ROLES: Final = frozenset({"system", "developer"})
_DECODER: Final = json.JSONDecoder()
_SPACE: Final = frozenset(b" \t\r\n")
#: Request headers not relayed: hop-by-hop, what the next hop recomputes, and ``Expect`` (the
#: body is read already).
_NOT_RELAYED: Final = HOP_BY_HOP | {"content-length", "expect", RELAYED_FOR.lower()}
_NOT_RETURNED: Final = HOP_BY_HOP | {"content-length"}
#: Headers the relay's client would add on its own: the owner sees what the client sent.
_NO_AUTO: Final = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


def history_start(body: bytes, field: str) -> str | None:
    """The start of the history in ``body``'s list ``field`` (its first item, and the second
    when the first is a shared prompt, at most ``WINDOW`` bytes), or ``None`` (no list, an empty
    one, not JSON). Read without parsing the body: a search for the key, then the first items."""
    key = f'"{field}"'.encode()
    at = body.find(key)
    if at < 0:
        return None
    at = _skip_space(body, at + len(key))
    if body[at : at + 1] != b":":
        return None
    at = _skip_space(body, at + 1)
    if body[at : at + 1] != b"[":
        return None
    window = body[at + 1 : at + 1 + WINDOW]
    full = len(window) == WINDOW  # the history may go on past it
    text = window.decode("utf-8", "ignore")  # a character cut at the window's end: left out
    first = _item(text, 0)
    if first is None:  # cut by the window (all of it is the first item), or no item
        return text if full else None
    value, end = first
    if not (isinstance(value, dict) and value.get("role") in _SHARED_ROLES):
        return text[:end]
    comma = _skip_space_text(text, end)
    if text[comma : comma + 1] != ",":
        return text[:end]
    second = _item(text, comma + 1)
    if second is None:
        return text if full else text[:end]
    return text[: second[1]]


def _skip_space(body: bytes, at: int) -> int:
    while at < len(body) and body[at] in _SPACE:
        at += 1
    return at


def _skip_space_text(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _item(text: str, at: int) -> tuple[object, int] | None:
    try:
        return _DECODER.raw_decode(text, _skip_space_text(text, at))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Workers:
    """This worker among its peers: ``index`` of ``count``, each listening on its unix socket
    in ``directory`` (created by the supervisor, removed when it exits)."""

    directory: Path
    count: int
    index: int

    def path(self, index: int) -> str:
        return str(self.directory / f"worker-{index}.sock")

    def listening(self) -> str | None:
        """This worker's socket, or ``None`` when its path is too long for a unix socket (a
        long ``TMPDIR``): its peers then serve its sessions themselves."""
        path = self.path(self.index)
        return path if len(os.fsencode(path)) <= UNIX_PATH_MAX else None

    def owner(self, space: Hashable, body: bytes, field: str) -> int | None:
        """The worker that keeps the session of ``body`` in ``space``, or ``None`` (no history
        to key it by: served where it landed)."""
        start = history_start(body, field)
        if start is None:
            return None
        key = repr(space).encode("utf-8", "replace") + b"\0" + start.encode("utf-8", "replace")
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest()) % self.count


class Relay:
    """The relaying worker's clients: one connection pool per peer's unix socket."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self._sessions: dict[int, ClientSession] = {}

    def _session(self, index: int) -> ClientSession:
        session = self._sessions.get(index)
        if session is None or session.closed:
            session = ClientSession(
                connector=UnixConnector(path=self.workers.path(index), limit=0),
                timeout=ClientTimeout(total=None, connect=2.0),
                auto_decompress=False,
                cookie_jar=DummyCookieJar(),  # a relayed answer's cookies are its client's
            )
            self._sessions[index] = session
        return session

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()

    async def forward(
        self, request: web.Request, raw: bytes, index: int, answered: Callable[[], object]
    ) -> web.StreamResponse | None:
        """``request`` (its body ``raw``, as it came) served by worker ``index``, its answer
        streamed back as it came; ``None`` if that worker could not be reached (nothing was
        sent to the client: serve it here). ``answered`` is called once the worker answered,
        before the client gets anything (what it counts is there when the client reads it)."""
        headers = [
            (name, value)
            for name, value in request.headers.items()
            if name.lower() not in _NOT_RELAYED
        ]
        headers.append((RELAYED_FOR, request.remote or ""))  # never relayed twice
        try:
            answer = await self._session(index).request(
                request.method,
                "http://localhost" + request.rel_url.raw_path_qs,
                data=raw,
                headers=headers,
                skip_auto_headers=_NO_AUTO,
                allow_redirects=False,
            )
        except (ClientError, OSError) as exc:
            untraced(exc)  # no cycle holds the request's body (proxy/relay/upstream.py)
            return None
        answered()
        async with answer:
            out = web.StreamResponse(status=answer.status, reason=answer.reason)
            for name, value in answer.headers.items():
                if name.lower() not in _NOT_RETURNED:
                    out.headers.add(name, value)
            if answer.content_length is not None:
                out.content_length = answer.content_length
            await out.prepare(request)
            try:
                async for chunk in answer.content.iter_any():
                    await out.write(chunk)
            except (ClientError, OSError) as exc:
                untraced(exc)
                # The owner went away mid-answer: the client must see the break.
                if request.transport is not None:
                    request.transport.close()
                return out
            await out.write_eof()
        return out
