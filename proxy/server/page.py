"""The page at ``/chatmend/``: what chatmend did to the recent requests (``ui: {enabled: true}``).

Server-rendered HTML, one inline stylesheet, no script and no external asset (it works offline).
Every value shown is escaped (``html.escape``): ids, paths, model names and the captured bodies
are the clients' strings. Served to loopback clients only, unless ``ui.admin_token_env`` names a
token: then to anyone sending it as ``Authorization: Bearer <token>`` (compared in constant time).
Nothing on the page is written to a log.

Only to a request whose ``Host`` names the address it reached (its IP, or ``localhost`` on
loopback, with its port) or one of ``ui.allowed_hosts`` (``host_named``): a page on another site
that makes the operator's browser resolve its own name to 127.0.0.1 (DNS rebinding) sends its
own name, and gets a 421. ``/metrics`` and ``/readyz`` are held to the same ``Host`` while the
page is on (proxy/server/app.py). Every path whose first segment spells ``chatmend`` is the page's
(``claims``): one that is not a page path gets a 404 and is never forwarded upstream, with the
admin's ``Authorization`` on it.

- ``/chatmend/``: the recent requests, the changes per rule, the sessions that keep being
  refused;
- ``/chatmend/request/<id>``: one request, its changes and, when it was captured, its body
  before and after side by side, item by item (``proxy.server.diff``: aligned and rendered in a
  worker process, never on the event loop).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import time
from collections.abc import Iterator, Sequence
from html import escape
from typing import Any, Final

import orjson
from aiohttp import web

from proxy.config import UiConfig, split_host
from proxy.observe.capture import Entry, Recent
from proxy.observe.log import get_logger
from proxy.relay.offload import WorkerDied
from proxy.server import diff
from proxy.server.appkeys import OFFLOAD_KEY, RECENT_KEY
from rules.engine.base import Change
from rules.providers.apis import APIS, safety_of

log = get_logger()

PREFIX = "/chatmend/"
#: Seconds a diff view may take in its worker (it is ended there past them).
DIFF_DEADLINE: Final = 10.0
#: Bytes of the page written at a time (the event loop runs between two writes).
WRITE_CHUNK: Final = 256 * 1024

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
table{border-collapse:collapse;width:100%;margin-bottom:1.5em}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
td.num{text-align:right}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:12px;max-height:30em;overflow:auto}
tr.same td{color:#666}
td.del{background:#fde8e8}
td.ins{background:#e6f6e6}
.changed,.moved,.removed,.added{font-weight:bold}
code{font-size:12px}
"""
_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}


def add_routes(app: web.Application, ui: UiConfig) -> None:
    """The page's routes, when ``ui`` is on (registered before the proxy's catch-all)."""
    if not ui.enabled:
        return
    app.router.add_get(PREFIX, partial_index(ui))
    app.router.add_get(PREFIX + "request/{request_id}", partial_request(ui))


def claims(path: str) -> bool:
    """Whether ``path`` (decoded, ``proxy.relay.routing.route_path``) is under the page's name,
    in any case: ``/chatmend``, ``/CHATMEND/``, ``/chatmend/request``... The page's own paths never
    reach the proxy's route; the rest of these are refused there, not forwarded."""
    return path.split("/", 2)[1].lower() == PREFIX.strip("/")


def not_a_page() -> web.Response:
    """The answer to a path ``claims`` that is not one of the page's."""
    text = "No such page: the page is at /chatmend/ and /chatmend/request/<id>.\n"
    return web.Response(status=404, text=text, headers={"Cache-Control": "no-store"})


#: Headers a reverse proxy adds: behind one, every client reaches chatmend from its address
#: (loopback, for a proxy on the same host or in the same pod), so "loopback" no longer says who
#: is asking; without a token such a request is refused.
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")


def host_named(request: web.Request, ui: UiConfig) -> bool:
    """Whether the request's ``Host`` names the address it reached (the connection's own IP,
    or ``localhost`` when that is loopback, and its port; port 80 when it names none) or one of
    ``ui.allowed_hosts``. A request without ``Host`` (HTTP/1.0) passes: every browser sends
    one, and only a browser can be led to a page by another site."""
    given = request.headers.getall("Host", [])
    if not given:
        return True
    parsed = split_host(given[0]) if len(given) == 1 else None
    if parsed is None:
        return False
    name, port = parsed
    for allowed_name, allowed_port in ui.allowed_hosts:
        if name == allowed_name and allowed_port in (None, port):
            return True
    local = request.transport.get_extra_info("sockname") if request.transport else None
    if not isinstance(local, tuple) or len(local) < 2 or (port or 80) != local[1]:
        return False
    address = _address(str(local[0]))
    if address is None:
        return False
    return (name == "localhost" and address.is_loopback) or _address(name) == address


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IP address (an IPv4 one mapped into IPv6 as itself), or ``None``."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def misdirected() -> web.Response:
    """The answer to a ``Host`` that names neither this server nor ``ui.allowed_hosts``."""
    text = (
        "421 Misdirected Request: this Host header names neither the address chatmend was "
        "reached at nor one of ui.allowed_hosts.\n"
    )
    return web.Response(status=421, text=text, headers={"Cache-Control": "no-store"})


