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
- ``/chatmend/rules``: every rule's record under its name (the links of the changes);
- ``/chatmend/request/<id>``: one request: what changed, one line per rule with its reason
  (and for a recovered request the provider's refusal and its class), then, when it was
  captured, its body before and after side by side, item by item, every index said on its side
  (``proxy.server.diff``: aligned and rendered in a worker process, never on the event loop),
  then every change and the facts.
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
from proxy.observe.capture import Bodies, Entry, Recent
from proxy.observe.log import get_logger
from proxy.relay.offload import WorkerDied
from proxy.server import diff
from proxy.server.appkeys import OFFLOAD_KEY, RECENT_KEY
from rules.engine.base import Change, Rule
from rules.providers.apis import APIS, RULES_BY_NAME, safety_of
from rules.replies import REPLY_RULES
from rules.replies.base import ReplyRule

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
mark.del{background:#f4a6a6}
mark.ins{background:#9fdf9f}
.note{font-size:12px;font-style:italic}
#what-changed{margin:.3em 0 1em;padding:4px 8px 4px 1.6em;background:#eef3ff}
#what-changed li{margin:.15em 0}
.why{color:#555}
#refusal{background:#fff6dd;padding:4px 8px}
h2,h3{margin:.5em 0 .3em}
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
    app.router.add_get(PREFIX + "rules", partial_rules(ui))


def claims(path: str) -> bool:
    """Whether ``path`` (decoded, ``proxy.relay.routing.route_path``) is under the page's name,
    in any case: ``/chatmend``, ``/CHATMEND/``, ``/chatmend/request``... The page's own paths never
    reach the proxy's route; the rest of these are refused there, not forwarded."""
    return path.split("/", 2)[1].lower() == PREFIX.strip("/")


def not_a_page() -> web.Response:
    """The answer to a path ``claims`` that is not one of the page's."""
    text = "No such page: the page is at /chatmend/, /chatmend/request/<id> and /chatmend/rules.\n"
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


def partial_rules(ui: UiConfig) -> Any:
    async def rules(request: web.Request) -> web.StreamResponse:
        refused = _gate(request, ui)
        if refused is not None:
            return refused
        return await _send(request, "chatmend: rules", "".join(render_rules()))

    return rules


def render_rules() -> Iterator[str]:
    """Every rule's record, each under its name as anchor: the sections of docs/rules.md
    (generated from the same records by ``make docs``), served with the page so that its links
    work offline."""
    yield (
        "<h2>Rules</h2><p>Each rule as its record says (the repository's "
        "<code>docs/rules.md</code> has the same sections, under the same anchors).</p>"
    )
    rooms: list[tuple[str, Sequence[Rule | ReplyRule]]] = [
        (api.name, api.rules) for api in APIS.values()
    ]
    for title, records in [*rooms, ("replies", REPLY_RULES)]:
        yield f"<h3>{escape(title)}</h3><dl id='rules-{escape(title)}'>"
        for rule in records:
            name = escape(rule.name)
            safety = rule.safety if isinstance(rule.safety, str) else "by action"
            yield (
                f"<dt id='{name}'><code>{name}</code> ({escape(safety)})</dt>"
                f"<dd>{escape(rule.summary)}<br>Refused: {escape(rule.defect)}<br>"
                f"Repair: {escape(rule.repair)}<br>"
                f"<code>docs/rules.md#{name}</code></dd>"
            )
        yield "</dl>"


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
        bodies = recent.bodies.get(request_id)
        head = "".join(render_request(entry, bodies))
        if bodies is None:
            changes = noted(entry.listed)
            view = "".join(
                [
                    *diff.summary(changes, diff.received),
                    "<p>Body not captured (capture is off, or the request was not rewritten).</p>",
                    *diff.changes_table(changes, diff.received),
                    "</table>",
                ]
            ).encode()
        else:
            view = await diff_view(request.app, bodies.before, bodies.after, entry)
        tail = "".join(render_facts(entry))
        return await _send(request, f"chatmend: request {request_id}", head, view, tail)

    return one


async def diff_view(app: web.Application, before: bytes, after: bytes, entry: Entry) -> bytes:
    """The captured bodies aligned and rendered (``proxy.server.diff.view``) off the event loop:
    in a worker process of the offload pool (a thread would not do: orjson's parse and the
    alignment hold the GIL, so the loop would wait as long), in its big lane (a view never
    takes more than half the workers, and a waiting repair goes first), ended there past
    ``DIFF_DEADLINE``. With ``offload_processes: 0``, in a thread."""
    record = APIS.get(entry.api)  # a path chatmend passes through has none: read it like chat
    args = (before, after, "messages" if record is None else record.field, noted(entry.listed))
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


def noted(changes: Sequence[Change]) -> tuple[diff.Noted, ...]:
    """The changes as the view tells them: each with its rule's fix safety and one-line
    reason (``Rule.summary``)."""
    found = []
    for change in changes:
        rule = RULES_BY_NAME.get(change.rule)
        reason = "" if rule is None else rule.summary
        found.append(
            diff.Noted(
                change.rule,
                change.index,
                change.action,
                dict(change.detail),
                safety_of(change),
                reason,
            )
        )
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


def render_request(entry: Entry, bodies: Bodies | None = None) -> Iterator[str]:
    """A request's head, above the fold: its id and one line of facts, and for a recovered
    request the provider's refusal and the class it was read as (what changed, the bodies
    and the changes follow: ``diff_view``; the facts table last: ``render_facts``)."""
    e = entry
    yield f"<h2>Request <code id='request-id'>{escape(e.request_id)}</code></h2>"
    overhead = "" if e.overhead_ms is None else f", {e.overhead_ms:.2f} ms overhead"
    line = (
        f"{e.api} {e.method} {e.path}, model {e.model or '?'}, route {e.route}: "
        f"{e.status} {e.outcome or ''}, {e.changes} change{'' if e.changes == 1 else 's'}"
        f"{overhead}"
    )
    yield f"<p id='facts-line'>{escape(line)}</p>"
    if e.recovered:
        said = bodies.refusal if bodies is not None else None
        text = (
            f"<q>{escape(said)}</q>"
            if said
            else "(its text is kept with the bodies, when capture is on)"
        )
        yield (
            f"<p id='refusal'>Recovered: the provider refused the request as first sent: "
            f"{text}, read as <code>{escape(e.recovered_class or 'unclassified')}</code>; "
            "the rules below repaired it and the retry was accepted.</p>"
        )
    yield from _replied(e)
    yield "<h3>What changed</h3>"


def _replied(e: Entry) -> Iterator[str]:
    """What the reply rules changed in the answer (docs/replies.md): one row per change."""
    if not e.replied:
        return
    yield "<h3>Response changes</h3>" + _table("reply-changes", "rule", "at", "action", "detail")
    for change in e.replied:
        detail = orjson.dumps(dict(change.detail), default=str).decode()
        name = escape(change.rule)
        yield (
            f"<tr><td><a href='{diff.RULES_PATH}#{name}'>{name}</a></td>"
            f"<td class='num'>choice {change.index}</td><td>{escape(change.action)}</td>"
            f"<td><code>{escape(detail)}</code></td></tr>"
        )
    yield "</table>"


def render_facts(entry: Entry) -> Iterator[str]:
    """The request's facts, in full."""
    e = entry
    yield "<h3>Facts</h3><table id='facts'>"
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
        ("recovered from", e.recovered_class or ""),
    )
    for name, value in facts:
        yield f"<tr><th>{name}</th><td>{escape(value)}</td></tr>"
    if e.changes > len(e.listed):
        yield f"<tr><td colspan='2'>{e.changes - len(e.listed)} more, not listed.</td></tr>"
    yield "</table>"


def _table(table_id: str, *names: str) -> str:
    return f"<table id='{table_id}'><tr>" + "".join(f"<th>{n}</th>" for n in names) + "</tr>"
