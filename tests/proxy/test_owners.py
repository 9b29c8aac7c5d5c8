"""Sessions kept by one worker (proxy/relay/owners.py, ``prefix_cache.route_sessions``).

The session key, read from the bodies of growing sessions of every API; the relay between two
apps in this process (each on its own unix socket, as two workers are), byte for byte and
streamed; an owner that cannot be reached; and ``chatmend serve --workers 2`` (and ``3``)
itself, with the kernel made to scatter reconnecting clients over the workers (all but one
stopped while that one accepts): without routing each session is missed and held by every
worker it lands on, with it by its owner only.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from proxy.config import parse_config
from proxy.relay.credentials import request_scope
from proxy.relay.owners import WINDOW, Relay, Workers, history_start
from proxy.server.app import create_app
from proxy.server.appkeys import PREFIX_KEY, RECENT_KEY, RELAY_KEY
from tests.conftest import base_url
from tests.proxy.test_operate import Serving, serving
from tests.sessions import session

Server = Callable[..., Awaitable[TestServer]]
Client = Callable[..., Awaitable[TestClient[Any, Any]]]
KEY = "sk-test-owners"
HEADERS = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
PATH = "/v1/chat/completions"


def _system_then(user: str, *more: dict[str, Any]) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": user},
        *more,
    ]
    return {"model": "m", "messages": messages, "stream": False}


def test_a_growing_session_keeps_its_key_and_sessions_sharing_a_prompt_differ() -> None:
    for workload in ("clean", "stuck", "clean-spaced"):
        bodies = session(60, workload, seed=11)
        assert len({history_start(body, "messages") for body in bodies}) == 1, workload
    first = orjson.dumps(_system_then("fix the test"))
    later = orjson.dumps(
        _system_then(
            "fix the test",
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"},
        )
    )
    other = orjson.dumps(_system_then("write the docs"))
    assert history_start(first, "messages") == history_start(later, "messages")
    assert history_start(first, "messages") != history_start(other, "messages")
    # Responses and Messages: their lists, spaced or not, a string input has no history
    responses = {"model": "m", "input": [{"role": "developer", "content": "p"}, {"role": "user"}]}
    start = history_start(json.dumps(responses).encode(), "input")
    assert start == '{"role": "developer", "content": "p"}, {"role": "user"}'
    assert history_start(b'{"model":"m","input":"hello"}', "input") is None
    messages = {"system": "p", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9}
    assert history_start(orjson.dumps(messages), "messages") == '{"role":"user","content":"hi"}'
    assert history_start(b'{"messages":[]}', "messages") is None
    assert history_start(b'{"messages":[{"role":', "messages") is None
    assert history_start(b"not json", "messages") is None


def test_a_first_message_past_the_window_is_keyed_by_its_start() -> None:
    huge = "x" * (2 * WINDOW)
    one = orjson.dumps({"messages": [{"role": "user", "content": huge}]})
    two = orjson.dumps(
        {"messages": [{"role": "user", "content": huge}, {"role": "assistant", "content": "a"}]}
    )
    start = history_start(one, "messages")
    assert start is not None and len(start) == WINDOW
    assert start == history_start(two, "messages")


def test_the_owner_depends_on_the_credential_scope() -> None:
    workers = Workers(Path("/nonexistent"), 64, 0)
    body = orjson.dumps(_system_then("same history"))
    owners = {workers.owner(("default", "chat", f"scope-{n}"), body, "messages") for n in range(40)}
    assert len(owners) > 1  # another client's identical history is another session
    assert workers.owner(("default", "chat", None), b"{}", "messages") is None


@pytest.fixture
def sockets() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="cm-owners-"))  # a unix socket path is short
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def _upstream(
    aiohttp_server: Server, seen: list[Any] | None = None, pause: float = 0.0
) -> str:
    """A lenient upstream: a fixed completion, or an SSE stream when the body asks for one
    (``pause`` seconds between its events); ``seen``: each request's headers, appended."""

    async def answer(request: web.Request) -> web.StreamResponse:
        if seen is not None:
            seen.append(request.headers.copy())
        body = await request.json()
        if not body.get("stream"):
            return web.json_response({"choices": [{"message": {"content": "ok"}}]})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index in range(5):
            await response.write(f"data: {index}\n\n".encode())
            await asyncio.sleep(pause)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return base_url(await aiohttp_server(app))


def _owned_by(workers: Workers, upstream: str, index: int) -> dict[str, Any]:
    """A chat body whose session worker ``index`` keeps, for this test's credential."""
    scope = request_scope(upstream, CIMultiDict(HEADERS))
    for n in range(100):
        payload = _system_then(f"task {n}")
        if workers.owner(("default", "chat", scope), orjson.dumps(payload), "messages") == index:
            return payload
    raise AssertionError("no session for that worker")


