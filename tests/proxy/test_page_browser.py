"""The page at /chatmend/ in a real browser: Debian's headless Chromium (``make chromium``
installs it; ``make test`` runs it) loads the list and the diff view of a repaired request
served by a real chatmend on loopback, and the test reads what the browser rendered
(``--dump-dom``: the DOM after parsing, so markup smuggled in a message would show as elements).
No network beyond loopback, no browser download."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from proxy.config import parse_config
from proxy.server.app import create_app
from tests.conftest import base_url
from tests.proxy.test_page import HOSTILE, ON, REPAIRED
from tests.transcripts import chat

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium not installed: `make chromium` (Debian: apt-get install chromium) "
        "to run the page's browser test",
    ),
]


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.ids.update(value for name, value in attrs if name == "id" and value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


async def rendered(url: str, profile: Path) -> _Dom:
    """What Chromium rendered at ``url``."""
    assert CHROMIUM is not None
    process = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--dump-dom",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, f"chromium exited with {process.returncode}"
    dom = _Dom()
    dom.feed(out.decode())
    return dom


async def test_the_page_and_the_diff_view_in_chromium(
    fake_server: TestServer,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    tmp_path: Path,
) -> None:
    config = parse_config(ON, default_upstream=base_url(fake_server), env={})
    server = await aiohttp_server(create_app(config), host="127.0.0.1")
    async with aiohttp.ClientSession() as session:
        response = await session.post(
            str(server.make_url("/v1/chat/completions")), data=chat(REPAIRED)
        )
        assert response.status == 200
        request_id = response.headers["X-Chatmend-Request-Id"]
        rules = response.headers["X-Chatmend-Changes"].split("rules=")[1].split(",")
    index = await rendered(str(server.make_url("/chatmend/")), tmp_path / "a")
    text = " ".join(index.text)
    assert "recent" in index.ids and request_id in text
    assert all(rule in text for rule in rules)
    view = await rendered(str(server.make_url(f"/chatmend/request/{request_id}")), tmp_path / "b")
    text = "".join(view.text)
    assert "diff" in view.ids and view.tags.count("pre") >= 6  # both sides, item by item
    # The hostile message rendered as text: the browser built no img and no script from it.
    assert HOSTILE in text and "img" not in view.tags and "script" not in view.tags
    assert "messages[1] changed" in text and '"tool_calls": []' in text
    assert all(rule in text for rule in rules)
