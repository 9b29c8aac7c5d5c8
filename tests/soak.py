"""``make soak``: load without loss, against real processes on loopback (not part of make test).

Starts a fake upstream and ``chatmend serve`` as separate processes, then drives hundreds of
concurrent clients for minutes with a mix of clean, broken, streamed and non-chat requests,
plus some whose outcome is an error on purpose (an upstream 429, a body over the limit, a body
that is not JSON, a client that leaves mid-stream) and a hostile mix (issue 15: a gzip bomb,
a history of 1,500 turns reusing one tool-call id, arguments built to make the scanner slow, a
body big enough to be repaired off the event loop). Every request carries a unique marker:

- the upstream records the sha256 of every body it receives, by marker; the driver computes the
  body the rules must produce for *that* request (``sanitize_body`` on the same bytes) and, at
  the end, checks each marker arrived exactly once with exactly that body (or never, for a
  request chatmend must refuse), so a lost, duplicated, retried or mixed-up body cannot hide;
- the upstream echoes the marker into its answer, so a response given to the wrong client
  cannot hide either.

chatmend's open file descriptors and RSS are sampled before, during and after the load; after
the clients leave (and chatmend's idle upstream connections expire) they must return near
their baseline. Exit status 0 only if there were no unexpected errors and every check passed.

    python -m tests.soak [--minutes 3] [--clients 300] [--seed 1]
    python -m tests.soak upstream --port PORT      # the fake upstream alone (used internally)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gzip
import hashlib
import os
import random
import re
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from proxy.config import parse_config
from rules.chat import RULES
from rules.engine.pipeline import default_steps
from rules.providers.sanitize import sanitize_body
from tests.transcripts import BROKEN, CLEAN_BODY

MARKER = re.compile(rb"soak-[0-9a-f]{8}-[0-9]+-[a-z0-9_]+")
#: chatmend's body limit in the soak config: small, so the 413 case costs little to send.
MAX_BODY_BYTES = 512 * 1024
#: Seconds chatmend keeps an idle upstream connection (aiohttp's client keep-alive default).
POOL_IDLE_SECONDS = 15
STREAM_EVENTS = 6


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# The fake upstream (its own process)
# ---------------------------------------------------------------------------------------------


def upstream_app() -> web.Application:
    received: dict[str, list[str]] = {}

    def record(body: bytes, where: bytes = b"") -> str:
        found = MARKER.search(where or body)
        marker = found.group().decode() if found else "unmarked"
        received.setdefault(marker, []).append(sha(body))
        return marker

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        marker = record(body)
        if marker.endswith("-upstream429"):
            return web.json_response(
                {"error": {"message": f"slow down {marker}", "type": "rate_limit", "code": None}},
                status=429,
                headers={"Retry-After": "7"},
            )
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            error = {"message": f"not JSON {marker}", "type": "invalid_request_error"}
            return web.json_response({"error": error}, status=400)
        if isinstance(payload, dict) and payload.get("stream"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            with contextlib.suppress(ConnectionResetError):  # a client_abort request
                for n in range(STREAM_EVENTS):
                    event = {"choices": [{"delta": {"content": f"{marker} {n}"}}]}
                    await response.write(b"data: " + orjson.dumps(event) + b"\n\n")
                    await asyncio.sleep(0.01)
                await response.write(b"data: [DONE]\n\n")
                await response.write_eof()
            return response
        completion = {"object": "chat.completion", "choices": [{"message": {"content": marker}}]}
        return web.json_response(completion)

    async def models(request: web.Request) -> web.Response:
        marker = record(b"", request.rel_url.raw_query_string.encode())
        return web.json_response({"object": "list", "data": [{"id": marker}]})

    async def embeddings(request: web.Request) -> web.Response:
        body = await request.read()
        record(body)
        return web.Response(body=body, content_type="application/json")

    async def dump(request: web.Request) -> web.Response:
        return web.json_response(received, dumps=lambda v: orjson.dumps(v).decode())

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/__soak/received", dump)
    return app


def serve_upstream(port: int) -> None:
    import uvloop

    web.run_app(
        upstream_app(),
        host="127.0.0.1",
        port=port,
        print=None,
        access_log=None,
        loop=uvloop.new_event_loop(),
    )


# ---------------------------------------------------------------------------------------------
# Requests the driver sends
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One request: its marker, what the upstream must have received, how it must end."""

    marker: str
    kind: str
    #: sha256 the upstream must have recorded for the marker, once; ``None``: never reached.
    upstream_sha: str | None
    expect_status: int


