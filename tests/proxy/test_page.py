"""The page at /chatmend/ and the capture behind it (proxy/server/page.py,
proxy/observe/capture.py), through the proxy with the aiohttp client;
tests/proxy/test_page_browser.py loads it in Chromium."""

from __future__ import annotations

import gc
import html
import os
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import CaptureConfig, ConfigError, parse_config, split_host
from proxy.observe.capture import ENTRY_BYTES, Bodies, Entry, Recent, clipped
from proxy.observe.flow import MAX_LISTED_CHANGES
from rules.engine.base import Change
from tests.conftest import ProxyFactory
from tests.proxy.test_hostile import _recorder
from tests.transcripts import chat

HOSTILE = "</script><img src=x onerror=alert(1)>"
#: A body the default profile repairs: an empty ``tool_calls`` list on an assistant turn.
REPAIRED = [
    {"role": "user", "content": HOSTILE},
    {"role": "assistant", "content": "ok", "tool_calls": []},
    {"role": "user", "content": "next"},
]
ON = {"ui": {"enabled": True}, "capture": {"enabled": True}}


class _Text(HTMLParser):
    """The page as a reader sees it: its text, and every tag it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(html: str) -> _Text:
    reader = _Text()
    reader.feed(html)
    return reader


async def test_page_is_off_by_default(proxy: Any, fake: Any) -> None:
    response = await proxy.get("/chatmend/")
    # Forwarded to the upstream like any path: chatmend serves no page of its own.
    assert response.status == 404 and "Recent requests" not in await response.text()
    assert "X-Chatmend-Request-Id" in response.headers


async def test_a_repaired_request_shows_with_its_rules_and_bodies(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy(ON)
    with capture_logs() as logs:
        response = await proxy.post(
            "/v1/chat/completions",
            data=chat(REPAIRED),
            headers={"Authorization": "Bearer sk-CANARY-secret"},
        )
    assert response.status == 200
    request_id = response.headers["X-Chatmend-Request-Id"]
    rules = response.headers["X-Chatmend-Changes"].split("rules=")[1].split(";")[0].split(",")
    index = await proxy.get("/chatmend/")
    assert index.status == 200 and index.content_type == "text/html"
    assert "default-src 'none'" in index.headers["Content-Security-Policy"]
    page = await index.text()
    assert request_id in page and all(rule in page for rule in rules)
    view = await proxy.get(f"/chatmend/request/{request_id}")
    html = await view.text()
    reader = parsed(html)
    text = "".join(reader.text)
    # The hostile message is text on the page, never markup: no img, no script.
    assert HOSTILE in text and "img" not in reader.tags and "script" not in reader.tags
    assert "messages[1] changed" in text  # the repaired turn, marked on both sides
    assert '"tool_calls": []' in text  # before
    assert all(rule in text for rule in rules)
    # Credentials are never captured; message text never reaches a log.
    assert "CANARY-secret" not in html
    assert HOSTILE not in repr(logs) and "next" not in repr([e for e in logs if "changes" in e])


async def test_head_gets_the_headers_only(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy(ON)
    get, head = await proxy.get("/chatmend/"), await proxy.head("/chatmend/")
    assert head.status == 200 and await head.read() == b""
    assert head.headers["Content-Length"] == str(len(await get.read()))


async def test_a_clean_request_is_listed_but_not_captured(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy(ON)
    clean = await proxy.post("/v1/chat/completions", data=chat([{"role": "user", "content": "hi"}]))
    assert clean.headers["X-Chatmend-Changes"] == "0"
    request_id = clean.headers["X-Chatmend-Request-Id"]
    listed = await (await proxy.get("/chatmend/")).text()
    assert request_id in listed and "deepseek-chat" in listed  # its model, though not captured
    view = await (await proxy.get(f"/chatmend/request/{request_id}")).text()
    assert "Body not captured" in view
    assert (await proxy.get("/chatmend/request/" + "0" * 32)).status == 404


async def test_without_capture_the_bodies_are_not_kept(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy({"ui": {"enabled": True}})
    response = await proxy.post("/v1/chat/completions", data=chat(REPAIRED))
    view = await proxy.get(f"/chatmend/request/{response.headers['X-Chatmend-Request-Id']}")
    html = await view.text()
    assert "Body not captured" in html and "onerror" not in html


async def test_only_loopback_or_the_admin_token(make_proxy: ProxyFactory) -> None:
    token = {"ui": {"enabled": True, "admin_token_env": "UI_TOKEN"}}
    proxy = await make_proxy(token, env={"UI_TOKEN": "t0k3n"})
    assert (await proxy.get("/chatmend/")).status == 403  # loopback, but a token is set
    wrong = await proxy.get("/chatmend/", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 403
    right = await proxy.get("/chatmend/", headers={"Authorization": "Bearer t0k3n"})
    assert right.status == 200


def test_a_remote_client_is_refused_without_a_token() -> None:
    from proxy.config import UiConfig
    from proxy.server.page import allowed

    class Remote:
        def __init__(self, remote: str, **headers: str) -> None:
            self.remote = remote
            self.headers: dict[str, str] = headers

    ui = UiConfig(enabled=True)
    assert allowed(Remote("127.0.0.1"), ui)  # type: ignore[arg-type]
    assert allowed(Remote("::1"), ui)  # type: ignore[arg-type]
    assert not allowed(Remote("10.0.0.5"), ui)  # type: ignore[arg-type]
    assert not allowed(Remote(""), ui)  # type: ignore[arg-type]
    # A reverse proxy on the same host makes every client look like loopback.
    forwarded = Remote("127.0.0.1", **{"X-Forwarded-For": "203.0.113.7"})
    assert not allowed(forwarded, ui)  # type: ignore[arg-type]
    assert not allowed(Remote("::1", Forwarded="for=203.0.113.7"), ui)  # type: ignore[arg-type]


def test_capture_config_is_validated() -> None:
    config = parse_config({"capture": {"enabled": True, "max_requests": 3, "max_bytes": 100}})
    assert config.capture == CaptureConfig(True, 3, 100)
    assert parse_config({}).capture.enabled is False and parse_config({}).ui.enabled is False
    with pytest.raises(ConfigError, match=r"capture\.max_bytes"):
        parse_config({"capture": {"max_bytes": 0}})
    with pytest.raises(ConfigError, match=r"ui\.colour: unknown key"):
        parse_config({"ui": {"colour": "red"}})


def _entry(n: int, status: int = 200, outcome: str = "completed") -> Entry:
    return Entry(f"id{n}", 0.0, "default", "chat", "POST", "/v1", status, outcome=outcome)


def test_the_capture_is_bounded_by_count_and_bytes() -> None:
    recent = Recent(CaptureConfig(enabled=True, max_requests=3, max_bytes=100), size=5)
    for n in range(10):
        recent.record(_entry(n), Bodies(b"x" * 10, b"y" * 10))
    assert list(recent.bodies) == ["id7", "id8", "id9"] and recent.body_bytes == 60
    assert [e.request_id for e in recent.entries] == [f"id{n}" for n in range(5, 10)]
    recent.record(_entry(10), Bodies(b"x" * 45, b"y" * 45))  # 90 bytes: the older ones go
    assert list(recent.bodies) == ["id10"] and recent.body_bytes == 90
    recent.record(_entry(11), Bodies(b"x" * 101, b""))  # past max_bytes alone: not kept
    assert "id11" not in recent.bodies and recent.find("id11") is not None
    for n in range(12, 17):  # the list's eviction drops bodies it no longer lists
        recent.record(_entry(n), None)
    assert recent.bodies == {} and recent.body_bytes == 0


def test_refused_sessions_are_the_ones_refused_in_a_row() -> None:
    recent = Recent()
    for n in range(4):
        recent.record(_entry(n, 400), None)
    assert recent.refused_sessions() == [(("default", "", ""), 4)]
    recent.record(_entry(5, 200), None)
    assert recent.refused_sessions() == []


@pytest.mark.parametrize("outcome", ["client_disconnected", "client_timeout", "unauthorized"])
def test_a_4xx_no_upstream_sent_is_not_a_refused_session(outcome: str) -> None:
    """A client that leaves mid-answer is logged with status 499, one that sends its body too
    slowly with 408, and one without the route's token gets chatmend's 401: none of these is
    the upstream refusing the session (a hostile review saw three dropped streams listed as
    "keeps being refused")."""
    recent = Recent()
    for n in range(4):
        recent.record(
            _entry(n, {"client_timeout": 408, "unauthorized": 401}.get(outcome, 499), outcome), None
        )
    assert recent.refused_sessions() == []


# --- Issue 36: the Host header, paths that nearly name the page, bounded entries -------------


async def _page_and_probes(client: TestClient[Any, Any], host: str | None) -> list[int]:
    """The statuses of the page, a request's view, /metrics and /readyz for ``host``."""
    headers = {} if host is None else {"Host": host}
    paths = ("/chatmend/", "/chatmend/request/" + "0" * 32, "/metrics", "/readyz")
    return [(await client.get(path, headers=headers)).status for path in paths]