@asynccontextmanager
async def _worker_app(
    upstream: str, workers: Workers, **more: Any
) -> AsyncIterator[tuple[web.Application, web.AppRunner]]:
    routing = {"upstream": {"url": upstream}, "prefix_cache": {"route_sessions": True}}
    config = parse_config({**routing, **more})
    app = create_app(config)
    app[RELAY_KEY] = Relay(workers)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    await web.UnixSite(runner, workers.path(workers.index)).start()
    try:
        yield app, runner
    finally:
        await app[RELAY_KEY].close()
        await runner.cleanup()


async def _relaying(
    aiohttp_client: Client, upstream: str, workers: Workers
) -> tuple[web.Application, Any]:
    """The worker a client reached, routing sessions (its relay to its peers closed with it),
    and that client."""
    app = create_app(
        parse_config({"upstream": {"url": upstream}, "prefix_cache": {"route_sessions": True}})
    )
    app[RELAY_KEY] = Relay(workers)
    app.on_cleanup.append(_close_relay)
    return app, await aiohttp_client(app)


async def test_a_session_another_worker_keeps_is_answered_by_it_byte_for_byte(
    aiohttp_server: Server, aiohttp_client: Client, sockets: Path
) -> None:
    upstream = await _upstream(aiohttp_server)
    here, there = Workers(sockets, 2, 0), Workers(sockets, 2, 1)
    async with _worker_app(upstream, there) as (owner_app, _runner):
        local_app, client = await _relaying(aiohttp_client, upstream, here)
        payload = _owned_by(here, upstream, 1)
        for stream in (False, True):
            payload["stream"] = stream
            response = await client.post(PATH, data=orjson.dumps(payload), headers=HEADERS)
            assert response.status == 200
            body = await response.read()
            if stream:
                assert response.headers["Content-Type"] == "text/event-stream"
                assert body == b"".join(f"data: {i}\n\n".encode() for i in range(5)) + (
                    b"data: [DONE]\n\n"
                )
            else:
                assert orjson.loads(body) == {"choices": [{"message": {"content": "ok"}}]}
            assert "X-Chatmend-Request-Id" in response.headers  # the owner's own answer
        # the owner read both (the second from the first's prefix); this worker none
        assert owner_app[PREFIX_KEY].counts == {"hit": 1, "miss": 1, "skip": 0}
        assert local_app[PREFIX_KEY].counts == {"hit": 0, "miss": 0, "skip": 0}
        # its own sessions it serves itself
        mine = _owned_by(here, upstream, 0)
        assert (await client.post(PATH, data=orjson.dumps(mine), headers=HEADERS)).status == 200
        assert local_app[PREFIX_KEY].counts["miss"] == 1
        metrics = await (await client.get("/metrics")).text()
        assert 'chatmend_worker_handovers_total{result="relayed"} 2.0' in metrics


async def test_the_owner_records_the_client_that_sent_a_relayed_request(
    aiohttp_server: Server, aiohttp_client: Client, sockets: Path
) -> None:
    """The owner of a session hears its request over a unix socket, which has no peer address:
    the relaying worker names its client's (``X-Chatmend-Relayed-For``), and the owner's
    page records that client, not an empty one. The header is the workers' own: a client's
    is not believed (the relaying worker replaces it), and the upstream never gets it."""
    seen: list[Any] = []
    upstream = await _upstream(aiohttp_server, seen)
    here, there = Workers(sockets, 2, 0), Workers(sockets, 2, 1)
    async with _worker_app(upstream, there, ui={"enabled": True}) as (owner_app, _runner):
        _, client = await _relaying(aiohttp_client, upstream, here)
        payload = _owned_by(here, upstream, 1)
        forged = {**HEADERS, "X-Chatmend-Relayed-For": "203.0.113.9"}
        for headers in (HEADERS, forged):
            response = await client.post(PATH, data=orjson.dumps(payload), headers=headers)
            assert response.status == 200
            entry = owner_app[RECENT_KEY].find(response.headers["X-Chatmend-Request-Id"])
            assert entry is not None and entry.client == "127.0.0.1"
            assert "X-Chatmend-Relayed-For" not in seen[-1]
        assert len(seen) == 2 and owner_app[PREFIX_KEY].counts["hit"] == 1  # the owner's


