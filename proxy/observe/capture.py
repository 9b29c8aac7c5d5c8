"""What the page at ``/chatmend/`` shows (proxy/server/page.py): the recent requests, bounded, and
for the ones chatmend rewrote, recovered or saw refused, their bodies before and after (capture).

Both live in memory only, in this process: nothing here is written to a log or a file. The list
of recent requests holds ids, names and counts (never message text) and is kept when the page is
on (``ui: {enabled: true}``); the bodies are kept only when ``capture: {enabled: true}`` (off by
default: they hold what users wrote), within ``capture.max_requests`` bodies and
``capture.max_bytes`` bytes together, the oldest evicted first. Headers are never kept, so no
credential is.
"""

from __future__ import annotations

import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from proxy.config import CaptureConfig
from proxy.observe.flow import MAX_LISTED_CHANGES, Flow, Subscriber
from rules.engine.base import Change
from rules.providers.apis import APIS
from rules.providers.refusals import error_text

#: The recent requests the page lists (ids, names and counts, each clipped: ``ENTRY_BYTES``).
RECENT_REQUESTS = 500
#: A session (route, client address, model) refused this many times in a row by the upstream
#: is listed as "keeps being refused".
REFUSED_STREAK = 3
#: The outcomes of a 4xx that is no upstream's refusal: chatmend's own answer (a limit, its
#: token), a client that sent too slowly or left (499), or none known.
_NOT_REFUSED = frozenset(
    {"rejected", "unauthorized", "client_timeout", "client_disconnected", None}
)
#: Characters of a change's detail kept in all (its keys, strings and numbers as written):
#: a string is cut to ``CLIP_STRING`` characters, a list or mapping to ``CLIP_ITEMS`` items,
#: nesting to ``CLIP_DEPTH`` levels; the rest is marked (``...``), never kept.
CLIP_DETAIL = 256
CLIP_STRING = 64
CLIP_ITEMS = 8
CLIP_DEPTH = 3
#: The most one entry of the list holds, measured (tracemalloc, tests/proxy/test_page.py):
#: its fixed fields and ``MAX_LISTED_CHANGES`` clipped changes.
ENTRY_BYTES = 64 * 1024
#: The model name, read without parsing the body (the first ``"model": "..."`` of its first
#: 64 KiB; a JSON string's own quotes are escaped, so this is a key, not message text).
_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]{1,128})"')


@dataclass(slots=True)
class Entry:
    """One request as the page lists it: ids, names, counts and times, never message text."""

    request_id: str
    at: float
    route: str
    api: str
    method: str
    path: str
    status: int
    model: str | None = None
    rules: tuple[str, ...] = ()
    changes: int = 0
    overhead_ms: float | None = None
    recovered: bool = False
    #: For a recovered request, the class recovery read the provider's refusal as.
    recovered_class: str | None = None
    outcome: str | None = None
    client: str = ""
    #: The changes as the rules reported them (the first ``MAX_LISTED_CHANGES``, ``clipped``).
    listed: tuple[Change, ...] = ()
    #: What the reply rules changed in the answer (clipped the same way).
    replied: tuple[Change, ...] = ()


@dataclass(frozen=True, slots=True)
class Bodies:
    """A captured request's body as the client sent it (decoded) and as chatmend sent it."""

    before: bytes
    after: bytes
    #: For a recovered request, the provider's refusal text (as the classifier read it, at
    #: most ``MAX_TEXT`` characters): it may quote what the client sent, so it is kept only
    #: with the bodies.
    refusal: str | None = None

    @property
    def size(self) -> int:
        return len(self.before) + len(self.after) + len(self.refusal or "")


