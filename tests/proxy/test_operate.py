"""Operating chatmend: hot reload on SIGHUP, --workers, graceful drain on SIGTERM.

The in-process tests call the reload directly; the others run `chatmend serve` as a real
process (the signals, the forked workers and the drain only exist there) in front of an
upstream served by the test itself on loopback.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import ConfigError, parse_config
from proxy.server.app import RUNTIME_KEY, create_app, planner_of
from proxy.server.reload import reload_config
from tests.conftest import base_url
from tests.proxy.test_cli import CHATMEND, free_port, wait_listening
from tests.transcripts import BROKEN, chat

Server = Callable[..., Awaitable[TestServer]]
Client = Callable[..., Awaitable[TestClient[Any, Any]]]
BROKEN_BODY = chat(BROKEN["empty_tool_calls"])


def _fail() -> Any:
    raise ConfigError("mode: must be enforce or report, got 'bogus'")


async def test_reload_swaps_the_config_and_rejects_an_invalid_one(
    aiohttp_client: Client,
) -> None:
    app = create_app(parse_config({"upstream": {"url": "http://127.0.0.1:9"}}))
    client = await aiohttp_client(app)
    before = planner_of(app)
    app_listen = app[RUNTIME_KEY].current.config.listen
    new = parse_config(
        {"upstream": {"url": "http://127.0.0.1:9"}, "profile": "kimi", "listen": {"port": 1}}
    )
    with capture_logs() as logs:
        assert reload_config(app, lambda: new)
        assert not reload_config(app, _fail)
    assert planner_of(app) is not before
    running = app[RUNTIME_KEY].current.config
    assert running.default.profile == "kimi" and running.listen == app_listen  # bound at start-up
    reloaded, failed = logs
    assert reloaded["event"] == "config_reloaded" and reloaded["generation"] == 1
    assert reloaded["restart_needed"] == ["listen"]
    assert failed["event"] == "config_reload_failed" and "mode:" in failed["error"]
    assert (await (await client.get("/readyz")).json())["config_generation"] == 1
    metrics = await (await client.get("/metrics")).text()
    assert 'chatmend_config_reloads_total{result="ok"} 1.0' in metrics
    assert 'chatmend_config_reloads_total{result="failed"} 1.0' in metrics


async def test_a_request_in_flight_finishes_on_the_config_it_started_with(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    arrived = asyncio.Event()

    def upstream(name: str, delay: float) -> web.Application:
        async def answer(request: web.Request) -> web.Response:
            arrived.set()
            await asyncio.sleep(delay)
            return web.json_response({"upstream": name})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        return app

    old = base_url(await aiohttp_server(upstream("old", 0.3)))
    new = base_url(await aiohttp_server(upstream("new", 0.0)))
    app = create_app(parse_config({"upstream": {"url": old}}))
    client = await aiohttp_client(app)
    in_flight = asyncio.ensure_future(client.get("/v1/models"))
    await arrived.wait()
    assert reload_config(app, lambda: parse_config({"upstream": {"url": new}}))
    assert await (await in_flight).json() == {"upstream": "old"}
    assert await (await client.get("/v1/models")).json() == {"upstream": "new"}


@dataclass
class Serving:
    url: str
    process: asyncio.subprocess.Process
    log: Path

    def events(self, name: str) -> list[dict[str, Any]]:
        lines = self.log.read_bytes().splitlines()
        return [e for e in map(orjson.loads, lines) if e.get("event") == name]

    async def wait_for(self, name: str, count: int = 1) -> list[dict[str, Any]]:
        for _ in range(200):
            if len(found := self.events(name)) >= count:
                return found
            await asyncio.sleep(0.05)
        raise AssertionError(f"no {name} event in {self.log.read_text()}")


@asynccontextmanager
async def serving(config: Path, *flags: str) -> AsyncIterator[Serving]:
    """`chatmend serve --config CONFIG FLAGS` until it accepts connections; its log in a file."""
    port = free_port()
    log = config.with_suffix(".log")
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            str(CHATMEND), "serve", "--config", str(config), "--port", str(port), *flags,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    try:
        await wait_listening(port)
        yield Serving(f"http://127.0.0.1:{port}", process, log)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _changes(http: aiohttp.ClientSession, url: str) -> str:
    async with http.post(f"{url}/v1/chat/completions", data=BROKEN_BODY) as response:
        await response.read()
        return response.headers["X-Chatmend-Changes"]


async def _upstream(aiohttp_server: Server, chunk_delay: float = 0.0) -> str:
    """A lenient upstream: any chat request gets a 10-chunk SSE stream, ``chunk_delay`` apart."""

    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index in range(10):
            await response.write(f"data: {index}\n\n".encode())
            await asyncio.sleep(chunk_delay)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", stream)
    return base_url(await aiohttp_server(app))


async def _streaming_config(
    tmp_path: Path, aiohttp_server: Server, *, chunk_delay: float, drain: float
) -> Path:
    """A config in front of a 10-chunk stream ``chunk_delay`` apart, with ``drain_seconds``."""
    config = tmp_path / "chatmend.yaml"
    upstream = await _upstream(aiohttp_server, chunk_delay=chunk_delay)
    config.write_text(f"upstream: {{url: '{upstream}'}}\ndrain_seconds: {drain}\n")
    return config


@pytest.mark.slow
async def test_sighup_switches_report_to_enforce_and_keeps_serving_on_a_bad_file(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    config = tmp_path / "chatmend.yaml"
    upstream = await _upstream(aiohttp_server)
    config.write_text(f"upstream: {{url: '{upstream}'}}\nmode: report\n")
    async with serving(config) as proxy, aiohttp.ClientSession() as http:
        assert await _changes(http, proxy.url) == "0; reported=1"
        config.write_text(f"upstream: {{url: '{upstream}'}}\nmode: enforce\n")
        proxy.process.send_signal(signal.SIGHUP)
        await proxy.wait_for("config_reloaded")
        assert await _changes(http, proxy.url) == "1; rules=empty-tool-calls"
        config.write_text("mode: [not a mode\n")
        proxy.process.send_signal(signal.SIGHUP)
        (failed,) = await proxy.wait_for("config_reload_failed")
        assert "invalid YAML" in failed["error"]
        assert await _changes(http, proxy.url) == "1; rules=empty-tool-calls"
        proxy.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proxy.process.wait(), 10) == 0


@pytest.mark.slow
async def test_sigterm_drains_a_stream_in_flight_then_exits(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    config = await _streaming_config(tmp_path, aiohttp_server, chunk_delay=0.1, drain=5)
    async with serving(config) as proxy, aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/v1/chat/completions", data=BROKEN_BODY) as stream:
            first = await stream.content.readline()
            proxy.process.send_signal(signal.SIGTERM)
            await proxy.wait_for("shutdown_draining")
            # the listener is closed: a new connection is refused while the stream goes on
            try:
                async with aiohttp.ClientSession() as fresh:
                    await fresh.get(f"{proxy.url}/healthz")
                raise AssertionError("a draining proxy accepted a new connection")
            except aiohttp.ClientConnectionError:
                pass
            rest = await stream.read()
        assert first == b"data: 0\n" and rest.endswith(b"data: [DONE]\n\n")
        assert await asyncio.wait_for(proxy.process.wait(), 10) == 0
        (done,) = proxy.events("request_done")
        assert done["outcome"] == "completed" and done["status"] == 200


@pytest.mark.slow
async def test_the_drain_deadline_cuts_a_stream_that_runs_past_it(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    config = await _streaming_config(tmp_path, aiohttp_server, chunk_delay=1.0, drain=0.5)
    async with serving(config) as proxy, aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/v1/chat/completions", data=BROKEN_BODY) as stream:
            await stream.content.readline()
            started = asyncio.get_running_loop().time()
            proxy.process.send_signal(signal.SIGTERM)
            try:
                rest = await stream.read()
            except aiohttp.ClientPayloadError:
                rest = b""
            assert not rest.endswith(b"[DONE]\n\n")  # cut, and visibly so
        assert await asyncio.wait_for(proxy.process.wait(), 5) == 0
        assert asyncio.get_running_loop().time() - started < 4


@pytest.mark.slow
async def test_workers_share_the_port_the_metrics_and_the_reloads(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    config = tmp_path / "chatmend.yaml"
    upstream = await _upstream(aiohttp_server)
    config.write_text(f"upstream: {{url: '{upstream}'}}\nmode: report\n")
    async with serving(config, "--workers", "2") as proxy:
        (started,) = await proxy.wait_for("workers_started")
        workers = started["pids"]
        assert len(workers) == 2
        await proxy.wait_for("proxy_started", 2)
        for _ in range(12):  # a fresh connection each: the kernel spreads them over both
            async with aiohttp.ClientSession() as http:
                assert await _changes(http, proxy.url) == "0; reported=1"
        assert {e["worker"] for e in proxy.events("request_done")} <= {0, 1}
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(f"{proxy.url}/metrics")).text()
        # /metrics on either worker sums both
        line = 'chatmend_requests_total{api="chat",profile="deepseek",route="default",status="200"}'
        assert f"{line} 12.0" in metrics

        config.write_text(f"upstream: {{url: '{upstream}'}}\nmode: enforce\n")
        proxy.process.send_signal(signal.SIGHUP)
        await proxy.wait_for("config_reloaded", 2)  # once per worker
        for _ in range(8):
            async with aiohttp.ClientSession() as http:
                assert await _changes(http, proxy.url) == "1; rules=empty-tool-calls"

        # a worker that dies is replaced
        os.kill(workers[0], signal.SIGKILL)
        (exited,) = await proxy.wait_for("worker_exited")
        assert exited["pid"] == workers[0]
        await proxy.wait_for("proxy_started", 3)

        proxy.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proxy.process.wait(), 10) == 0
        assert proxy.events("workers_stopped")[0]["exit_code"] == 0