@dataclass
class Tally:
    sent: list[Sent] = field(default_factory=list)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


STEPS = default_steps(RULES, parse_config({}).rule_settings())
CLEAN = orjson.loads(CLEAN_BODY)
BROKEN_KINDS = sorted(BROKEN)

#: kind -> weight. Error kinds are rare, as in real traffic.
MIX: dict[str, int] = {
    "clean": 25,
    "broken": 30,
    "stream_clean": 8,
    "stream_broken": 12,
    "models": 8,
    "embeddings": 7,
    "upstream429": 3,
    "too_large": 2,
    "not_json": 2,
    "client_abort": 3,
    # issue 15: hostile bodies among the normal traffic
    "gzip_bomb": 1,
    "replayed_ids": 1,
    "hostile_arguments": 1,
    "big_clean": 1,
}


@functools.cache
def gzip_bomb() -> bytes:
    """64 MiB of zeros in about 64 KB of gzip: decoded, far over ``MAX_BODY_BYTES``."""
    return gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)


def reused_id_turns(turns: int) -> list[Any]:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_same", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_same", "content": "ok"}
    return [{"role": "user", "content": "go"}, *[m for _ in range(turns) for m in (call, result)]]


def hostile_arguments() -> list[Any]:
    """Two calls whose arguments made the scanner slow: nested past 1024 levels (cut there) and
    wide (90,000 tokens, cut at the per-string cap)."""
    shapes = {"c1": '{"a":' * 30_000, "c2": "{" + '"a":1,' * 30_000 + "x"}
    calls = [
        {"id": cid, "type": "function", "function": {"name": "f", "arguments": arguments}}
        for cid, arguments in shapes.items()
    ]
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": cid, "content": "ok"} for cid in shapes),
    ]


def chat_body(marker: str, messages: list[Any], **extra: Any) -> bytes:
    return orjson.dumps({"model": "deepseek-chat", "user": marker, "messages": messages, **extra})


