"""The diff view of each API says what the rules did, and no more, in the rendered page (issue
40): real broken histories sent through a running chatmend by the official SDKs (``openai``
for chat and Responses, ``anthropic`` for Messages) to ``chatmend emulate`` (a strict
DeepSeek), then the request's view loaded in headless Chromium (``--dump-dom``: the DOM after
parsing) and read row by row.

The oracle is this file's: the history each test sends and, written out by hand, what the
rules must have done to it (which item moved where, which id was renamed to what, which items
stayed); the page must show exactly those rows, a moved output as moved, a renamed id with
both names marked, every index naming its side, and nothing added or removed that was not."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from aiohttp.test_utils import TestServer

from proxy.config import parse_config
from proxy.server.app import create_app
from tests.conftest import base_url
from tools.emulate.app import create_emulator

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium not installed: `make chromium` (Debian: apt-get install chromium) "
        "to run the page's browser tests",
    ),
]

ON = {"ui": {"enabled": True}, "capture": {"enabled": True}, "profile": "deepseek"}
Server = Callable[..., Awaitable[TestServer]]


@dataclass
class Row:
    kind: str
    cells: list[str] = field(default_factory=list)
    marked: list[list[str]] = field(default_factory=list)  # per cell: the text of its <mark>s


class _Page(HTMLParser):
    """The rendered page: its text, the rows of the diff table (kind, each cell's text and
    marked text), and the lines of the summary."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.rows: list[Row] = []
        self.summary: list[str] = []
        self._in: list[str] = []  # open elements of interest
        self._table: str | None = None
        self._mark = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id")
        elif tag == "tr" and self._table == "diff" and a.get("class"):
            self.rows.append(Row(str(a["class"])))
        elif tag == "td" and self._table == "diff" and self.rows:
            self.rows[-1].cells.append("")
            self.rows[-1].marked.append([])
        elif tag == "li" and "rule" in (a.get("class") or ""):
            self.summary.append("")
        elif tag == "mark":
            self._mark = True
            if self.rows and self.rows[-1].marked:
                self.rows[-1].marked[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag == "mark":
            self._mark = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._table == "diff" and self.rows and self.rows[-1].cells:
            self.rows[-1].cells[-1] += data
            if self._mark:
                self.rows[-1].marked[-1][-1] += data
        elif self.summary and self._table is None:
            self.summary[-1] += data


async def rendered(url: str, profile: Path) -> _Page:
    """What Chromium rendered at ``url`` (1280x900, as a newcomer's screen)."""
    assert CHROMIUM is not None
    process = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={profile}",
        "--dump-dom",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, f"chromium exited with {process.returncode}"
    page = _Page()
    page.feed(out.decode())
    return page


async def _chatmend(aiohttp_server: Server, config: dict[str, Any] = ON) -> TestServer:
    emulator = await aiohttp_server(create_emulator(profile="deepseek"))
    parsed = parse_config(config, default_upstream=base_url(emulator), env={})
    return await aiohttp_server(create_app(parsed), host="127.0.0.1")


def _kinds(page: _Page) -> list[str]:
    return [row.kind for row in page.rows[1:]]  # the first row: the other keys


def _row_of(page: _Page, text: str) -> Row:
    found = [row for row in page.rows if any(text in cell for cell in row.cells)]
    assert len(found) == 1, (text, [r.kind for r in found])
    return found[0]


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


async def test_chat_a_moved_result_reads_as_moved_and_a_renamed_id_shows_both(
    aiohttp_server: Server, tmp_path: Path
) -> None:
    server = await _chatmend(aiohttp_server)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "look around"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1", "ls", {})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_1", "cat", {"path": "a.txt"})],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_a", "read", {"p": "x"}), call("call_b", "read", {"p": "y"})],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "X"},
        {"role": "user", "content": "also, hurry"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Y"},
    ]
    async with openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key="sk-test", max_retries=0
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="deepseek-chat",
            messages=history,  # type: ignore[arg-type]
        )
    request_id = raw.headers["X-Chatmend-Request-Id"]
    assert "duplicate-tool-call-ids" in raw.headers["X-Chatmend-Changes"]
    page = await rendered(str(server.make_url(f"/chatmend/request/{request_id}")), tmp_path)
    # What the rules did, and only that: the second call_1 and its result renamed where they
    # stand, the result for call_b moved back before the user's message (after messages[7]
    # is it; the user's message now after messages[8]); nothing added, nothing removed.
    assert sorted(_kinds(page)) == sorted(["same"] * 6 + ["changed", "changed", "moved"])
    moved = next(row for row in page.rows if row.kind == "moved")
    assert "before messages[8]" in moved.cells[0] and "now after messages[7]" in moved.cells[0]
    assert "after messages[7]" in moved.cells[1] and "was before messages[8]" in moved.cells[1]
    assert '"call_b"' in moved.cells[1]
    renamed = [row for row in page.rows if row.kind == "changed"]
    for row, (i, j) in zip(renamed, [(3, 3), (4, 4)], strict=True):
        assert f"before messages[{i}]" in row.cells[0] and f"after messages[{j}]" in row.cells[1]
        assert '"call_1"' in row.marked[0] and any("call_1_d2" in m for m in row.marked[1])
        assert "id renamed: call_1 \u2192 call_1_d2" in row.cells[1]
    # One line per rule above the bodies, each index said on its side, with the reason.
    lines = {line.split(" ", 1)[0]: line for line in page.summary}
    assert set(lines) == {"duplicate-tool-call-ids", "displaced-tool-results"}, page.summary
    assert "before messages[3] \u2192 after messages[3]" in lines["duplicate-tool-call-ids"]
    assert "before messages[8] \u2192 after messages[7]" in lines["displaced-tool-results"]
    assert all("Why: " in line for line in page.summary)