@dataclass(slots=True)
class Recent:
    """The ring of recent requests and the captured bodies (see the module's docstring)."""

    capture: CaptureConfig = field(default_factory=CaptureConfig)
    size: int = RECENT_REQUESTS
    entries: deque[Entry] = field(init=False)
    bodies: dict[str, Bodies] = field(init=False, default_factory=dict)
    body_bytes: int = field(init=False, default=0)
    #: Every change recorded since start, by rule (what the page's "per rule" table shows).
    per_rule: Counter[str] = field(init=False, default_factory=Counter)
    #: Upstream refusals in a row, per session (route, client, model).
    streaks: dict[tuple[str, str, str], int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.entries = deque(maxlen=self.size)

    def record(self, entry: Entry, bodies: Bodies | None) -> None:
        """Keep ``entry`` (evicting the oldest) and, when capture is on, its ``bodies``."""
        if len(self.entries) == self.entries.maxlen:
            self._forget(self.entries[0].request_id)
        self.entries.append(entry)
        self.per_rule.update(c.rule for c in entry.listed)
        if entry.api in APIS:  # a refusal of a repaired API, not of a path passed through
            key = (entry.route, entry.client, entry.model or "")
            refused = 400 <= entry.status < 500 and entry.outcome not in _NOT_REFUSED
            if refused:
                self.streaks[key] = self.streaks.get(key, 0) + 1
            else:
                self.streaks.pop(key, None)
            if len(self.streaks) > self.size:  # bounded: the oldest sessions go first
                del self.streaks[next(iter(self.streaks))]
        if bodies is None or not self.capture.enabled or bodies.size > self.capture.max_bytes:
            return
        self.bodies[entry.request_id] = bodies
        self.body_bytes += bodies.size
        while (
            len(self.bodies) > self.capture.max_requests or self.body_bytes > self.capture.max_bytes
        ):
            self._forget(next(iter(self.bodies)))

    def _forget(self, request_id: str) -> None:
        gone = self.bodies.pop(request_id, None)
        if gone is not None:
            self.body_bytes -= gone.size

    def find(self, request_id: str) -> Entry | None:
        return next((e for e in self.entries if e.request_id == request_id), None)

    def refused_sessions(self) -> list[tuple[tuple[str, str, str], int]]:
        """The sessions refused at least ``REFUSED_STREAK`` times in a row, most first."""
        streaks = [(key, n) for key, n in self.streaks.items() if n >= REFUSED_STREAK]
        return sorted(streaks, key=lambda item: -item[1])


def clipped(changes: tuple[Change, ...]) -> tuple[Change, ...]:
    """The first ``MAX_LISTED_CHANGES`` changes, each with its detail clipped to
    ``CLIP_DETAIL`` characters (what the page shows; the list keeps nothing more)."""
    return tuple(
        Change(c.rule, c.index, c.action[:CLIP_STRING], _clip_mapping(c.detail, [CLIP_DETAIL], 0))
        for c in changes[:MAX_LISTED_CHANGES]
    )


def _clip(value: Any, left: list[int], depth: int) -> Any:
    """``value`` within the characters ``left[0]`` still allows (spent here)."""
    if value is None or isinstance(value, bool | int | float):
        left[0] -= 8
        return value if left[0] >= 0 else "..."
    if isinstance(value, str):
        room = max(0, min(CLIP_STRING, left[0]))
        left[0] -= min(len(value), room) + 2
        return value if len(value) <= room else value[:room] + f"...[{len(value)} chars]"
    if depth >= CLIP_DEPTH or left[0] <= 0:
        left[0] -= 3
        return "..."
    if isinstance(value, dict):
        return _clip_mapping(value, left, depth + 1)
    if isinstance(value, list | tuple):
        kept = [_clip(item, left, depth + 1) for item in value[:CLIP_ITEMS] if left[0] > 0]
        if len(kept) < len(value):
            kept.append(f"...[{len(value)} items]")
        return kept
    return _clip(type(value).__name__, left, depth)


def _clip_mapping(value: Any, left: list[int], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in islice(value.items(), CLIP_ITEMS):
        if left[0] <= 0:
            break
        name = _clip(str(key), left, depth)
        out[name] = _clip(item, left, depth)
    if len(out) < len(value):
        out["..."] = f"{len(value)} keys"
    return out


def model_of(body: bytes | None) -> str | None:
    """The request's model name, from the first 64 KiB of its body (no parse)."""
    if not body:
        return None
    found = _MODEL.search(body, 0, 65536)
    return None if found is None else found.group(1).decode("utf-8", "replace")


class Capture(Subscriber):
    """The page's subscriber: each request, once done, joins the list of recent requests, and
    the bodies of one rewritten, recovered or refused by the upstream join the capture."""

    def __init__(self, recent: Recent) -> None:
        self.recent = recent

    def done(self, flow: Flow) -> None:
        request = flow.request
        entry = Entry(
            request_id=flow.id,
            at=time.time(),
            route=flow.route,
            api=flow.api,
            method=request.method,
            path=request.path[:256],
            status=flow.status,
            model=model_of(flow.original),
            rules=flow.rules,
            changes=flow.changes,
            overhead_ms=flow.overhead_ms,
            recovered=flow.recovered,
            recovered_class=flow.recovered_class,
            outcome=flow.outcome,
            client=flow.client,
            listed=clipped(flow.listed),
            replied=clipped(flow.replied),
        )
        self.recent.record(entry, captured(flow))


def captured(flow: Flow) -> Bodies | None:
    """The bodies before and after of a request the upstream answered, when chatmend rewrote
    or recovered it, or the upstream refused it (4xx)."""
    original, sent = flow.original, flow.sanitized
    if original is None:
        return None
    changed = sent is not None and sent.changed
    if not (flow.recovered or changed or 400 <= flow.status < 500):
        return None
    refusal = error_text(flow.recovered_from) if flow.recovered else None
    return Bodies(original, sent.body if sent is not None and changed else original, refusal)