class Driver:
    def __init__(self, base: str, seed: int, deadline: float) -> None:
        self.base = base
        self.deadline = deadline
        self.run_id = os.urandom(4).hex()
        self.random = random.Random(seed)
        self.counter = 0
        self.tally = Tally()
        self.kinds = list(MIX)
        self.weights = list(MIX.values())

    def marker(self, kind: str) -> str:
        self.counter += 1
        return f"soak-{self.run_id}-{self.counter}-{kind}"

    async def client(self, http: aiohttp.ClientSession) -> None:
        while time.monotonic() < self.deadline:
            kind = self.random.choices(self.kinds, self.weights)[0]
            started = time.perf_counter()
            try:
                await self.one(http, kind)
            except Exception as exc:  # an unexpected error: counted, never fatal
                self.tally.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:300])
            self.tally.latencies.append(time.perf_counter() - started)

    def expect(self, marker: str, kind: str, upstream_body: bytes | None, status: int) -> None:
        digest = None if upstream_body is None else sha(upstream_body)
        self.tally.sent.append(Sent(marker, kind, digest, status))

    def check(self, condition: bool, what: str) -> None:
        if not condition:
            self.tally.errors.append(what[:300])

    async def one(self, http: aiohttp.ClientSession, kind: str) -> None:
        marker = self.marker(kind)
        url = f"{self.base}/v1/chat/completions"
        if kind == "models":
            self.expect(marker, kind, b"", 200)
            async with http.get(f"{self.base}/v1/models?marker={marker}") as response:
                data = await response.json()
            self.record(kind, response.status)
            self.check(data["data"][0]["id"] == marker, f"{marker}: someone else's models list")
            return
        if kind == "embeddings":
            body = orjson.dumps({"model": "e", "input": marker})
            self.expect(marker, kind, body, 200)
            async with http.post(f"{self.base}/v1/embeddings", data=body) as response:
                echoed = await response.read()
            self.record(kind, response.status)
            self.check(echoed == body, f"{marker}: embeddings echo differs")
            return
        if kind == "too_large":
            body = chat_body(marker, [{"role": "user", "content": "x" * MAX_BODY_BYTES}])
            self.expect(marker, kind, None, 413)
            async with http.post(url, data=body) as response:
                await response.read()
            self.record(kind, response.status)
            return
        if kind == "gzip_bomb":
            self.expect(marker, kind, None, 413)
            headers = {"Content-Encoding": "gzip"}
            async with http.post(url, data=gzip_bomb(), headers=headers) as response:
                await response.read()
            self.record(kind, response.status)
            return
        if kind in ("replayed_ids", "hostile_arguments", "big_clean"):
            if kind == "replayed_ids":
                messages = reused_id_turns(1500)
            elif kind == "hostile_arguments":
                messages = hostile_arguments()
            else:  # over the soak's offload_body_bytes (256 KiB): repaired in the worker
                messages = [{"role": "user", "content": "hi"}] * 12_000
            body = chat_body(marker, messages)
            self.expect(marker, kind, sanitize_body(body, STEPS).body, 200)
            data_sent, headers = body, {}
            if kind == "replayed_ids":
                data_sent, headers = gzip.compress(body), {"Content-Encoding": "gzip"}
            async with http.post(url, data=data_sent, headers=headers) as response:
                data = await response.read()
            self.record(kind, response.status)
            content = orjson.loads(data)["choices"][0]["message"]["content"]
            self.check(content == marker, f"{marker}: someone else's completion")
            return
        if kind == "not_json":
            body = b'{"user": "' + marker.encode() + b'", "messages": [' + b"{" * 3
            self.expect(marker, kind, body, 400)
            async with http.post(url, data=body) as response:
                error = await response.json()
            self.record(kind, response.status)
            self.check(marker in error["error"]["message"], f"{marker}: someone else's error")
            return
        stream = kind.startswith("stream") or kind == "client_abort"
        if kind in ("clean", "stream_clean", "upstream429"):
            messages = CLEAN["messages"]
        else:
            messages = BROKEN[self.random.choice(BROKEN_KINDS)]
        body = chat_body(marker, messages, **({"stream": True} if stream else {}))
        sanitized = sanitize_body(body, STEPS)
        status = 429 if kind == "upstream429" else 200
        self.expect(marker, kind, sanitized.body, status)
        async with http.post(url, data=body) as response:
            self.record(kind, response.status)
            if kind == "client_abort":
                await response.content.readline()
                response.close()  # walk away mid-stream
                return
            data = await response.read()
        if kind == "upstream429":
            self.check(response.headers.get("Retry-After") == "7", f"{marker}: Retry-After lost")
            self.check(marker.encode() in data, f"{marker}: someone else's 429")
        elif stream:
            self.check(data.endswith(b"data: [DONE]\n\n"), f"{marker}: stream incomplete")
            self.check(
                data.count(marker.encode()) == STREAM_EVENTS, f"{marker}: someone else's events"
            )
        else:
            content = orjson.loads(data)["choices"][0]["message"]["content"]
            self.check(content == marker, f"{marker}: someone else's completion")

    def record(self, kind: str, status: int) -> None:
        self.tally.statuses[(kind, status)] += 1


# ---------------------------------------------------------------------------------------------
# Processes and resources
# ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Resources:
    fds: int
    rss_mib: float


def resources(pid: int) -> Resources:
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss_kib = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    return Resources(fds, rss_kib / 1024)


async def wait_listening(port: int, process: asyncio.subprocess.Process) -> None:
    for _ in range(300):
        if process.returncode is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


