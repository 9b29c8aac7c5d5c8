"""Issue 36: the fourth hostile round, each finding replayed against a real `chatmend serve` (the
page, the Host header, memory, gzip bombs; the probe's findings are in tests/proxy/test_probe.py,
against real servers too), each with a control that shows the test can fail: the prober sees a
stall when the server is stopped, a Host that names the server gets the page, a path forwarded
reaches the upstream, a bigger bound lets the memory grow past the one tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import statistics
import sys
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestServer

from tests.proxy.test_cli import CHATMEND, free_port
from tests.proxy.test_hardening import _status_kib
from tests.proxy.test_hostile import _config, _recorder
from tests.proxy.test_operate import Serving, serving
from tests.transcripts import chat

Server = Callable[..., Awaitable[TestServer]]

CHAT = "/v1/chat/completions"
PAGE = "ui: {enabled: true}\ncapture: {enabled: true}\n"


#: /healthz from another process, a new connection per probe, from before the attack starts
#: (it says ``ready`` after its first answer) until after it ends.
PROBER = """
import http.client, json, select, sys, time
host, port = sys.argv[1], int(sys.argv[2])
latencies, stop = [], False
while not stop or len(latencies) < 5:
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host, port, timeout=60)
    connection.request("GET", "/healthz")
    assert connection.getresponse().status == 200
    connection.close()
    latencies.append(time.perf_counter() - started)
    if len(latencies) == 1:
        print("ready", flush=True)
    stop = stop or bool(select.select([sys.stdin], [], [], 0.02)[0])
print(json.dumps(latencies))
"""


async def _probe(url: str, attack: Awaitable[Any]) -> tuple[Any, list[float]]:
    """Run ``attack`` once the prober answers, and the /healthz latencies it measured."""
    host, port = url.removeprefix("http://").split(":")
    prober = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROBER, host, port,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert prober.stdin is not None and prober.stdout is not None
    try:
        assert await prober.stdout.readline() == b"ready\n"
        result = await attack
    finally:
        prober.stdin.close()
        out, _ = await prober.communicate()
    latencies: list[float] = orjson.loads(out)
    return result, latencies


async def _a_stall_is_seen(proxy: Serving) -> None:
    """The control of every latency test here: the prober does see a stall (the server stopped
    for 0.3 s), so a probe that stays fast is the server's doing."""
    pid = proxy.process.pid

    async def stop() -> None:
        await asyncio.sleep(0.1)
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(0.3)
        finally:
            os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(0.1)

    _, latencies = await _probe(proxy.url, stop())
    assert max(latencies) >= 0.25, latencies