def allowed(request: web.Request, ui: UiConfig) -> bool:
    """Loopback clients that no proxy forwarded, or (with a token configured) a client
    presenting it."""
    if ui.admin_token is not None:
        given = request.headers.get("Authorization", "")
        expected = "Bearer " + ui.admin_token.value
        return hmac.compare_digest(given.encode(), expected.encode())
    if any(name in request.headers for name in FORWARDING_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


def _gate(request: web.Request, ui: UiConfig) -> web.Response | None:
    """The page's refusal of this request (421 for its ``Host``, 403 for who sent it), if any."""
    if not host_named(request, ui):
        return misdirected()
    if not allowed(request, ui):
        return web.Response(status=403, text="The page is served to loopback clients only.\n")
    return None


def partial_index(ui: UiConfig) -> Any:
    async def index(request: web.Request) -> web.StreamResponse:
        refused = _gate(request, ui)
        if refused is not None:
            return refused
        body = "".join(render_index(request.app[RECENT_KEY]))
        return await _send(request, "chatmend: recent requests", body)

    return index


def partial_request(ui: UiConfig) -> Any:
    async def one(request: web.Request) -> web.StreamResponse:
        refused = _gate(request, ui)
        if refused is not None:
            return refused
        recent = request.app[RECENT_KEY]
        request_id = request.match_info["request_id"]
        entry = recent.find(request_id)
        if entry is None:
            return web.Response(status=404, text="No such request in the recent ones.\n")
        head = "".join(render_request(entry))
        bodies = recent.bodies.get(request_id)
        if bodies is None:
            view = b"<p>Body not captured (capture is off, or the request was not rewritten).</p>"
        else:
            view = await diff_view(request.app, bodies.before, bodies.after, entry)
        return await _send(request, f"chatmend: request {request_id}", head, view)

    return one


async def diff_view(app: web.Application, before: bytes, after: bytes, entry: Entry) -> bytes:
    """The captured bodies aligned and rendered (``proxy.server.diff.view``) off the event loop:
    in a worker process of the offload pool (a thread would not do: orjson's parse and the
    alignment hold the GIL, so the loop would wait as long), in its big lane (a view never
    takes more than half the workers, and a waiting repair goes first), ended there past
    ``DIFF_DEADLINE``. With ``offload_processes: 0``, in a thread."""
    record = APIS.get(entry.api)  # a path chatmend passes through has none: read it like chat
    args = (before, after, "messages" if record is None else record.field, renames(entry.listed))
    offload = app[OFFLOAD_KEY]
    try:
        if offload.enabled:
            html: bytes = await offload.run(diff.view, *args, deadline=DIFF_DEADLINE)
            return html
        async with asyncio.timeout(DIFF_DEADLINE):
            return await asyncio.to_thread(diff.view, *args)
    except (TimeoutError, WorkerDied, RuntimeError) as exc:
        log.warning("page_diff_failed", error=type(exc).__name__)
        why = (
            f"did not finish within {DIFF_DEADLINE:g} s"
            if isinstance(exc, TimeoutError)
            else "failed in its worker"
        )
        return (
            f"<p id='unaligned'>The bodies could not be shown: their alignment {why} "
            f"({escape(type(exc).__name__)}).</p>"
        ).encode()


def renames(changes: Sequence[Change]) -> tuple[tuple[str, str], ...]:
    """The ids the rules recorded renaming, ``(new, old)``: the diff pairs an item by its old
    id."""
    found = []
    for change in changes:
        old, new = change.detail.get("from"), change.detail.get("to")
        if change.action.endswith("_id") and isinstance(old, str) and isinstance(new, str):
            found.append((new, old))
    return tuple(found)


async def _send(request: web.Request, title: str, *parts: str | bytes) -> web.StreamResponse:
    """The page, written ``WRITE_CHUNK`` bytes at a time (a view of a big body is megabytes)."""
    head = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f'<body><h1><a href="{PREFIX}">chatmend</a></h1>'
    )
    chunks = [head.encode(), *(p.encode() if isinstance(p, str) else p for p in parts)]
    chunks.append(b"</body></html>")
    response = web.StreamResponse(headers=_HEADERS)
    response.content_type, response.charset = "text/html", "utf-8"
    response.content_length = sum(map(len, chunks))
    await response.prepare(request)
    for chunk in chunks if request.method != "HEAD" else ():
        view = memoryview(chunk)
        for at in range(0, len(view), WRITE_CHUNK):
            await response.write(view[at : at + WRITE_CHUNK])
    await response.write_eof()
    return response


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def render_index(recent: Recent) -> Iterator[str]:
    yield f"<h2>Recent requests ({len(recent.entries)})</h2>"
    yield _table(
        "recent",
        "time (UTC)",
        "route",
        "API",
        "model",
        "status",
        "rules",
        "changes",
        "overhead ms",
        "recovered",
        "request id",
    )
    for e in reversed(recent.entries):
        captured = " (captured)" if e.request_id in recent.bodies else ""
        overhead = "" if e.overhead_ms is None else f"{e.overhead_ms:.2f}"
        yield (
            f"<tr><td>{_when(e.at)}</td><td>{escape(e.route)}</td><td>{escape(e.api)}</td>"
            f"<td>{escape(e.model or '')}</td><td class='num'>{e.status}</td>"
            f"<td>{escape(', '.join(e.rules))}</td><td class='num'>{e.changes}</td>"
            f"<td class='num'>{overhead}</td><td>{'yes' if e.recovered else ''}</td>"
            f"<td><a href='{PREFIX}request/{escape(e.request_id)}'><code>"
            f"{escape(e.request_id)}</code></a>{captured}</td></tr>"
        )
    yield "</table><h2>Changes per rule</h2>" + _table("rules", "rule", "changes")
    for rule, count in recent.per_rule.most_common():
        yield f"<tr><td>{escape(rule)}</td><td class='num'>{count}</td></tr>"
    yield "</table><h2>Sessions that keep being refused</h2>"
    yield _table("refused", "route", "client", "model", "refused in a row")
    for (route, client, model), streak in recent.refused_sessions():
        yield (
            f"<tr><td>{escape(route)}</td><td>{escape(client)}</td><td>{escape(model)}</td>"
            f"<td class='num'>{streak}</td></tr>"
        )
    yield "</table>"