async def test_the_page_answers_only_a_host_naming_its_address(make_proxy: ProxyFactory) -> None:
    """Was: any Host got the page (a DNS-rebinding page in the operator's browser read the
    captured bodies), /metrics and /readyz too. Now 421 unless the Host names the address the
    request reached (or ui.allowed_hosts); the proxy path answers any Host."""
    proxy = await make_proxy(ON)
    port = proxy.server.port
    assert port is not None
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}", None):
        assert await _page_and_probes(proxy, host) == [200, 404, 200, 200], host  # the control
    for host in (
        "evil.example",
        f"evil.example:{port}",
        "attacker.test:80",
        "localhost",  # port 80, not this one
        f"127.0.0.2:{port}",  # another address
        f"127.0.0.1:{port + 1}",
        f"[::1]:{port}",  # reached on 127.0.0.1, not ::1
        "127.0.0.1:8787:1",
        "",
    ):
        assert await _page_and_probes(proxy, host) == [421, 421, 421, 421], host
    assert (await proxy.get("/healthz", headers={"Host": "evil.example"})).status == 200
    forwarded = await proxy.post(
        "/v1/chat/completions", data=chat(REPAIRED), headers={"Host": "evil.example"}
    )
    assert forwarded.status == 200 and forwarded.headers["X-Chatmend-Changes"] != "0"