async def test_the_owner_records_a_relayed_client_that_left_mid_stream(
    aiohttp_server: Server, aiohttp_client: Client, sockets: Path
) -> None:
    """A client that leaves a relayed stream: the owner hears the relay's socket close, and
    records the request when it is done, when that socket is gone. The client it names is the
    one the relaying worker named when the request came, not an empty one (a hostile review
    found the address read too late)."""
    upstream = await _upstream(aiohttp_server, pause=0.5)
    here, there = Workers(sockets, 2, 0), Workers(sockets, 2, 1)
    async with _worker_app(upstream, there, ui={"enabled": True}) as (owner_app, _runner):
        _, client = await _relaying(aiohttp_client, upstream, here)
        payload = {**_owned_by(here, upstream, 1), "stream": True}
        response = await client.post(PATH, data=orjson.dumps(payload), headers=HEADERS)
        request_id = response.headers["X-Chatmend-Request-Id"]
        await response.content.readany()
        response.close()  # the client leaves after the first event
        for _ in range(100):
            entry = owner_app[RECENT_KEY].find(request_id)
            if entry is not None:
                break
            await asyncio.sleep(0.05)
        assert entry is not None and entry.outcome == "client_disconnected"
        assert entry.client == "127.0.0.1"


async def test_an_owner_that_cannot_be_reached_leaves_the_request_where_it_landed(
    aiohttp_server: Server, aiohttp_client: Client, sockets: Path
) -> None:
    upstream = await _upstream(aiohttp_server)
    here = Workers(sockets, 2, 0)  # worker 1 never listened: restarting, or draining
    app = create_app(
        parse_config({"upstream": {"url": upstream}, "prefix_cache": {"route_sessions": True}})
    )
    app[RELAY_KEY] = Relay(here)
    app.on_cleanup.append(_close_relay)
    client = await aiohttp_client(app)
    payload = _owned_by(here, upstream, 1)
    response = await client.post(PATH, data=orjson.dumps(payload), headers=HEADERS)
    assert response.status == 200
    assert app[PREFIX_KEY].counts["miss"] == 1
    metrics = await (await client.get("/metrics")).text()
    assert 'chatmend_worker_handovers_total{result="unreachable"} 1.0' in metrics


async def test_routing_off_serves_every_request_where_it_landed(
    aiohttp_server: Server, aiohttp_client: Client, sockets: Path
) -> None:
    upstream = await _upstream(aiohttp_server)
    here = Workers(sockets, 2, 0)
    app = create_app(parse_config({"upstream": {"url": upstream}}))  # route_sessions: false
    app[RELAY_KEY] = Relay(here)
    app.on_cleanup.append(_close_relay)
    client = await aiohttp_client(app)
    payload = _owned_by(here, upstream, 1)
    assert (await client.post(PATH, data=orjson.dumps(payload), headers=HEADERS)).status == 200
    assert app[PREFIX_KEY].counts["miss"] == 1
    assert "chatmend_worker_handovers_total{" not in await (await client.get("/metrics")).text()


async def _close_relay(app: web.Application) -> None:
    await app[RELAY_KEY].close()


# --- chatmend serve --workers 2 -----------------------------------------------------------


