"""The page at ``/chatmend/``: what chatmend did to the recent requests (``ui: {enabled: true}``).

Server-rendered HTML, one inline stylesheet, no script and no external asset (it works offline).
Every value shown is escaped (``html.escape``): ids, paths, model names and the captured bodies
are the clients' strings. Served to loopback clients only, unless ``ui.admin_token_env`` names a
token: then to anyone sending it as ``Authorization: Bearer <token>`` (compared in constant time).
Nothing on the page is written to a log.

- ``/chatmend/``: the recent requests, the changes per rule, the sessions that keep being
  refused;
- ``/chatmend/request/<id>``: one request, its changes and, when it was captured, its body
  before and after side by side, message by message (``diff``).
"""

from __future__ import annotations

import difflib
import hmac
import ipaddress
import time
from collections.abc import Iterator
from html import escape
from typing import Any

import orjson
from aiohttp import web

from proxy.appkeys import RECENT_KEY
from proxy.capture import Bodies, Entry, Recent
from proxy.config import UiConfig
from rules.providers.apis import APIS, safety_of

PREFIX = "/chatmend/"
#: Messages a diff view shows at most per side (a captured body is bounded by
#: ``capture.max_bytes``; the alignment is quadratic in the worst case).
MAX_DIFF_ITEMS = 2000

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
table{border-collapse:collapse;width:100%;margin-bottom:1.5em}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
td.num{text-align:right}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:12px;max-height:30em;overflow:auto}
tr.equal td{color:#666}
td.del{background:#fde8e8}
td.ins{background:#e6f6e6}
.changed{font-weight:bold}
code{font-size:12px}
"""


def add_routes(app: web.Application, ui: UiConfig) -> None:
    """The page's routes, when ``ui`` is on (registered before the proxy's catch-all)."""
    if not ui.enabled:
        return
    app.router.add_get(PREFIX, partial_index(ui))
    app.router.add_get(PREFIX + "request/{request_id}", partial_request(ui))


#: Headers a reverse proxy adds: behind one, every client reaches chatmend from its address
#: (loopback, for a proxy on the same host or in the same pod), so "loopback" no longer says who
#: is asking; without a token such a request is refused.
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")


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


def _refused() -> web.Response:
    return web.Response(status=403, text="The page is served to loopback clients only.\n")


def partial_index(ui: UiConfig) -> Any:
    async def index(request: web.Request) -> web.Response:
        if not allowed(request, ui):
            return _refused()
        return _html("chatmend: recent requests", "".join(render_index(request.app[RECENT_KEY])))

    return index


def partial_request(ui: UiConfig) -> Any:
    async def one(request: web.Request) -> web.Response:
        if not allowed(request, ui):
            return _refused()
        recent = request.app[RECENT_KEY]
        request_id = request.match_info["request_id"]
        entry = recent.find(request_id)
        if entry is None:
            return web.Response(status=404, text="No such request in the recent ones.\n")
        body = "".join(render_request(entry, recent.bodies.get(request_id)))
        return _html(f"chatmend: request {request_id}", body)

    return one


def _html(title: str, body: str) -> web.Response:
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f'<body><h1><a href="{PREFIX}">chatmend</a></h1>{body}</body></html>'
    )
    headers = {
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
    }
    return web.Response(text=page, content_type="text/html", headers=headers)


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


def render_request(entry: Entry, bodies: Bodies | None) -> Iterator[str]:
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
    yield "</table>"
    if bodies is None:
        yield "<p>Body not captured (capture is off, or the request was not rewritten).</p>"
        return
    yield from render_diff(bodies, e.api)


def _items(body: bytes, field: str) -> tuple[list[Any], dict[str, Any]] | None:
    """A body's list (``messages``, ``input``) and its other keys, or ``None`` if not JSON."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    items = parsed.get(field)
    rest = {k: v for k, v in parsed.items() if k != field}
    return (items if isinstance(items, list) else []), rest


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def diff(before: list[Any], after: list[Any]) -> list[tuple[str, int | None, int | None]]:
    """The two lists aligned item by item: ``(tag, before index, after index)``, ``tag`` one
    of ``equal``, ``changed``, ``removed``, ``added`` (items compared as canonical JSON)."""
    a = [_pretty(item) for item in before[:MAX_DIFF_ITEMS]]
    b = [_pretty(item) for item in after[:MAX_DIFF_ITEMS]]
    rows: list[tuple[str, int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(("equal", i1 + k, j1 + k) for k in range(i2 - i1))
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        rows.extend(("changed", i1 + k, j1 + k) for k in range(paired))
        rows.extend(("removed", i, None) for i in range(i1 + paired, i2))
        rows.extend(("added", None, j) for j in range(j1 + paired, j2))
    return rows


def render_diff(bodies: Bodies, api: str) -> Iterator[str]:
    record = APIS.get(api)  # a path chatmend passes through has none: read it like chat
    field = "messages" if record is None else record.field
    before, after = _items(bodies.before, field), _items(bodies.after, field)
    if before is None or after is None:
        yield "<h3>Bodies</h3><table id='diff'><tr><th>before</th><th>after</th></tr>"
        yield (
            f"<tr><td><pre>{escape(bodies.before.decode('utf-8', 'replace'))}</pre></td>"
            f"<td><pre>{escape(bodies.after.decode('utf-8', 'replace'))}</pre></td></tr></table>"
        )
        return
    (items_a, rest_a), (items_b, rest_b) = before, after
    yield f"<h3>Body before and after, by <code>{escape(field)}</code> index</h3>"
    yield "<table id='diff'><tr><th>before</th><th>after</th></tr>"
    rest_tag = "equal" if rest_a == rest_b else "changed"
    yield _row(
        rest_tag,
        _cell("other keys", None, rest_a, rest_tag),
        _cell("other keys", None, rest_b, rest_tag),
    )
    for tag, i, j in diff(items_a, items_b):
        left = "" if i is None else _cell(field, i, items_a[i], tag)
        right = "" if j is None else _cell(field, j, items_b[j], tag)
        yield _row(tag, left, right)
    if max(len(items_a), len(items_b)) > MAX_DIFF_ITEMS:
        yield f"<tr><td colspan='2'>Only the first {MAX_DIFF_ITEMS} items are shown.</td></tr>"
    yield "</table>"


def _table(table_id: str, *names: str) -> str:
    return f"<table id='{table_id}'><tr>" + "".join(f"<th>{n}</th>" for n in names) + "</tr>"


def _row(tag: str, left: str, right: str) -> str:
    """A diff row: a changed item's two sides marked (red before, green after)."""
    before, after = ("", "") if tag == "equal" else ("del", "ins")
    return (
        f"<tr class='{tag}'><td class='{before}'>{left}</td><td class='{after}'>{right}</td></tr>"
    )


def _cell(field: str, index: int | None, item: Any, tag: str) -> str:
    label = field if index is None else f"{field}[{index}]"
    head = f"<div class='{tag}'>{escape(label)} {tag}</div>"
    return head + f"<pre>{escape(_pretty(item))}</pre>"