@contextlib.asynccontextmanager
async def processes(workdir: Path) -> AsyncIterator[tuple[str, str, asyncio.subprocess.Process]]:
    """The fake upstream and chatmend, as real processes; yields (proxy URL, upstream URL, pid)."""
    up_port, proxy_port = free_port(), free_port()
    upstream = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.soak", "upstream", "--port", str(up_port)
    )
    config = workdir / "soak.yaml"
    config.write_text(
        f"listen: {{host: 127.0.0.1, port: {proxy_port}}}\n"
        f"upstream: {{url: 'http://127.0.0.1:{up_port}'}}\n"
        f"max_body_bytes: {MAX_BODY_BYTES}\n"
        "offload_body_bytes: 262144\n"  # the big_clean bodies go through the worker process
    )
    log = (workdir / "chatmend.log").open("wb")
    chatmend = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "chatmend"),
        "serve",
        "--config",
        str(config),
        stdout=log,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        await wait_listening(up_port, upstream)
        await wait_listening(proxy_port, chatmend)
        yield f"http://127.0.0.1:{proxy_port}", f"http://127.0.0.1:{up_port}", chatmend
    finally:
        for process in (chatmend, upstream):
            if process.returncode is None:
                process.terminate()
                await process.wait()
        log.close()


async def sampler(pid: int, samples: list[Resources], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(resources(pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 2)


async def drive(base: str, clients: int, seconds: float, seed: int) -> Driver:
    driver = Driver(base, seed, time.monotonic() + seconds)
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        await asyncio.gather(*(driver.client(http) for _ in range(clients)))
    return driver


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def verify(driver: Driver, received: dict[str, list[str]]) -> tuple[int, list[str]]:
    """Bodies verified, and every discrepancy between what was sent and what arrived."""
    problems: list[str] = []
    verified = 0
    sent_markers = set()
    for sent in driver.tally.sent:
        sent_markers.add(sent.marker)
        got = received.get(sent.marker, [])
        if sent.upstream_sha is None:
            if got:
                problems.append(f"{sent.marker}: reached the upstream, must not have")
            else:
                verified += 1
        elif got == [sent.upstream_sha]:
            verified += 1
        elif not got:
            problems.append(f"{sent.marker}: never reached the upstream")
        elif len(got) > 1:
            problems.append(f"{sent.marker}: reached the upstream {len(got)} times")
        else:
            problems.append(f"{sent.marker}: the upstream got a different body")
    strays = set(received) - sent_markers
    problems += [f"{marker}: received but never sent" for marker in sorted(strays)[:20]]
    return verified, problems


def unexpected_statuses(driver: Driver) -> list[str]:
    expected = {(s.kind, s.expect_status) for s in driver.tally.sent}
    return [
        f"{kind}: status {status} x{count}"
        for (kind, status), count in driver.tally.statuses.items()
        if (kind, status) not in expected
    ]


async def soak(args: argparse.Namespace) -> int:
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="chatmend-soak-") as tmp:
        async with processes(Path(tmp)) as (base, upstream_base, chatmend):
            pid = chatmend.pid
            idle = resources(pid)
            warm_seconds = min(10.0, max(2.0, seconds / 10))
            print(f"soak: warming up for {warm_seconds:.0f} s with {args.clients} clients ...")
            warm = await drive(base, args.clients, warm_seconds, args.seed + 1)
            await asyncio.sleep(1)
            warmed = resources(pid)
            print(f"soak: {args.clients} clients for {seconds:.0f} s ...")
            samples: list[Resources] = []
            stop = asyncio.Event()
            sampling = asyncio.create_task(sampler(pid, samples, stop))
            started = time.monotonic()
            driver = await drive(base, args.clients, seconds, args.seed)
            elapsed = time.monotonic() - started
            stop.set()
            await sampling
            # The clients are gone; chatmend's idle upstream connections expire after
            # POOL_IDLE_SECONDS. Wait for the descriptors to come back down.
            settle_deadline = time.monotonic() + POOL_IDLE_SECONDS + 15
            after = resources(pid)
            while after.fds > idle.fds + 5 and time.monotonic() < settle_deadline:
                await asyncio.sleep(1)
                after = resources(pid)
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"{upstream_base}/__soak/received") as response,
            ):
                received: dict[str, list[str]] = orjson.loads(await response.read())
            log_text = (Path(tmp) / "chatmend.log").read_bytes()
        for tally in (warm.tally,):
            driver.tally.sent += tally.sent  # the warm-up's bodies are verified too
            driver.tally.errors += tally.errors
            driver.tally.statuses.update(tally.statuses)
    verified, problems = verify(driver, received)
    problems += unexpected_statuses(driver)
    log_lines = log_text.splitlines()
    not_json = 0
    events: Counter[str] = Counter()
    for line in log_lines:
        try:
            events[orjson.loads(line)["event"]] += 1
        except (orjson.JSONDecodeError, KeyError, TypeError):
            not_json += 1
    if not_json:
        problems.append(f"{not_json} chatmend output lines are not JSON log events")
    if events["request_failed"]:
        problems.append(f"{events['request_failed']} request_failed events (crashes contained)")
    peak = max(samples, key=lambda s: s.rss_mib) if samples else after
    fd_ok = after.fds <= idle.fds + 5
    rss_limit = warmed.rss_mib * 1.25 + 16
    rss_ok = after.rss_mib <= rss_limit
    if not fd_ok:
        problems.append(f"file descriptors did not return to baseline: {idle.fds} -> {after.fds}")
    if not rss_ok:
        problems.append(
            f"RSS did not return near baseline: {warmed.rss_mib:.0f} MiB -> "
            f"{after.rss_mib:.0f} MiB (limit {rss_limit:.0f})"
        )
    errors = driver.tally.errors
    latencies = sorted(driver.tally.latencies)
    requests = len(driver.tally.sent)
    by_kind = Counter(s.kind for s in driver.tally.sent)
    print()
    print(
        f"chatmend soak: {args.clients} clients, {elapsed:.0f} s (+ {warm_seconds:.0f} s warm-up)"
    )
    print(f"  requests        {requests}  ({len(latencies) / elapsed:.0f}/s in the timed part)")
    print("  by kind         " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))
    statuses: Counter[int] = Counter()
    for (_, status), count in driver.tally.statuses.items():
        statuses[status] += count
    print("  statuses        " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
    if latencies:
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        print(f"  latency         p50 {p50:.1f} ms, p99 {p99:.1f} ms (client side, whole request)")
    print(f"  bodies verified {verified} of {requests} (exact bytes upstream, once, by marker)")
    print(f"  unexpected      {len(errors)} errors, {len(problems)} verification problems")
    print("  log events      " + ", ".join(f"{e} {n}" for e, n in sorted(events.items())))
    print(
        f"  fds             idle {idle.fds}, after warm-up {warmed.fds}, "
        f"peak {max((s.fds for s in samples), default=0)}, after {after.fds}  "
        f"[{'ok' if fd_ok else 'FAIL'}]"
    )
    print(
        f"  RSS (MiB)       idle {idle.rss_mib:.1f}, after warm-up {warmed.rss_mib:.1f}, "
        f"peak {peak.rss_mib:.1f}, after {after.rss_mib:.1f}  [{'ok' if rss_ok else 'FAIL'}]"
    )
    for problem in (errors + problems)[:30]:
        print(f"  ! {problem}")
    ok = not errors and not problems and verified == requests
    print(f"  result          {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description="chatmend load test")
    parser.add_argument("--minutes", type=float, default=3.0, help="load duration (default 3)")
    parser.add_argument("--seconds", type=float, help="load duration in seconds (overrides)")
    parser.add_argument("--clients", type=int, default=300, help="concurrent clients (300)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the request mix")
    parser.add_argument("command", nargs="?", choices=["upstream"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.command == "upstream":
        serve_upstream(args.port)
        return 0
    import uvloop

    return uvloop.run(soak(args))


if __name__ == "__main__":
    sys.exit(main())
