"""The page at /chatmend/ and the capture behind it (proxy/page.py, proxy/capture.py), through
the proxy with the aiohttp client; tests/proxy/test_page_browser.py loads it in Chromium."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from structlog.testing import capture_logs

from proxy.capture import Bodies, CaptureConfig, Entry, Recent
from proxy.config import ConfigError, parse_config
from proxy.page import diff
from tests.conftest import ProxyFactory
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
    from proxy.page import allowed

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


def test_the_diff_aligns_items_and_marks_what_changed() -> None:
    before = [{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]
    after = [{"a": 1}, {"b": 20}, {"d": 4}, {"e": 5}]
    rows = diff(before, after)
    # Oracle: every item of each side appears once, in order; equal rows hold equal items.
    assert [i for _, i, _ in rows if i is not None] == list(range(len(before)))
    assert [j for _, _, j in rows if j is not None] == list(range(len(after)))
    for tag, i, j in rows:
        if tag == "equal":
            assert i is not None and j is not None and before[i] == after[j]
    assert ("equal", 0, 0) in rows and ("equal", 3, 2) in rows
    assert {tag for tag, _, _ in rows} >= {"changed", "added"}