def _responsive(latencies: list[float]) -> None:
    """No probe waited on the attack: three in four answer within 10 ms and the median within
    20 ms (a probe takes about 1 ms here; sixteen bombs inflating on the loop made half of them
    wait 20 ms and more), none 250 ms (the room is for a loaded machine: the suite runs on two
    busy cores; a stall on the loop is seconds)."""
    ordered = sorted(latencies)
    assert ordered[(3 * (len(ordered) - 1)) // 4] < 0.01, latencies
    assert statistics.median(latencies) < 0.02, latencies
    assert ordered[-1] < 0.25, latencies


async def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
        return response.status, await response.text()


# --- Finding 1: one view of a captured diff stalled every client --------------------------------


def _issue_body(count: int) -> bytes:
    """The issue's body: ``count`` user messages ``"a"``, every other one followed by an empty
    assistant message the default profile removes (31 KB for 700)."""
    messages: list[Any] = []
    for k in range(count):
        messages.append({"role": "user", "content": "a"})
        if k % 2 == 0:
            messages.append({"role": "assistant", "content": ""})
    return chat(messages)


async def _captured(proxy: Serving, body: bytes) -> str:
    data = io.BytesIO(body)
    async with aiohttp.ClientSession() as http, http.post(proxy.url + CHAT, data=data) as sent:
        assert sent.status == 200 and sent.headers["X-Chatmend-Changes"] != "0"
        return sent.headers["X-Chatmend-Request-Id"]


@pytest.mark.slow
async def test_a_diff_view_stalls_no_one(tmp_path: Path, aiohttp_server: Server) -> None:
    """Was: the view of the issue's 31 KB body stalled /healthz 6.1 s (difflib on the event loop,
    quadratic over equal messages). Now it is aligned in linear time in a worker process."""
    _, url = await _recorder(aiohttp_server)
    async with serving(_config(tmp_path, url, PAGE)) as proxy:
        await asyncio.sleep(1)  # the first worker is up
        await _a_stall_is_seen(proxy)
        request_id = await _captured(proxy, _issue_body(700))

        async def views() -> tuple[int, str]:  # ten in a row: the probes see them all
            for _ in range(9):
                await _get(f"{proxy.url}/chatmend/request/{request_id}")
            return await _get(f"{proxy.url}/chatmend/request/{request_id}")

        (status, html), latencies = await _probe(proxy.url, views())
    _responsive(latencies)
    assert status == 200 and "1050 items before, 700 after: 700 same, 350 removed." in html


def _tiny_and_repaired(megabytes: float) -> bytes:
    """Megabytes of tiny user messages ending in a turn the default profile repairs."""
    tiny = [{"role": "user", "content": "hi"}] * int(megabytes * 1024 * 1024 // 31)
    return chat([*tiny, {"role": "assistant", "content": "ok", "tool_calls": []}])


@pytest.mark.slow
async def test_a_view_of_the_largest_captured_body_stalls_no_one(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """The largest body the capture keeps (before and after within capture.max_bytes, 32 MiB):
    past the alignment's work budget, so the view says so and shows both bodies (their first
    MiB each: what crosses back from the worker stays small) while /healthz answers as usual."""
    _, url = await _recorder(aiohttp_server)
    body = _tiny_and_repaired(15)
    async with serving(_config(tmp_path, url, PAGE)) as proxy:
        await asyncio.sleep(1)
        request_id = await _captured(proxy, body)
        (status, html), latencies = await _probe(
            proxy.url, _get(f"{proxy.url}/chatmend/request/{request_id}")
        )
    _responsive(latencies)
    assert status == 200 and "Shown as they are, not aligned: aligning" in html
    assert html.count("{&quot;role&quot;:&quot;user&quot;,&quot;content&quot;:&quot;hi") > 60_000
    assert html.count(" more bytes not shown)") == 2


# --- Finding 2: the page answered any Host --------------------------------------------------------


@asynccontextmanager
async def _serving_on(config: Path, host: str) -> AsyncIterator[tuple[str, int]]:
    """`chatmend serve` listening on ``host`` (``::1`` included); its address and port."""
    port = free_port()
    log = config.with_suffix(f".{port}.log")
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            str(CHATMEND), "serve", "--config", str(config), "--host", host, "--port", str(port),
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    try:
        for _ in range(200):
            try:
                _, writer = await asyncio.open_connection(host, port)
            except OSError:
                await asyncio.sleep(0.05)
            else:
                writer.close()
                break
        else:
            raise AssertionError(f"nothing listens on [{host}]:{port}: {log.read_text()}")
        yield host, port
    finally:
        process.kill()
        await process.wait()


def _has_ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_a_rebinding_host_gets_neither_the_page_nor_the_probes(
    tmp_path: Path, aiohttp_server: Server, host: str
) -> None:
    """Was: `Host: evil.example` (and `:PORT`, `attacker.test:80`) got 200 with the captured
    text, on 127.0.0.1 and [::1]; /metrics and /readyz too. Now 421; the proxy path still
    answers any Host (clients use whatever name reaches chatmend)."""
    if host == "::1" and not _has_ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    _, url = await _recorder(aiohttp_server)
    secret = "CAPTURED-text-only-the-operator-may-read"
    body = chat([{"role": "user", "content": secret}, {"role": "assistant", "content": ""}])
    async with _serving_on(_config(tmp_path, url, PAGE), host) as (address, port):
        base = f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"
        async with aiohttp.ClientSession() as http:
            async with http.post(base + CHAT, data=body, headers={"Host": "evil.example"}) as sent:
                assert sent.status == 200  # forwarded whatever its Host
                request_id = sent.headers["X-Chatmend-Request-Id"]
            view = f"{base}/chatmend/request/{request_id}"
            named = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
            # The control: a Host naming the server gets the captured text.
            for good in (named, f"localhost:{port}"):
                status, html = await _get(view, {"Host": good})
                assert status == 200 and secret in html, good
                for path in ("/chatmend/", "/metrics", "/readyz"):
                    assert (await _get(base + path, {"Host": good}))[0] == 200
            for evil in ("evil.example", f"evil.example:{port}", "attacker.test:80", "localhost"):
                for target in (view, base + "/chatmend/", base + "/metrics", base + "/readyz"):
                    status, text = await _get(target, {"Host": evil})
                    assert status == 421 and secret not in text, (evil, target)
            assert (await _get(base + "/healthz", {"Host": "evil.example"}))[0] == 200


# --- Finding 5: paths that nearly name the page went upstream with the admin's token -------------


async def _raw_get(port: int, path: str, token: str) -> int:
    """A GET written byte for byte (the path as given, not normalised by a client)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    head = await reader.readline()
    writer.close()
    return int(head.split()[1])


@pytest.mark.slow
async def test_paths_that_nearly_name_the_page_never_reach_the_upstream(
    tmp_path: Path, aiohttp_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: `/chatmend`, `/CHATMEND/`, `/chatmend/request/<id>/` and `/chatmend/request` reached
    the upstream with the page token. Now every path under the page's name that is not one of
    its own gets a 404 from chatmend."""
    recorder, url = await _recorder(aiohttp_server)
    monkeypatch.setenv("UI_TOKEN", "page-token-t0k")
    extra = "ui: {enabled: true, admin_token_env: UI_TOKEN}\n"
    async with serving(_config(tmp_path, url, extra)) as proxy:
        port = int(proxy.url.rsplit(":", 1)[1])
        assert await _raw_get(port, "/v1/models", "page-token-t0k") == 200  # the control
        assert len(recorder.requests) == 1
        near = (
            "/chatmend",
            "/CHATMEND/",
            f"/chatmend/request/{'0' * 32}/",
            "/chatmend/request",
            "/%63hatmend",
            "/%43HATMEND/request/x/y",
        )
        for path in near:
            assert await _raw_get(port, path, "page-token-t0k") == 404, path
        assert await _raw_get(port, "/chatmend/", "page-token-t0k") == 200
    assert len(recorder.requests) == 1


# --- Finding 3: the recent list kept the rules' change details whole ------------------------------


def _renamed_id_body(number: int, id_size: int) -> bytes:
    """A body (about 800 KB with 100 KB ids) whose second turn reuses the first turn's two
    tool-call ids (``id_size`` characters each, their own per body): duplicate-tool-call-ids
    renames them."""
    ids = [f"{number}-{k}-" + "x" * id_size for k in range(2)]

    def turn(text: str) -> list[Any]:
        calls = [
            {"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            for i in ids
        ]
        results = [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids]
        return [
            {"role": "user", "content": text},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *results,
        ]

    pad = "p" * max(0, 800_000 - 8 * id_size)
    return chat([*turn(pad), *turn("again"), {"role": "user", "content": "go on"}])


async def _growth(proxy: Serving, bodies: list[bytes]) -> int:
    """KiB the server's RSS grew by over ``bodies`` (sent one at a time)."""
    pid = proxy.process.pid
    before = _status_kib(pid, "VmRSS")
    async with aiohttp.ClientSession() as http:
        for body in bodies:
            async with http.post(proxy.url + CHAT, data=body) as response:
                assert response.status == 200
                assert "duplicate-tool-call-ids" in response.headers["X-Chatmend-Changes"]
    return _status_kib(pid, "VmRSS") - before


@pytest.mark.slow
@pytest.mark.parametrize("where", ["inline", "worker"])
async def test_the_recent_list_keeps_clipped_changes(
    tmp_path: Path, aiohttp_server: Server, where: str
) -> None:
    """Was: 24 bodies of 800 KB with a renamed 100 KB id kept 0.6-1.25 MB each on the list, capture
    off (repaired in the worker: +182 MB over 20 against +26 MB for the control). Now the change
    details are clipped: the list grows by what the same bodies with short ids cost."""
    _, url = await _recorder(aiohttp_server)
    # The prefix cache off: it keeps each body's parse too (within its own bound).
    extra = "ui: {enabled: true}\nprefix_cache: {enabled: false}\n"
    extra += "offload_body_bytes: 65536\n" if where == "worker" else ""
    async with serving(_config(tmp_path, url, extra)) as proxy:
        await asyncio.sleep(1)
        # Warm up (the worker, the allocator: big ids), then the control: short ids, same size.
        await _growth(proxy, [_renamed_id_body(-n, 100_000) for n in range(1, 9)])
        control = await _growth(proxy, [_renamed_id_body(n, 8) for n in range(48)])
        grown = await _growth(proxy, [_renamed_id_body(n, 100_000) for n in range(48)])
        status, html = await _get(proxy.url + "/chatmend/")
    assert status == 200 and html.count("duplicate-tool-call-ids") >= 96
    # 24 entries kept 15-30 MB before; the bound here leaves room for the allocator's noise.
    assert grown < control + 6 * 1024, f"{grown} KiB against {control} KiB for the control"


# --- Finding 4: the prefix cache held about 5.3x what it charged ----------------------------------


def _tiny_session_body(number: int) -> bytes:
    """A 40 KB body made of tiny containers (one object per 3 bytes), its own per session."""
    content: list[Any] = [{}] * 13_000
    return chat([{"role": "user", "content": content}, {"role": "user", "content": f"{number}"}])


async def _cache_growth(tmp_path: Path, url: str, max_bytes: int, sessions: int) -> int:
    """KiB `chatmend serve` grows by once ``sessions`` sessions (each its own credential) sent
    one tiny-container body each, with a prefix cache of ``max_bytes``."""
    config = _config(tmp_path, url, f"prefix_cache: {{max_bytes: {max_bytes}}}\n")
    async with serving(config) as proxy, aiohttp.ClientSession() as http:
        pid = proxy.process.pid
        async with http.post(proxy.url + CHAT, data=_tiny_session_body(-1)) as warm:
            assert warm.status == 200
        before = _status_kib(pid, "VmRSS")
        for number in range(sessions):
            key = {"Authorization": f"Bearer sk-session-{number}"}
            async with http.post(proxy.url + CHAT, data=_tiny_session_body(number), headers=key):
                pass
        return _status_kib(pid, "VmRSS") - before


@pytest.mark.slow
async def test_the_prefix_cache_holds_what_it_charges(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: bodies of tiny containers held about 5.3x what the cache charged (670 MB at the
    default 128 MiB). Now the charge counts their values: 150 sessions through a 32 MiB cache
    grow the server by less than 1.5 x 32 MiB. The control, 512 MiB: the same sessions grow it
    past that, so the measure sees what the cache holds."""
    _, url = await _recorder(aiohttp_server)
    bound = 32 * 1024 * 1024
    grown = await _cache_growth(tmp_path, url, bound, 150)
    assert grown * 1024 < 1.5 * bound, f"grew {grown} KiB for a {bound // 1024} KiB bound"
    (tmp_path / "control").mkdir()
    control = await _cache_growth(tmp_path / "control", url, 16 * bound, 150)
    assert control * 1024 > 1.5 * bound, f"the control grew {control} KiB"


# --- Finding 7: sixteen gzip bombs made /healthz wait ---------------------------------------------


def _bomb() -> bytes:
    """1 MB of gzip that inflates to 1 GiB of zeros."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1024 * 1024)
    return b"".join(deflater.compress(zeros) for _ in range(1024)) + deflater.flush()


@pytest.mark.slow
async def test_sixteen_gzip_bombs_keep_healthz_answering(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: every bomb refused, none forwarded, but /healthz waited up to 221 ms while they
    inflated (256 KiB steps on the event loop, sixteen of them between two turns of the loop:
    here the median probe took 20 ms). Now each step runs in the inflating threads and the loop
    only counts what it gave: probes take about 1 ms, the slowest 11-32 ms on an idle machine
    (under 100 ms, the issue's bound; the test leaves room for a loaded one)."""
    recorder, url = await _recorder(aiohttp_server)
    bomb = _bomb()
    assert len(bomb) < 1100 * 1024
    async with serving(_config(tmp_path, url)) as proxy:
        await asyncio.sleep(1)
        await _a_stall_is_seen(proxy)

        async def bombs() -> list[int]:
            async def one(http: aiohttp.ClientSession) -> int:
                headers = {"Content-Encoding": "gzip"}
                data = io.BytesIO(bomb)
                async with http.post(proxy.url + CHAT, data=data, headers=headers) as response:
                    await response.read()
                    return response.status

            async with aiohttp.ClientSession() as http:
                return await asyncio.gather(*(one(http) for _ in range(16)))

        statuses, latencies = await _probe(proxy.url, bombs())
    assert set(statuses) <= {413, 503} and len(recorder.requests) == 0
    _responsive(latencies)


def test_no_inflating_step_runs_on_the_event_loop() -> None:
    """The structural side of the bound above: every zlib step of a request body runs in a
    thread other than the event loop's (the control: the whole body is inflated)."""
    import threading
    import zlib as real_zlib

    from proxy.relay import body as body_module

    threads: set[int] = set()
    make = real_zlib.decompressobj

    class Spy:
        def __init__(self, wbits: int) -> None:
            self.inner = make(wbits)

        def decompress(self, data: Any, max_length: int) -> bytes:
            threads.add(threading.get_ident())
            return self.inner.decompress(data, max_length)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    data = orjson.dumps({"messages": [{"role": "user", "content": "x" * 4096}] * 500})
    packed = real_zlib.compress(data)

    async def inflate() -> bytes | None:
        return await body_module.decoded(packed, "deflate", 1 << 30)

    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.setattr(real_zlib, "decompressobj", Spy)
        assert asyncio.run(inflate()) == data
    assert threads and threading.get_ident() not in threads