async def test_responses_a_moved_output_reads_as_moved_and_a_renamed_call_id_shows_both(
    aiohttp_server: Server, tmp_path: Path
) -> None:
    server = await _chatmend(aiohttp_server)
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "weather in Paris, then Lyon"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c1", "output": "rain"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city":"Lyon"}',
        },
        {"type": "message", "role": "user", "content": "and?"},
    ]
    async with openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key="sk-test", max_retries=0
    ) as client:
        raw = await client.responses.with_raw_response.create(
            model="deepseek-chat",
            input=items,  # type: ignore[arg-type]
        )
    request_id = raw.headers["X-Chatmend-Request-Id"]
    page = await rendered(str(server.make_url(f"/chatmend/request/{request_id}")), tmp_path)
    # The call for Lyon is renamed c1 -> c1_d2 where it stood (before input[4], after
    # input[3]), its output renamed and moved after it; Paris's call is never paired with
    # Lyon's; nothing added or removed.
    assert sorted(_kinds(page)) == sorted(["same"] * 4 + ["changed", "moved"])
    lyon = _row_of(page, '\\"city\\":\\"Lyon')
    assert lyon.kind == "changed"
    assert "before input[4]" in lyon.cells[0] and "after input[3]" in lyon.cells[1]
    assert 'city\\":\\"Paris' not in "".join(lyon.cells)
    assert '"c1"' in lyon.marked[0] and '"c1_d2"' in lyon.marked[1]
    rain = _row_of(page, "rain")
    assert rain.kind == "moved"
    assert "before input[3]" in rain.cells[0] and "now after input[4]" in rain.cells[0]
    assert "was before input[3]" in rain.cells[1] and '"c1_d2"' in rain.marked[1]
    assert "id renamed: c1 \u2192 c1_d2" in rain.cells[1]
    lines = {line.split(" ", 1)[0]: line for line in page.summary}
    assert set(lines) == {"responses-call-ids", "responses-early-outputs"}, page.summary
    assert "before input[3] \u2192 after input[4]" in lines["responses-early-outputs"]