async def _scattered(url: str, pids: list[int], bodies: list[list[bytes]]) -> None:
    """Each step of every session on a new connection, the steps to each worker in turn: the
    others are stopped (SIGSTOP) while the running one accepts them, then let go."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:

        async def post(body: bytes) -> None:
            async with http.post(url + PATH, data=body, headers=HEADERS) as response:
                assert response.status == 200, await response.text()
                await response.read()

        for step in range(len(bodies[0])):
            stopped = [pid for n, pid in enumerate(pids) if n != step % len(pids)]
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            try:
                sent = [asyncio.ensure_future(post(one[step])) for one in bodies]
                # served by the running worker, unless relayed to a stopped one
                await asyncio.wait(sent, timeout=2.0)
            finally:
                for pid in stopped:
                    os.kill(pid, signal.SIGCONT)
            await asyncio.gather(*sent)


async def _counts(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as http:
        text = await (await http.get(url + "/metrics")).text()
    found = {"hit": 0.0, "miss": 0.0, "relayed": 0.0, "unreachable": 0.0, "entries": 0.0}
    for line in text.splitlines():
        name = line.split(" ")[0]
        if name.startswith(("chatmend_prefix_reads_total", "chatmend_worker_handovers_total")):
            found[name.split('"')[1]] = float(line.split()[-1])
        elif name == "chatmend_prefix_cache_entries":
            found["entries"] = float(line.split()[-1])
    return found


@pytest.mark.slow
@pytest.mark.parametrize("served", [(False, 2), (True, 2), (True, 3)], ids=str)
async def test_reconnecting_sessions_keep_their_worker_with_routing(
    tmp_path: Path,
    aiohttp_server: Server,
    served: tuple[bool, int],
    sockets: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    route, workers = served  # routing on or off, over so many workers
    monkeypatch.setenv("TMPDIR", str(sockets))  # where the supervisor makes the workers' sockets
    upstream = await _upstream(aiohttp_server)
    config = tmp_path / "chatmend.yaml"
    config.write_text(
        f"upstream: {{url: '{upstream}'}}\nprefix_cache: {{route_sessions: {str(route).lower()}}}\n"
    )
    sessions = [session(30, "clean", seed=300 + n)[:3] for n in range(4)]  # each worker once
    async with serving(config, "--workers", str(workers)) as proxy:
        (started,) = await _wait_for(proxy, "workers_started")
        await _wait_for(proxy, "proxy_started", workers)
        for _ in range(200):  # every worker listens for its peers
            if len(list(sockets.glob("chatmend-workers-*/worker-*.sock"))) == workers:
                break
            await asyncio.sleep(0.05)
        await _scattered(proxy.url, started["pids"], sessions)
        counts = await _counts(proxy.url)
        proxy.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proxy.process.wait(), 15) == 0
    requests = sum(len(one) for one in sessions)
    assert counts["hit"] + counts["miss"] == requests
    if route:  # each session read by its owner only: missed once, held once
        assert counts["miss"] == len(sessions)
        assert counts["entries"] == len(sessions)
        assert counts["relayed"] > 0 and counts["unreachable"] == 0
        assert len(started["pids"]) == workers
    else:  # each session landed on both workers: missed by each, held by each
        assert counts["miss"] == 2 * len(sessions)
        assert counts["entries"] == 2 * len(sessions)
        assert counts["relayed"] == 0


def _events(proxy: Serving, name: str) -> list[dict[str, Any]]:
    """``proxy``'s log lines of event ``name``, whole lines only (a worker may be writing one)."""
    found = []
    for line in proxy.log.read_bytes().splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if event.get("event") == name:
            found.append(event)
    return found


async def _wait_for(proxy: Serving, name: str, count: int = 1) -> list[dict[str, Any]]:
    for _ in range(300):
        if len(found := _events(proxy, name)) >= count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {name} event in {proxy.log.read_text()}")


def _workers_of(supervisor: int) -> list[int]:
    return [
        int(pid)
        for pid in Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    ]


async def _listening(directory: Path) -> None:
    """Until both workers' sockets take connections (a replaced worker's file stays behind
    until its successor binds it again)."""
    for _ in range(200):
        paths = list(directory.glob("chatmend-workers-*/worker-*.sock"))
        taken = 0
        for path in paths:
            try:
                _, writer = await asyncio.open_unix_connection(str(path))
            except OSError:
                continue
            writer.close()
            taken += 1
        if taken == 2:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the workers' sockets do not take connections")


@pytest.mark.slow
async def test_routing_survives_a_replaced_worker_and_a_reload_turns_it_off(
    tmp_path: Path, aiohttp_server: Server, sockets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(sockets))
    upstream = await _upstream(aiohttp_server)
    config = tmp_path / "chatmend.yaml"
    config.write_text(f"upstream: {{url: '{upstream}'}}\nprefix_cache: {{route_sessions: true}}\n")
    first = [session(30, "clean", seed=400 + n)[:3] for n in range(4)]
    then = [session(30, "clean", seed=500 + n)[:3] for n in range(4)]
    async with serving(config, "--workers", "2") as proxy:
        (started,) = await _wait_for(proxy, "workers_started")
        await _wait_for(proxy, "proxy_started", 2)
        os.kill(started["pids"][0], signal.SIGKILL)  # replaced, on the same socket path
        await _wait_for(proxy, "proxy_started", 3)
        await _listening(sockets)
        pids = _workers_of(proxy.process.pid)
        assert len(pids) == 2 and started["pids"][0] not in pids
        await _scattered(proxy.url, pids, first)
        routed = await _counts(proxy.url)
        assert routed["miss"] == len(first) and routed["unreachable"] == 0
        assert routed["relayed"] > 0

        config.write_text(f"upstream: {{url: '{upstream}'}}\n")  # route_sessions: false
        proxy.process.send_signal(signal.SIGHUP)
        await _wait_for(proxy, "config_reloaded", 2)
        await _scattered(proxy.url, pids, then)
        scattered = await _counts(proxy.url)
        assert scattered["miss"] - routed["miss"] == 2 * len(then)  # each worker missed each
        assert scattered["relayed"] == routed["relayed"]
        proxy.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proxy.process.wait(), 15) == 0
    assert not list(sockets.glob("chatmend-workers-*"))  # removed by the supervisor
