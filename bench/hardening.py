"""The bounds of issue 36 measured against real ``chatmend serve`` processes, each beside its
baseline in the same run (the figures SECURITY.md quotes).

- ``diff``: /healthz answered from another process (a new connection per probe) while the page
  renders the diff of a captured body: the issue's 31 KB body (700 user messages, every other
  one followed by a message the default profile removes) and the largest the capture keeps (a
  15 MB body, past the alignment's work budget); the baseline: /healthz alone.
- ``bombs``: the same probe while 16 gzip bombs (1 MB inflating to 1 GiB each) are refused at
  the default limits; the baseline: /healthz alone.
- ``recent``: the server's RSS growth over 48 bodies of 800 KB whose two reused tool-call ids
  (100 KB each) duplicate-tool-call-ids renames (the page on, capture and prefix cache off);
  the baseline: the same bodies with 8-character ids.
- ``prefix``: the RSS growth over 150 sessions (each its own key) of a 40 KB body made of empty
  objects, through a prefix cache of 32 MiB; the baseline: the cache off. In process, what the
  cache holds (traced allocations) per byte it charges, over the shapes of
  tests/proxy/test_prefix.py.

Run: ``.venv/bin/python -m bench.hardening`` (about a minute; ``--only diff,bombs`` for some).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import statistics
import sys
import tempfile
import time
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.procs import Fleet, fleet, free_port, handle_sigterm, rss_kb, venv_bin
from bench.servers import start_fake
from proxy.config import PrefixConfig
from proxy.relay.prefix import PrefixCache
from rules.providers.apis import CHAT_API

CHAT = "/v1/chat/completions"
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


def _chat(messages: list[Any]) -> bytes:
    return orjson.dumps({"model": "deepseek-chat", "messages": messages})


def _start(fleet: Fleet, name: str, upstream: str, yaml: str, directory: Path) -> str:
    """``chatmend serve`` with ``yaml`` (its upstream added); its URL."""
    config = directory / f"{name}.yaml"
    config.write_text(f"upstream: {{url: '{upstream}'}}\n{yaml}")
    port = free_port()
    command = [venv_bin("chatmend"), "serve", "--config", str(config), "--port", str(port)]
    url = fleet.start(name, command, port)
    time.sleep(1.0)  # the first offload worker is up
    return url


async def _probed(url: str, attack: Awaitable[Any]) -> tuple[Any, list[float]]:
    """``attack``'s result, and /healthz latencies measured from another process meanwhile."""
    host, port = url.removeprefix("http://").split(":")
    prober = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROBER, host, port,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert prober.stdin is not None and prober.stdout is not None
    try:
        assert await prober.stdout.readline() == b"ready\n"  # the attack starts once it probes
        result = await attack
    finally:
        prober.stdin.close()
        out, _ = await prober.communicate()
    latencies: list[float] = orjson.loads(out)
    return result, latencies


def _ms(latencies: list[float]) -> str:
    return (
        f"median {statistics.median(latencies) * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms ({len(latencies)} probes)"
    )


async def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
    async with (
        aiohttp.ClientSession() as http,
        http.post(url + CHAT, data=_stream(body), headers=headers) as response,
    ):
        await response.read()
        return response


def _stream(body: bytes) -> io.BytesIO:
    return io.BytesIO(body)


async def _captured(url: str, body: bytes) -> str:
    sent = await _post(url, body)
    return str(sent.headers["X-Chatmend-Request-Id"])


async def _view(url: str, request_id: str, times: int) -> tuple[int, float]:
    """The view ``times`` in a row: its last status, and the seconds one took (the mean)."""
    started = time.perf_counter()
    status = 0
    async with aiohttp.ClientSession() as http:
        for _ in range(times):
            async with http.get(f"{url}/chatmend/request/{request_id}") as response:
                await response.read()
                status = response.status
    return status, (time.perf_counter() - started) / times


def _issue_body(count: int) -> bytes:
    messages: list[Any] = []
    for k in range(count):
        messages.append({"role": "user", "content": "a"})
        if k % 2 == 0:
            messages.append({"role": "assistant", "content": ""})
    return _chat(messages)


def _largest_body() -> bytes:
    tiny = [{"role": "user", "content": "hi"}] * (15 * 1024 * 1024 // 31)
    return _chat([*tiny, {"role": "assistant", "content": "ok", "tool_calls": []}])


def measure_diff(upstream: str, directory: Path, say: Callable[[str], object]) -> None:
    with fleet() as servers:
        url = _start(
            servers, "page", upstream, "ui: {enabled: true}\ncapture: {enabled: true}\n", directory
        )
        _, alone = asyncio.run(_probed(url, asyncio.sleep(1.0)))
        say(f"diff: /healthz alone: {_ms(alone)}")
        for name, body, times in (
            ("31 KB issue body", _issue_body(700), 10),
            ("15 MB body", _largest_body(), 1),
        ):
            request_id = asyncio.run(_captured(url, body))
            (status, took), latencies = asyncio.run(_probed(url, _view(url, request_id, times)))
            say(
                f"diff: {times} x the view of the {name} ({status}, {took:.2f} s each): "
                f"/healthz {_ms(latencies)}"
            )


def _bomb() -> bytes:
    deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1024 * 1024)
    return b"".join(deflater.compress(zeros) for _ in range(1024)) + deflater.flush()