async def test_messages_moved_tool_results_read_as_moved_and_a_renamed_id_shows_both(
    aiohttp_server: Server, tmp_path: Path
) -> None:
    server = await _chatmend(aiohttp_server)

    def use(tool_id: str, command: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}

    def result(tool_id: str, text: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": tool_id, "content": text}

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Listing."}, use("toolu_01", "ls")],
        },
        {"role": "user", "content": [{"type": "text", "text": "never mind"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [result("toolu_01", "a.txt b.txt")]},
        {"role": "assistant", "content": [use("toolu_01", "cat a.txt")]},
        {"role": "user", "content": [result("toolu_01", "hello")]},
    ]
    async with anthropic.AsyncAnthropic(
        base_url=str(server.make_url("")).rstrip("/"), api_key="sk-test", max_retries=0
    ) as client:
        raw = await client.messages.with_raw_response.create(
            model="deepseek-chat",
            max_tokens=256,
            messages=messages,  # type: ignore[arg-type]
        )
    request_id = raw.headers["X-Chatmend-Request-Id"]
    page = await rendered(str(server.make_url(f"/chatmend/request/{request_id}")), tmp_path)
    # What the rules did: the result for toolu_01 moved home into "never mind" (before
    # messages[2], after messages[2]) and the message it came in dropped (before messages[4]);
    # the reused toolu_01 renamed toolu_01_d2 in its call and its result; the call's turn,
    # after "ok" once that message went, rejoined into "ok" (before messages[5] gone, its
    # tool_use moved to after messages[3]). No user message paired with an assistant one.
    assert sorted(_kinds(page)) == sorted(["same"] * 2 + ["changed"] * 3 + ["removed"] * 2)
    never_mind = _row_of(page, "never mind")
    assert never_mind.kind == "changed"
    assert "before messages[2]" in never_mind.cells[0]
    assert "after messages[2]" in never_mind.cells[1]
    assert "moved here from before messages[4].content[0]" in never_mind.cells[1]
    (emptied,) = [r for r in page.rows if r.kind == "removed" and "a.txt b.txt" in r.cells[0]]
    assert "before messages[4]" in emptied.cells[0]
    assert "moved to after messages[2].content[0]" in emptied.cells[0]
    (cat,) = [r for r in page.rows if r.kind == "removed" and "cat a.txt" in r.cells[0]]
    assert "before messages[5]" in cat.cells[0]
    assert "(tool_use toolu_01_d2) moved to after messages[3].content[1]" in cat.cells[0]
    ok = _row_of(page, '"ok"')
    assert ok.kind == "changed" and "moved here from before messages[5].content[0]" in ok.cells[1]
    hello = _row_of(page, '"hello"')
    assert hello.kind == "changed"
    assert "before messages[6]" in hello.cells[0] and "after messages[4]" in hello.cells[1]
    assert '"toolu_01"' in hello.marked[0] and '"toolu_01_d2"' in hello.marked[1]
    assert "id renamed: toolu_01 \u2192 toolu_01_d2" in hello.cells[1]
    for row in page.rows[1:]:
        if row.kind in ("changed", "moved"):
            roles = [cell.split('"role": "')[1].split('"')[0] for cell in row.cells]
            assert roles[0] == roles[1], row
    lines = {line.split(" ", 1)[0]: line for line in page.summary}
    assert set(lines) == {"messages-duplicate-tool-use-ids", "messages-tool-result-pairing"}
    assert "before messages[2] \u2192 after messages[2]" in lines["messages-tool-result-pairing"]
    assert (
        "before messages[5] \u2192 gone, its blocks moved to after messages[3]"
        in lines["messages-duplicate-tool-use-ids"]
    )
    assert "before messages[6] \u2192 after messages[4]" in lines["messages-duplicate-tool-use-ids"]


async def test_a_recovered_request_shows_the_refusal_and_its_class(
    aiohttp_server: Server, aiohttp_client: Any, tmp_path: Path
) -> None:
    """Under ``passthrough`` no rule runs up front: the emulated DeepSeek refuses the history,
    recovery reads the refusal, repairs and resends. The page quotes the refusal the provider
    sent (read here from the emulator itself) and the class recovery read it as (the
    ``X-Chatmend-Recovered`` header's)."""
    emulator = await aiohttp_server(create_emulator(profile="deepseek"))
    config = parse_config(
        {**ON, "profile": "passthrough"}, default_upstream=base_url(emulator), env={}
    )
    server = await aiohttp_server(create_app(config), host="127.0.0.1")
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok", "tool_calls": []},
        {"role": "user", "content": "next"},
    ]
    direct = await (await aiohttp_client(emulator)).post(
        "/v1/chat/completions", json={"model": "deepseek-chat", "messages": history}
    )
    assert direct.status == 400
    said = (await direct.json())["error"]["message"]
    async with openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key="sk-test", max_retries=0
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="deepseek-chat",
            messages=history,  # type: ignore[arg-type]
        )
    recovered = raw.headers["X-Chatmend-Recovered"]
    error_class = recovered.split("class=")[1]
    request_id = raw.headers["X-Chatmend-Request-Id"]
    page = await rendered(str(server.make_url(f"/chatmend/request/{request_id}")), tmp_path)
    text = "".join(page.text)
    assert "Recovered: the provider refused the request as first sent" in text
    assert said in text and f"read as {error_class}" in text
    rule = recovered.split(";")[0].split(",")[0]
    assert any(line.startswith(rule) for line in page.summary), page.summary


