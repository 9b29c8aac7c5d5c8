"""Issue 27: no input, from a client or an upstream, stalls or kills the process. Each test
replays an attack of the second round against a real `chatmend serve` (a hostile fake upstream
where the attack is the upstream's), then checks the bound the fix sets.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import json
import os
import signal
import statistics
import time
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.proxy.test_hostile import Recorder, _config, _post, _probe, _recorder
from tests.proxy.test_operate import serving
from tests.transcripts import BROKEN, chat

Server = Callable[..., Awaitable[TestServer]]

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
KEY = {"Authorization": "Bearer sk-client-a"}  # a credential: the response is observed
#: What a hostile upstream streams after its first deltas: far more than the observer's bound.
ENDLESS_BYTES = 96 * 1024 * 1024
PIECE = 64 * 1024


def _status_kib(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` memory field: ``VmRSS`` now, ``VmHWM`` its peak so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _chat_event(delta: dict[str, Any]) -> bytes:
    return _sse({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]})


def _endless_chat() -> tuple[list[bytes], bytes]:
    """A thinking turn whose arguments never end: reasoning, a call, then ENDLESS_BYTES of
    argument pieces (the first events, and the piece repeated)."""
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}
    head = [
        _chat_event({"reasoning_content": "I call f."}),
        _chat_event({"tool_calls": [call]}),
    ]
    more = {"index": 0, "function": {"arguments": "a" * PIECE}}
    return head, _chat_event({"tool_calls": [more]})


def _endless_messages() -> tuple[list[bytes], bytes]:
    """The same on the Messages front: a thinking block, a tool_use, endless input_json_delta."""
    thinking = {"type": "thinking", "thinking": "I call f.", "signature": "sig"}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    head = [
        _sse({"type": "message_start", "message": {"id": "msg_1", "content": []}}),
        _sse({"type": "content_block_start", "index": 0, "content_block": thinking}),
        _sse({"type": "content_block_stop", "index": 0}),
        _sse({"type": "content_block_start", "index": 1, "content_block": tool}),
    ]
    piece = {"type": "input_json_delta", "partial_json": "a" * PIECE}
    return head, _sse({"type": "content_block_delta", "index": 1, "delta": piece})


async def _hostile_upstream(aiohttp_server: Server, head: list[bytes], piece: bytes) -> str:
    async def endless(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in head:
            await response.write(event)
        for _ in range(ENDLESS_BYTES // len(piece)):
            await response.write(piece)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/{tail:.*}", endless)
    return base_url(await aiohttp_server(app))


@pytest.mark.slow
@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_an_endless_observed_stream_keeps_the_process_alive_and_small(
    api: str, tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: 2 s of an endless arguments stream grew RSS 54 -> 783 MB, then orjson segfaulted
    on the giant string at the stream's end. Now the observer gives up at its bound, counted,
    and the client still gets every byte."""
    head, piece = _endless_chat() if api == "chat" else _endless_messages()
    url = await _hostile_upstream(aiohttp_server, head, piece)
    config = tmp_path / "chatmend.yaml"
    config.write_text(f"upstream: {{url: '{url}'}}\nprofile: deepseek\n")
    if api == "chat":
        path = CHAT
        body: dict[str, Any] = {"model": "deepseek-v4-pro", "stream": True, "messages": []}
        body["messages"] = [{"role": "user", "content": "go"}]
    else:
        path = MESSAGES
        body = {
            "model": "deepseek-v4-pro",
            "stream": True,
            "max_tokens": 1024,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [{"role": "user", "content": "go"}],
        }
    expected = sum(map(len, head)) + len(piece) * (ENDLESS_BYTES // len(piece))
    async with serving(config) as proxy, aiohttp.ClientSession() as http:
        before = _status_kib(proxy.process.pid, "VmRSS")
        received = 0
        async with http.post(proxy.url + path, json=body, headers=KEY) as response:
            assert response.status == 200
            async for chunk in response.content.iter_any():
                received += len(chunk)
        grown = _status_kib(proxy.process.pid, "VmHWM") - before  # the peak, not what is left
        assert grown < 48 * 1024, f"RSS grew {grown} KiB"  # the bound is 8 MiB kept
        metrics = await (await http.get(proxy.url + "/metrics")).text()
        (event,) = await proxy.wait_for("limit_exceeded")
        assert proxy.process.returncode is None
    assert received == expected  # the relay went on untouched
    assert event["limit"] == "observed_response" and event["bound"] == "observed_bytes"
    assert 'chatmend_limits_total{limit="observed_response"} 1.0' in metrics


# --- Item 2: the offload pool, fair and bounded ------------------------------------------------


def _unanswered_calls(count: int) -> bytes:
    """A turn of ``count`` tool calls no result answers: ``unanswered-tool-calls`` adds one
    result per call, ``count`` changes."""
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in range(count)
    ]
    return chat(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "user", "content": "next"},
        ]
    )