def measure_bombs(upstream: str, directory: Path, say: Callable[[str], object]) -> None:
    bomb = _bomb()

    async def sixteen(url: str) -> list[int]:
        async def one() -> int:
            response = await _post(url, bomb, {"Content-Encoding": "gzip"})
            return int(response.status)

        return list(await asyncio.gather(*(one() for _ in range(16))))

    with fleet() as servers:
        url = _start(servers, "bombs", upstream, "", directory)
        _, alone = asyncio.run(_probed(url, asyncio.sleep(1.0)))
        statuses, latencies = asyncio.run(_probed(url, sixteen(url)))
        say(f"bombs: /healthz alone: {_ms(alone)}")
        counted = ", ".join(f"{n} x {s}" for s, n in sorted(_count(statuses).items()))
        say(f"bombs: 16 of {len(bomb) // 1024} KB ({counted}): /healthz {_ms(latencies)}")


def _count(values: Sequence[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _renamed_ids(number: int, id_size: int) -> bytes:
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
    return _chat([*turn(pad), *turn("again"), {"role": "user", "content": "go on"}])


async def _grown(url: str, pid: int, bodies: Sequence[bytes], keyed: bool = False) -> int:
    before = rss_kb(pid) or 0
    for number, body in enumerate(bodies):
        headers = {"Authorization": f"Bearer sk-session-{number}"} if keyed else None
        await _post(url, body, headers)
    return (rss_kb(pid) or 0) - before


def measure_recent(upstream: str, directory: Path, say: Callable[[str], object]) -> None:
    yaml = "ui: {enabled: true}\nprefix_cache: {enabled: false}\n"
    for where, extra in (("inline", ""), ("worker", "offload_body_bytes: 65536\n")):
        with fleet() as servers:
            url = _start(servers, f"recent-{where}", upstream, yaml + extra, directory)
            pid = servers.pid(f"recent-{where}")
            asyncio.run(_grown(url, pid, [_renamed_ids(-n, 100_000) for n in range(1, 9)]))
            short = asyncio.run(_grown(url, pid, [_renamed_ids(n, 8) for n in range(48)]))
            long = asyncio.run(_grown(url, pid, [_renamed_ids(n, 100_000) for n in range(48)]))
            say(
                f"recent ({where}): 48 bodies with renamed 100 KB ids: RSS {long / 1024:+.1f} MB;"
                f" with 8-character ids: {short / 1024:+.1f} MB"
            )


def _tiny(number: int) -> bytes:
    return _chat(
        [{"role": "user", "content": [{}] * 13_000}, {"role": "user", "content": f"{number}"}]
    )


def measure_prefix(upstream: str, directory: Path, say: Callable[[str], object]) -> None:
    bound = 32 * 1024 * 1024
    for name, yaml in (
        ("32 MiB", f"prefix_cache: {{max_bytes: {bound}}}\n"),
        ("off", "prefix_cache: {enabled: false}\n"),
    ):
        with fleet() as servers:
            url = _start(servers, f"prefix-{name.replace(' ', '')}", upstream, yaml, directory)
            pid = servers.pid(f"prefix-{name.replace(' ', '')}")
            asyncio.run(_grown(url, pid, [_tiny(-1)]))
            grown = asyncio.run(_grown(url, pid, [_tiny(n) for n in range(150)], keyed=True))
            sent = "150 sessions of 40 KB of empty objects"
            say(f"prefix: {sent}, cache {name}: RSS {grown / 1024:+.1f} MB")
    worst, transcripts = _held_per_charge()
    say(f"prefix: held per byte charged (tracemalloc): at most {worst:.2f} over the shapes,")
    say(f"prefix: {transcripts:.2f} over the agent sessions")


def _held_per_charge() -> tuple[float, float]:
    """The most the cache held per byte it charged over the tiny shapes, and over the
    benchmark's agent sessions."""
    from tests.sessions import session

    def content(value: Any, copies: int) -> bytes:
        return orjson.dumps({"messages": [{"role": "user", "content": [value] * copies}]})

    shapes = [
        content({}, 30_000),
        content([], 30_000),
        content({"a": {"b": {}}}, 20_000),
        content({"a": "b"}, 20_000),
        content("a", 30_000),
        content("\U0001f600", 30_000),
        orjson.dumps(
            {
                "messages": [
                    {"role": "user", "content": {"k" * 65 + str(n): "v" for n in range(43691)}}
                ]
            }
        ),
    ]
    agents = [
        session(120, workload, seed=3) for workload in ("clean", "clean-kimi", "stuck", "broken")
    ]
    return max(_ratio([s]) for s in shapes), max(_ratio(s) for s in agents)


def _ratio(bodies: Sequence[bytes]) -> float:
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    cache = PrefixCache(PrefixConfig(max_bytes=1 << 40))
    for body in bodies:
        cache.read("s", CHAT_API, body)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    return held / cache.charged


MEASURES = {
    "diff": measure_diff,
    "bombs": measure_bombs,
    "recent": measure_recent,
    "prefix": measure_prefix,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hardening", description=__doc__)
    parser.add_argument(
        "--only", default=",".join(MEASURES), help="comma-separated: " + ", ".join(MEASURES)
    )
    args = parser.parse_args(argv)
    handle_sigterm()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(MEASURES))
    if unknown:
        parser.error(f"unknown measure(s): {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="chatmend-hardening-") as tmp, fleet() as upstreams:
        upstream = start_fake(upstreams)
        for name in chosen:
            MEASURES[name](upstream, Path(tmp), lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