def render_request(entry: Entry) -> Iterator[str]:
    """A request's facts and its changes (the body's view follows: ``diff_view``)."""
    e = entry
    yield f"<h2>Request <code id='request-id'>{escape(e.request_id)}</code></h2><table>"
    facts = (
        ("time (UTC)", _when(e.at)),
        ("route", e.route),
        ("API", e.api),
        ("request", f"{e.method} {e.path}"),
        ("model", e.model or ""),
        ("status", str(e.status)),
        ("outcome", e.outcome or ""),
        ("rules", ", ".join(e.rules)),
        ("changes", str(e.changes)),
        ("overhead ms", "" if e.overhead_ms is None else f"{e.overhead_ms:.2f}"),
        ("recovered", "yes" if e.recovered else "no"),
    )
    for name, value in facts:
        yield f"<tr><th>{name}</th><td>{escape(value)}</td></tr>"
    yield "</table><h3>Changes</h3>" + _table(
        "changes", "rule", "index", "action", "safety", "detail"
    )
    for change in e.listed:
        detail = orjson.dumps(dict(change.detail), default=str).decode()
        yield (
            f"<tr><td>{escape(change.rule)}</td><td class='num'>{change.index}</td>"
            f"<td>{escape(change.action)}</td><td>{safety_of(change)}</td>"
            f"<td><code>{escape(detail)}</code></td></tr>"
        )
    if e.changes > len(e.listed):
        yield f"<tr><td colspan='5'>{e.changes - len(e.listed)} more, not listed.</td></tr>"
    yield "</table>"
    if e.replied:  # the answer, as the reply rules changed it (docs/replies.md)
        yield "<h3>Response changes</h3>" + _table(
            "reply-changes", "rule", "at", "action", "detail"
        )
        for change in e.replied:
            detail = orjson.dumps(dict(change.detail), default=str).decode()
            yield (
                f"<tr><td>{escape(change.rule)}</td><td class='num'>{change.index}</td>"
                f"<td>{escape(change.action)}</td><td><code>{escape(detail)}</code></td></tr>"
            )
        yield "</table>"


def _table(table_id: str, *names: str) -> str:
    return f"<table id='{table_id}'><tr>" + "".join(f"<th>{n}</th>" for n in names) + "</tr>"