@pytest.mark.slow
async def test_a_body_with_a_hundred_thousand_changes_stalls_no_one(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: /healthz stalled 250-400 ms after the worker returned (0.29 s of per-change metric
    increments, 0.57 s unpickling 100k changes on the loop). Now the worker sends back the
    first 1000 changes and counts the rest by rule and action; unpickling runs off the loop."""
    recorder, url = await _recorder(aiohttp_server)
    body = _unanswered_calls(100_000)  # 7.9 MB
    async with serving(_config(tmp_path, url)) as proxy:
        await asyncio.sleep(1)  # the first worker is up (started with the server)
        (status, _, headers), latencies = await _probe(
            proxy.url, _post_headers(proxy.url + CHAT, body)
        )
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(proxy.url + "/metrics")).text()
        (event,) = await proxy.wait_for("payload_sanitized")
    assert status == 200
    # Here the slowest probe takes 10-65 ms (156 ms before; 250-400 ms in the issue); the bound
    # leaves room for a loaded machine, the capped changes below are what changed.
    assert statistics.median(latencies) < 0.1, latencies
    assert max(latencies) < 0.25, latencies
    sent = orjson.loads(recorder.requests[0][3])
    assert sum(m["role"] == "tool" for m in sent["messages"]) == 100_000
    assert headers["X-Chatmend-Changes"].startswith("100000;")
    assert event["count"] == 100_000 and event["changes"][-1] == "...[99901 more]"
    assert 'rule="unanswered-tool-calls"} 100000.0' in metrics


def _tiny_and_broken(megabytes: float) -> bytes:
    """Megabytes of tiny messages (slow to repair) ending in a turn a rule repairs."""
    tiny = [{"role": "user", "content": "hi"}] * int(megabytes * 1024 * 1024 // 31)
    return chat(tiny + BROKEN["empty_tool_calls"])


def _repaired(sent: bytes) -> bool:
    return b'"tool_calls":[]' not in sent


def _children(pid: int) -> list[int]:
    """The offload workers of a server process (not multiprocessing's resource tracker)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    found = []
    for child in map(int, text.split()):
        with contextlib.suppress(OSError):
            if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
    return found


@pytest.mark.slow
async def test_small_bodies_are_repaired_while_big_ones_hold_the_pool(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: with one offload process, three 40 MB bodies made five 70 KB ones wait the full
    deadline and go out unrepaired. Now big bodies hold at most half the pool (two workers by
    default): the small ones are repaired while the big ones still run."""
    recorder, url = await _recorder(aiohttp_server)
    big = gzip.compress(_tiny_and_broken(12))
    small = _tiny_and_broken(0.07)
    assert 65536 < len(small) < 8 * 65536
    # A deadline no body meets on a loaded machine: the order is what is checked.
    config = _config(tmp_path, url, "offload_body_bytes: 65536\nsanitize_deadline: 60\n")
    gz = {"Content-Encoding": "gzip"}
    async with serving(config) as proxy:
        # Both workers up (the second starts when a job would wait): steady state is measured.
        await asyncio.gather(*(_post(proxy.url + CHAT, small, {}) for _ in range(2)))
        for _ in range(100):
            if len(_children(proxy.process.pid)) == 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)
        del recorder.requests[:]
        loop = asyncio.get_running_loop()
        done: dict[str, list[float]] = {"big": [], "small": []}
        started = loop.time()

        async def send(kind: str, body: bytes, headers: dict[str, str]) -> int:
            status, _ = await _post(proxy.url + CHAT, body, headers)
            done[kind].append(loop.time() - started)
            return status

        bigs = [asyncio.create_task(send("big", big, gz)) for _ in range(3)]
        await asyncio.sleep(0.3)  # the big ones are in
        smalls = [send("small", small, {}) for _ in range(5)]
        statuses = await asyncio.gather(*smalls, *bigs)
    assert statuses == [200] * 8
    assert all(_repaired(sent) for *_, sent in recorder.requests)  # none went unrepaired
    assert max(done["small"]) < sorted(done["big"])[1], done  # before the second big one


@pytest.mark.slow
async def test_a_job_past_its_deadline_ends_in_its_worker(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: an abandoned job kept running after its deadline, holding the worker. Now it is
    interrupted there, counted at once (long before the ~4 s the job would take), and the same
    worker repairs the next body."""
    recorder, url = await _recorder(aiohttp_server)
    slow = gzip.compress(_unanswered_calls(300_000))  # 24 MB, about 4 s of repair
    quick = _tiny_and_broken(1.1)  # over offload_body_bytes: the same worker, about 0.05 s
    config = _config(tmp_path, url, "offload_processes: 1\nsanitize_deadline: 1\n")
    interrupted = "chatmend_offload_interrupted_total 1.0"
    async with serving(config) as proxy, aiohttp.ClientSession() as http:
        await asyncio.sleep(1)
        (worker,) = _children(proxy.process.pid)
        status, _ = await _post(proxy.url + CHAT, slow, {"Content-Encoding": "gzip"})
        assert status == 200  # past the deadline: as it came
        loop = asyncio.get_running_loop()
        answered = loop.time()
        while interrupted not in await (await http.get(proxy.url + "/metrics")).text():
            assert loop.time() - answered < 2, "the job ran on past its deadline"
            await asyncio.sleep(0.05)
        status, _ = await _post(proxy.url + CHAT, quick, {})
        assert status == 200 and _children(proxy.process.pid) == [worker]
    assert recorder.requests[0][3] == slow  # as it came
    assert _repaired(recorder.requests[1][3])  # by the same worker, within its deadline


@pytest.mark.slow
async def test_a_worker_killed_mid_job_fails_only_its_request_and_is_replaced(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: a worker killed mid-job failed its request and the next one, uncounted."""
    recorder, url = await _recorder(aiohttp_server)
    slow = gzip.compress(_tiny_and_broken(24))
    quick = _tiny_and_broken(1.5)
    config = _config(tmp_path, url, "offload_processes: 1\n")
    async with serving(config) as proxy:
        await asyncio.sleep(1)
        (worker,) = _children(proxy.process.pid)
        first = asyncio.create_task(_post(proxy.url + CHAT, slow, {"Content-Encoding": "gzip"}))
        await asyncio.sleep(0.5)  # inflated and in the worker
        os.kill(worker, signal.SIGKILL)
        assert (await first)[0] == 200  # fail-open: as it came
        assert (await _post(proxy.url + CHAT, quick, {}))[0] == 200
        assert worker not in _children(proxy.process.pid)
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(proxy.url + "/metrics")).text()
        (event,) = await proxy.wait_for("offload_worker_replaced")
    assert recorder.requests[0][3] == slow  # as it came
    assert _repaired(recorder.requests[1][3])
    assert event["reason"] == "died"
    assert 'chatmend_offload_replaced_total{reason="died"} 1.0' in metrics


async def _post_headers(url: str, body: bytes) -> tuple[int, bytes, dict[str, str]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=io.BytesIO(body), headers=KEY) as response,
    ):
        return response.status, await response.read(), dict(response.headers)


def test_a_capped_result_lists_the_first_changes_and_counts_the_rest() -> None:
    from proxy.config import parse_config
    from rules.providers.sanitize import capped, sanitize_body

    result = sanitize_body(_unanswered_calls(50), parse_config({}).planner())
    cut = capped(result, 10)
    assert cut.changes == result.changes[:10] and cut.body == result.body
    assert cut.change_count == len(result.changes) == 50
    assert cut.tally() == result.tally()
    assert capped(result, 50) is result


# --- Item 3: an aggregate budget for the bodies in flight ---------------------------------------


@pytest.mark.slow
async def test_sixteen_gzip_bombs_at_once_are_refused_with_bounded_memory(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: each body was capped at max_body_bytes decoded, but not their sum: 4 concurrent
    gzip bombs added 260-330 MB, 16 would add a gigabyte. Now past inflight_body_bytes a big
    body gets a 503 with Retry-After (counted) and what they hold together stays bounded."""
    recorder, url = await _recorder(aiohttp_server)
    deflater = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1024 * 1024)
    bomb = b"".join(deflater.compress(zeros) for _ in range(64)) + deflater.flush()
    assert len(bomb) < 300 * 1024  # 64 MiB of zeros: under offload_body_bytes as sent
    extra = "max_body_bytes: 16777216\ninflight_body_bytes: 33554432\n"
    async with serving(_config(tmp_path, url, extra)) as proxy:
        before = _status_kib(proxy.process.pid, "VmRSS")

        async def bomb_once() -> tuple[int, str | None]:
            async with (
                aiohttp.ClientSession() as http,
                http.post(
                    proxy.url + CHAT, data=bomb, headers={"Content-Encoding": "gzip"}
                ) as response,
            ):
                await response.read()
                return response.status, response.headers.get("Retry-After")

        answers = await asyncio.gather(*(bomb_once() for _ in range(16)))
        grown = _status_kib(proxy.process.pid, "VmHWM") - before
        clean = chat([{"role": "user", "content": "hi"}])
        assert (await _post(proxy.url + CHAT, clean, {}))[0] == 200  # all given back
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(proxy.url + "/metrics")).text()
    assert {status for status, _ in answers} <= {413, 503}
    refused = [retry for status, retry in answers if status == 503]
    assert len(refused) >= 8 and set(refused) == {"2"}, answers
    assert f'chatmend_limits_total{{limit="inflight_body_bytes"}} {len(refused)}.0' in metrics
    assert len(recorder.requests) == 1  # only the clean one
    assert grown < 80 * 1024, f"RSS grew {grown} KiB"  # 16 x 16 MiB without the budget


async def test_a_big_body_past_the_budget_gets_a_503_a_small_one_never(
    aiohttp_server: Server, aiohttp_client: Callable[..., Awaitable[Any]]
) -> None:
    from proxy.config import parse_config
    from proxy.server.app import create_app
    from proxy.server.appkeys import INFLIGHT_KEY

    recorder, url = await _recorder(aiohttp_server)
    config = {"upstream": {"url": url}, "offload_body_bytes": 65536}
    app = create_app(parse_config({**config, "inflight_body_bytes": 1024 * 1024}))
    client = await aiohttp_client(app)
    big = _tiny_and_broken(2)
    response = await client.post(
        CHAT, data=io.BytesIO(big), headers={"Content-Length": str(len(big))}
    )
    assert response.status == 503 and response.headers["Retry-After"] == "2"
    assert (await response.json())["error"]["code"] == "overloaded"
    app[INFLIGHT_KEY].held += 1024 * 1024  # others hold it all: a small body still goes
    assert (await client.post(CHAT, data=_tiny_and_broken(0.03))).status == 200
    app[INFLIGHT_KEY].held -= 1024 * 1024
    assert app[INFLIGHT_KEY].held == 0  # every request gave its bytes back
    assert len(recorder.requests) == 1


def test_inflight_body_bytes_is_validated() -> None:
    from proxy.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=r"^inflight_body_bytes:"):
        parse_config({"inflight_body_bytes": 0})


# --- Item 4: the supervisor of --workers --------------------------------------------------------


def _alive(pid: int) -> bool:
    """Running (not exited, not a zombie waiting for a reaper)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.slow
async def test_no_worker_outlives_a_killed_supervisor(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: a SIGKILLed supervisor left its workers serving (`make test` left two listening for
    14 minutes). Now they die with it (parent-death signal, and the pipe they watch), and so do
    their offload workers."""
    _, url = await _recorder(aiohttp_server)
    async with serving(_config(tmp_path, url), "--workers", "2") as proxy:
        (started,) = await proxy.wait_for("workers_started")
        await proxy.wait_for("proxy_started", 2)
        workers: list[int] = started["pids"]
        for _ in range(100):  # each server process starts one as its app starts
            offload = [pid for worker in workers for pid in _children(worker)]
            if len(offload) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(offload) == 2
        proxy.process.kill()
        await proxy.process.wait()
        await asyncio.sleep(0.5)
        assert not [pid for pid in workers if _alive(pid)]  # the server processes at once
        # An offload worker still starting (importing chatmend) exits as soon as it is up.
        for _ in range(100):
            if not any(map(_alive, offload)):
                break
            await asyncio.sleep(0.05)
        assert not [pid for pid in offload if _alive(pid)]


@pytest.mark.slow
async def test_a_burst_of_sighups_neither_deadlocks_nor_stops_the_supervisor(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Was: the SIGHUP handler loaded YAML, compiled and logged inside the handler (structlog's
    lock is not reentrant). Now the handler only notes the signal; the loop reloads."""
    _, url = await _recorder(aiohttp_server)
    config = _config(tmp_path, url)
    async with serving(config, "--workers", "2") as proxy:
        await proxy.wait_for("proxy_started", 2)
        for _ in range(30):
            proxy.process.send_signal(signal.SIGHUP)
            await asyncio.sleep(0.005)
        await proxy.wait_for("config_reloaded", 2)
        clean = chat([{"role": "user", "content": "hi"}])
        assert (await _post(proxy.url + CHAT, clean, {}))[0] == 200
        proxy.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proxy.process.wait(), 10) == 0
    assert proxy.events("workers_stopped")[0]["exit_code"] == 0


# --- Item 5: a removed custody route refuses ----------------------------------------------------

UPSTREAM_KEY = "sk-upstream-held-0123456789"
CLIENT_TOKEN = "chatmend-client-token-abcdef"


@pytest.mark.slow
async def test_a_custody_route_removed_on_reload_refuses_with_404(
    tmp_path: Path, aiohttp_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: its prefix became a pass-through to the default upstream, its clients' tokens
    with it. Now it answers 404 until a route takes the prefix again."""
    default, default_url = await _recorder(aiohttp_server)
    held, held_url = await _recorder(aiohttp_server)
    monkeypatch.setenv("KEY", UPSTREAM_KEY)
    monkeypatch.setenv("TOKENS", CLIENT_TOKEN)
    route = (
        f"routes:\n  admin:\n    upstream: {{url: '{held_url}', api_key_env: KEY}}\n"
        "    client_tokens_env: TOKENS\n"
    )
    config = _config(tmp_path, default_url, route)
    token = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    clean = chat([{"role": "user", "content": "hi"}])
    async with serving(config) as proxy:
        assert (await _post(proxy.url + "/admin" + CHAT, clean, token))[0] == 200
        assert held.requests[0][2]["Authorization"] == f"Bearer {UPSTREAM_KEY}"

        _config(tmp_path, default_url)  # the route is gone
        proxy.process.send_signal(signal.SIGHUP)
        (reloaded,) = await proxy.wait_for("config_reloaded")
        assert reloaded["retired"] == ["/admin"]
        for path in ("/admin" + CHAT, "/ADMIN/v1/models", "/admin"):
            status, body = await _post(proxy.url + path, clean, token)
            assert status == 404 and orjson.loads(body)["error"]["code"] == "route_removed"
        assert (await _post(proxy.url + "/administrator" + CHAT, clean, {}))[0] == 200
        assert (await _post(proxy.url + CHAT, clean, {}))[0] == 200

        _config(tmp_path, default_url, route)  # back: served again
        proxy.process.send_signal(signal.SIGHUP)
        await proxy.wait_for("config_reloaded", 2)
        assert (await _post(proxy.url + "/admin" + CHAT, clean, token))[0] == 200
    sent = [headers for _, _, headers, _ in default.requests]
    assert len(sent) == 2 and all(CLIENT_TOKEN not in str(h) for h in sent)
    assert len(held.requests) == 2


# --- Item 6: the lows ------------------------------------------------------------------------


async def test_a_repaired_body_nested_past_255_levels_goes_as_it_came_counted(
    aiohttp_server: Server, aiohttp_client: Callable[..., Awaitable[Any]]
) -> None:
    """orjson reads 1024 levels but writes 255: a body the rules repaired that nests deeper
    cannot be written back. It goes as it came, as before, but no longer silently."""
    from structlog.testing import capture_logs

    from proxy.config import parse_config
    from proxy.server.app import create_app

    recorder, url = await _recorder(aiohttp_server)
    client = await aiohttp_client(create_app(parse_config({"upstream": {"url": url}})))
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    messages = [{"role": "user", "content": "go", "metadata": deep}, *BROKEN["empty_tool_calls"]]
    body = json.dumps({"model": "deepseek-chat", "messages": messages}).encode()
    with capture_logs() as logs:
        response = await client.post(CHAT, data=body)
    assert response.status == 200 and recorder.requests[0][3] == body
    assert response.headers["X-Chatmend-Changes"] == "0"
    (event,) = [e for e in logs if e["event"] == "limit_exceeded"]
    assert event["limit"] == "unserializable"
    metrics = await (await client.get("/metrics")).text()
    assert 'chatmend_limits_total{limit="unserializable"} 1.0' in metrics


async def test_a_signed_block_with_a_duplicate_key_is_never_written_back(
    aiohttp_server: Server, aiohttp_client: Callable[..., Awaitable[Any]]
) -> None:
    """Written back by orjson, `{"thinking": "A", "signature": "s", "thinking": "B"}` would keep
    "B" under a signature that may sign "A": a body the rules would rewrite goes as it came."""
    from proxy.config import parse_config
    from proxy.server.app import create_app

    recorder, url = await _recorder(aiohttp_server)
    client = await aiohttp_client(create_app(parse_config({"upstream": {"url": url}})))
    signed = b'{"type":"thinking","thinking":"A","signature":"EqQBsig","thinking":"B"}'
    tool = b'{"type":"tool_use","id":"toolu_01","name":"ls","input":{}}'
    body = (
        b'{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":['
        b'{"role":"user","content":"go"},{"role":"assistant","content":[' + signed + b"," + tool
        + b']},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01",'
        b'"content":"ok"},{"type":"text","text":""}]}]}'
    )  # fmt: skip
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "sk-a"}
    response = await client.post(MESSAGES, data=body, headers=headers)
    assert response.status == 200 and recorder.requests[0][3] == body
    metrics = await (await client.get("/metrics")).text()
    assert 'chatmend_limits_total{limit="duplicate_signed_keys"} 1.0' in metrics
    # Without the duplicate, the same body is repaired (the empty text block goes).
    clean = body.replace(b',"thinking":"B"', b"")
    assert (await client.post(MESSAGES, data=clean, headers=headers)).status == 200
    assert recorder.requests[1][3] != clean


async def _raw(port: int, head: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode())
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


@pytest.mark.slow
async def test_the_header_limits_are_the_documented_ones(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """SECURITY.md's numbers, against `chatmend serve`: one header line is read up to 64 KiB
    (aiohttp's max_field_size, set by chatmend; its own default is 8,190), all header lines
    together up to 32 KiB (chatmend's 431), the request line up to 8,190 bytes; past those
    aiohttp answers a plain-text 400. An upstream's response header over 8,190 bytes is a 502."""

    async def big_header(request: web.Request) -> web.Response:
        return web.Response(text="{}", headers={"X-Big": "b" * 9000})

    recorder = Recorder()  # an upstream whose own limits are chatmend's (aiohttp's are 8,190)
    limits = {"max_field_size": 65536, "max_line_size": 16384}
    url = base_url(await aiohttp_server(recorder.app(), **limits))
    app = web.Application()
    app.router.add_get("/big", big_header)
    big_url = base_url(await aiohttp_server(app))
    config = _config(tmp_path, url, f"routes:\n  big:\n    upstream: {{url: '{big_url}'}}\n")
    async with serving(config) as proxy:
        port = int(proxy.url.rsplit(":", 1)[1])

        def request(path: str, value: str) -> str:
            return f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Big: {value}\r\nConnection: close\r\n\r\n"

        assert (await _raw(port, request("/v1/models", "a" * 9000))).startswith(b"HTTP/1.1 200")
        answer = await _raw(port, request("/v1/models", "a" * 40_000))
        assert answer.startswith(b"HTTP/1.1 431") and b"request_headers_too_large" in answer
        answer = await _raw(port, request("/v1/models", "a" * 70_000))
        assert answer.startswith(b"HTTP/1.0 400") and b"text/plain" in answer.lower()
        answer = await _raw(port, request("/v1/" + "m" * 8200, "a"))
        assert answer.startswith(b"HTTP/1.0 400")
        answer = await _raw(port, request("/big/big", "a"))
        assert answer.startswith(b"HTTP/1.1 502")
    assert len(recorder.requests) == 1


def _stubborn(body: bytes, planner: Any) -> None:
    """A job that ignores its deadline (as a long C call would)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGALRM})
    time.sleep(30)


def _size(body: bytes, planner: Any) -> int:
    return len(body)


@pytest.mark.slow
async def test_a_worker_that_ignores_its_deadline_or_fails_is_replaced() -> None:
    from proxy.config import parse_config
    from proxy.observe.metrics import Metrics
    from proxy.relay.offload import KILL_GRACE, Offloader

    metrics = Metrics()
    planner = parse_config({}).planner()
    offload = Offloader(1, metrics=metrics)
    offload.start()
    try:
        await asyncio.sleep(1)  # the worker is up
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await offload.call(_stubborn, b"{}", planner, deadline=0.3)
        await asyncio.sleep(KILL_GRACE + 0.3)
        sample = metrics.registry.get_sample_value
        assert sample("chatmend_offload_replaced_total", {"reason": "stuck"}) == 1.0
        assert await offload.call(_size, b"abc", planner) == 3  # a new worker took it
        with pytest.raises(AttributeError, match="pickle"):  # a job that cannot cross
            await offload.call(lambda body, planner: 0, b"abc", planner)
        assert sample("chatmend_offload_replaced_total", {"reason": "failed"}) == 1.0
        assert await offload.call(_size, b"abcd", planner) == 4
    finally:
        offload.close()