def _pixels(png: bytes) -> set[tuple[int, int, int]]:
    """The colours of a PNG (8-bit RGB or RGBA, as Chromium writes its screenshots): decoded
    here with zlib, the five row filters undone."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, data, header = 8, b"", b""
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, chunk = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        header = chunk if kind == b"IHDR" else header
        data += chunk if kind == b"IDAT" else b""
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    size = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(data), width * size
    previous = bytearray(stride)
    seen: set[tuple[int, int, int]] = set()
    for y in range(height):
        line = raw[y * (stride + 1) : (y + 1) * (stride + 1)]
        method, row = line[0], bytearray(line[1:])
        for x in range(stride):
            a = row[x - size] if x >= size else 0
            b = previous[x]
            c = previous[x - size] if x >= size else 0
            if method == 1:
                row[x] = (row[x] + a) & 255
            elif method == 2:
                row[x] = (row[x] + b) & 255
            elif method == 3:
                row[x] = (row[x] + (a + b) // 2) & 255
            elif method == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[x] = (row[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        seen.update(tuple(row[x : x + 3]) for x in range(0, stride, size))  # type: ignore[misc]
        previous = row
    return seen


async def test_at_1280x900_the_summary_and_the_first_change_are_above_the_fold(
    aiohttp_server: Server, tmp_path: Path
) -> None:
    """A screenshot at 1280x900 holds the summary's colour (one line per rule) and a changed
    item's marked value (the id renamed): what changed is seen without scrolling."""
    server = await _chatmend(aiohttp_server)
    history = [
        {"role": "user", "content": "look around"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1", "ls", {})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1", "cat", {})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]
    async with openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key="sk-test", max_retries=0
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="deepseek-chat",
            messages=history,  # type: ignore[arg-type]
        )
    url = str(server.make_url(f"/chatmend/request/{raw.headers['X-Chatmend-Request-Id']}"))
    shot = tmp_path / "shot.png"
    assert CHROMIUM is not None
    process = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        url,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert await asyncio.wait_for(process.wait(), timeout=60) == 0
    colours = _pixels(shot.read_bytes())
    summary = (0xEE, 0xF3, 0xFF)  # #what-changed's background (proxy/server/page.py)
    marked = (0x9F, 0xDF, 0x9F)  # mark.ins: the renamed id's new name
    assert summary in colours and marked in colours