async def test_allowed_hosts_name_more_hosts(make_proxy: ProxyFactory) -> None:
    listed = {"enabled": True, "allowed_hosts": ["chatmend.internal", "ops.example:8443"]}
    proxy = await make_proxy({"ui": listed})
    ok = [200, 404, 200, 200]
    assert await _page_and_probes(proxy, "chatmend.internal") == ok
    assert await _page_and_probes(proxy, "CHATMEND.INTERNAL:9999") == ok  # any port: none given
    assert await _page_and_probes(proxy, "ops.example:8443") == ok
    assert await _page_and_probes(proxy, "ops.example:8444") == [421] * 4
    assert await _page_and_probes(proxy, "ops.example") == [421] * 4


async def test_without_the_page_metrics_answer_any_host(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy()
    assert (await proxy.get("/metrics", headers={"Host": "prometheus.svc"})).status == 200
    assert (await proxy.get("/readyz", headers={"Host": "chatmend:8787"})).status == 200


async def test_an_ipv6_host_names_an_ipv6_listener(
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    from proxy.server.app import create_app

    app = create_app(parse_config({"ui": {"enabled": True}, "upstream": {"url": "http://[::1]:9"}}))
    try:
        client = await aiohttp_client(TestServer(app, host="::1"))
    except OSError as exc:  # no IPv6 on this host
        pytest.skip(f"no IPv6 loopback: {exc}")
    port = client.server.port
    assert port is not None
    assert await _page_and_probes(client, f"[::1]:{port}") == [200, 404, 200, 200]
    assert await _page_and_probes(client, f"localhost:{port}") == [200, 404, 200, 200]
    assert await _page_and_probes(client, f"127.0.0.1:{port}") == [421] * 4
    assert await _page_and_probes(client, f"evil.example:{port}") == [421] * 4


NEAR = ("/chatmend", "/CHATMEND/", "/chatmend/request/{id}/", "/chatmend/request", "/Chatmend/x")


async def test_paths_that_nearly_name_the_page_are_not_forwarded(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    """Was: forwarded upstream with the admin's Authorization (the page token)."""
    from proxy.server.app import create_app

    recorder, url = await _recorder(aiohttp_server)
    ui = {"enabled": True, "admin_token_env": "UI_TOKEN"}
    app = create_app(parse_config({"ui": ui, "upstream": {"url": url}}, env={"UI_TOKEN": "t0k"}))
    client = await aiohttp_client(app)
    admin = {"Authorization": "Bearer t0k"}
    assert (await client.get("/v1/models", headers=admin)).status == 200  # the control
    assert len(recorder.requests) == 1
    request_id = "0" * 32
    for path in NEAR:
        response = await client.get(path.format(id=request_id), headers=admin)
        assert response.status == 404 and "No such page" in await response.text(), path
    assert (await client.post("/chatmend/", headers=admin, data=b"{}")).status == 404
    assert (await client.get("/chatmend/", headers=admin)).status == 200
    assert len(recorder.requests) == 1


def test_allowed_hosts_are_validated() -> None:
    config = parse_config({"ui": {"allowed_hosts": ["Chatmend.Internal.", "[fd00::5]:8787"]}})
    assert config.ui.allowed_hosts == (("chatmend.internal", None), ("fd00::5", 8787))
    for bad in ("*", "*.example.com", "http://chatmend", "chatmend/x", "host:0", "a b", 7):
        with pytest.raises(ConfigError, match=r"^ui\.allowed_hosts\[0\]: must be a host"):
            parse_config({"ui": {"allowed_hosts": [bad]}})
    with pytest.raises(ConfigError, match=r"^ui\.allowed_hosts: must be a list"):
        parse_config({"ui": {"allowed_hosts": "chatmend.internal"}})
    assert split_host("[::1]:8787") == ("::1", 8787) and split_host("::1") is None
    route = {"routes": {"page": {"prefix": "/Chatmend/x", "upstream": {"url": "http://a.b"}}}}
    parse_config(route)  # without the page: any prefix
    with pytest.raises(ConfigError, match=r"^routes\.page\.prefix: /Chatmend/x is under"):
        parse_config({**route, "ui": {"enabled": True}})


def _hostile_changes(count: int, id_size: int) -> tuple[Change, ...]:
    """What duplicate-tool-call-ids records for renamed ids of ``id_size`` characters (each its
    own), and more: a long list, many keys, deep nesting, wide characters."""
    changes = []
    for n in range(count):
        big = f"{n}" + "\u00e9" * id_size
        detail = {
            "from": big,
            "to": big + "_d2",
            "ids": [big] * 100,
            "deep": {"a": {"b": {"c": {"d": [big]}}}},
            **{f"k{k}": k for k in range(20)},
        }
        changes.append(Change("duplicate-tool-call-ids", n, "renamed_id", detail))
    return tuple(changes)


def _entry_holds(listed: Callable[[], tuple[Change, ...]]) -> int:
    """What an entry of the list holds (traced allocations still live once it is made)."""
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        entry = Entry(
            "0" * 32, 0.0, "default", "chat", "POST", "/v1/" + "p" * 252, 200,
            model="m" * 128, rules=("duplicate-tool-call-ids",), client="203.0.113.7",
            outcome="completed", listed=listed(), changes=300,
        )  # fmt: skip
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert entry.listed
    return held


def test_an_entry_keeps_its_changes_clipped_within_its_bound() -> None:
    """Was: the list kept each change's detail whole (a renamed 100 KB id: 0.6-1.25 MB per
    entry, 300-600 MB for 500). Now every client string is clipped, and an entry holds at most
    ``ENTRY_BYTES`` (traced allocations, the worst detail this test builds)."""
    listed = clipped(_hostile_changes(300, 100_000))
    assert len(listed) == MAX_LISTED_CHANGES
    first = listed[0]
    assert (first.rule, first.index, first.action) == ("duplicate-tool-call-ids", 0, "renamed_id")
    assert str(first.detail["from"]).endswith("...[100001 chars]")
    assert first.detail["ids"][-1] == "...[100 items]" and first.detail["..."] == "24 keys"
    held = _entry_holds(lambda: clipped(_hostile_changes(300, 100_000)))
    assert held <= ENTRY_BYTES, f"an entry holds {held} bytes"
    # The control: the same changes kept whole, as before.
    whole = _entry_holds(lambda: _hostile_changes(300, 100_000)[:MAX_LISTED_CHANGES])
    assert whole > 100 * ENTRY_BYTES, whole


async def test_the_page_lists_clipped_changes_and_counts_the_rest(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy({"ui": {"enabled": True}})
    big = "c" * 5000
    calls = [
        {"id": big, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        for _ in range(MAX_LISTED_CHANGES + 10)
    ]
    body = chat([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": calls}])
    response = await proxy.post("/v1/chat/completions", data=body)
    changes = int(response.headers["X-Chatmend-Changes"].split(";")[0])
    assert changes > MAX_LISTED_CHANGES
    view = await proxy.get(f"/chatmend/request/{response.headers['X-Chatmend-Request-Id']}")
    html = await view.text()
    assert big not in html and "...[5000 chars]" in html
    assert f"{changes - MAX_LISTED_CHANGES} more, not listed." in html


async def test_a_view_runs_in_a_worker_process_ended_at_its_deadline() -> None:
    """The view's work (``Offloader.run``) runs in a worker process, in the big lane; a job past
    its deadline is ended there, and the worker serves the next one."""
    from proxy.relay.offload import Offloader

    offload = Offloader(1)
    try:
        assert await offload.run(os.getpid) != os.getpid()
        with pytest.raises(TimeoutError):
            await offload.run(time.sleep, 30, deadline=0.3)
        assert await offload.run(len, b"abc") == 3
    finally:
        offload.close()


async def test_a_view_past_its_deadline_says_so(
    make_proxy: ProxyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without worker processes the view runs in a thread, within the same deadline."""
    from proxy.server import diff, page

    def late(*args: Any) -> bytes:
        time.sleep(1)
        return b"late"

    proxy = await make_proxy({**ON, "offload_processes": 0})
    response = await proxy.post("/v1/chat/completions", data=chat(REPAIRED))
    monkeypatch.setattr(page, "DIFF_DEADLINE", 0.2)
    monkeypatch.setattr(diff, "view", late)
    view = await proxy.get(f"/chatmend/request/{response.headers['X-Chatmend-Request-Id']}")
    html = await view.text()
    assert view.status == 200 and "did not finish within 0.2 s (TimeoutError)" in html
    assert "late" not in html and "empty-tool-calls" in html  # the changes are listed still


async def test_the_rules_page_holds_each_rule_under_its_name(make_proxy: ProxyFactory) -> None:
    """Each change's rule links to ``/chatmend/rules#<rule>``: every rule of every API is
    there under its name, with its one-line reason, as docs/rules.md has it (its anchors are
    the rule names: tools/docs.py)."""
    from rules.providers.apis import RULES_BY_NAME

    proxy = await make_proxy(ON)
    response = await proxy.get("/chatmend/rules")
    assert response.status == 200
    page = await response.text()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "rules.md").read_text()
    for name, rule in RULES_BY_NAME.items():
        assert f"<dt id='{name}'>" in page, name
        assert f'<a id="{name}"></a>' in docs, name  # the same anchor in docs/rules.md
        assert html.escape(rule.summary) in page, name
    response = await proxy.post("/v1/chat/completions", data=chat(REPAIRED))
    view = await proxy.get(f"/chatmend/request/{response.headers['X-Chatmend-Request-Id']}")
    assert "<a href='/chatmend/rules#empty-tool-calls'>" in await view.text()
