"""HTTP benchmark on loopback: chatmend against a ``floor-json`` relay, driven by ``wrk``.

Three servers, each in its own subprocess:

- ``fake``: a fast upstream answering every request with one fixed JSON completion;
- ``floor-json``: a minimal aiohttp relay, one pooled ClientSession, one orjson parse and one
  serialize of the body, forward, relay the answer (the least a JSON-aware proxy pays);
- ``chatmend``: the real proxy (``chatmend serve``) with its default config, upstream = fake.

``wrk`` posts one payload file (Lua script) to ``/v1/chat/completions``; for each payload and
concurrency the targets are measured interleaved, round after round, and the ratio
chatmend/floor-json is the median of the per-round ratios. Skipped if ``wrk`` is missing.

Servers: ``python -m bench.http fake PORT`` and ``python -m bench.http floor-json PORT UPSTREAM``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from bench.payloads import SIZES, build

COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "deepseek-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Done: the test passes now."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 8, "total_tokens": 1008},
    }
)
CONCURRENCY: tuple[int, ...] = (1, 4, 16)
TARGETS: tuple[str, ...] = ("floor-json", "chatmend")
LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
local f = assert(io.open(os.getenv("BENCH_PAYLOAD"), "rb"))
wrk.body = f:read("*a")
f:close()
"""


# --- the servers ---------------------------------------------------------------------------


def fake_app() -> web.Application:
    async def complete(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=COMPLETION, content_type="application/json")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", complete)
    return app


def floor_json_app(upstream: str) -> web.Application:
    session_key = web.AppKey("session", ClientSession)

    async def relay(request: web.Request) -> web.Response:
        body = orjson.dumps(orjson.loads(await request.read()))
        headers = {"Content-Type": "application/json"}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        async with request.app[session_key].post(
            upstream + request.rel_url.raw_path_qs, data=body, headers=headers
        ) as response:
            payload = await response.read()
            return web.Response(
                status=response.status, body=payload, content_type=response.content_type
            )

    async def startup(app: web.Application) -> None:
        app[session_key] = ClientSession(
            connector=TCPConnector(limit=0), timeout=ClientTimeout(total=60)
        )

    async def cleanup(app: web.Application) -> None:
        await app[session_key].close()

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.on_startup.append(startup)
    app.on_cleanup.append(cleanup)
    app.router.add_route("*", "/{tail:.*}", relay)
    return app


def serve(argv: Sequence[str]) -> None:
    kind, port = argv[0], int(argv[1])
    app = fake_app() if kind == "fake" else floor_json_app(argv[2])
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


# --- the driver ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True, slots=True)
class HttpRow:
    messages: int
    variant: str
    concurrency: int
    #: Target -> median over rounds.
    results: dict[str, WrkResult]
    #: Median of the per-round throughput ratios chatmend / floor-json.
    ratio: float


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


@contextmanager
def servers() -> Iterator[dict[str, str]]:
    """Start fake, floor-json and chatmend; yield target -> base URL."""
    fake, floor, mend = _free_port(), _free_port(), _free_port()
    upstream = f"http://127.0.0.1:{fake}"
    py = sys.executable
    chatmend = str(Path(py).with_name("chatmend"))
    commands = {
        "fake": [py, "-m", "bench.http", "fake", str(fake)],
        "floor-json": [py, "-m", "bench.http", "floor-json", str(floor), upstream],
        "chatmend": [chatmend, "serve", "--upstream", upstream, "--port", str(mend)],
    }
    ports = {"fake": fake, "floor-json": floor, "chatmend": mend}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, command in commands.items():
            # chatmend logs one JSON line per request on stdout: kept, but discarded.
            procs[name] = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        for name, proc in procs.items():
            _wait_listening(ports[name], proc)
        yield {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _latency_ms(output: str, percentile: str) -> float:
    match = re.search(rf"^\s+{percentile}%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
    return float(match.group(1)) * _UNITS[match.group(2)] if match else float("nan")


def wrk(url: str, script: Path, payload: Path, concurrency: int, seconds: float) -> WrkResult:
    command = [
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{max(1, round(seconds))}s",
        "--latency",
        "-s",
        str(script),
        url + "/v1/chat/completions",
    ]
    env = {**os.environ, "BENCH_PAYLOAD": str(payload)}
    output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in output or "Socket errors" in output:
        raise RuntimeError(f"wrk saw errors against {url}:\n{output}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if not match:
        raise RuntimeError(f"cannot read wrk output:\n{output}")
    return WrkResult(float(match.group(1)), _latency_ms(output, "50"), _latency_ms(output, "99"))


def run(
    sizes: Sequence[int] = SIZES,
    concurrency: Sequence[int] = CONCURRENCY,
    *,
    rounds: int = 3,
    seconds: float = 2.0,
) -> list[HttpRow]:
    """Measure every payload x concurrency, targets interleaved in each round."""
    if shutil.which("wrk") is None:
        return []
    rows: list[HttpRow] = []
    with tempfile.TemporaryDirectory(prefix="chatmend-bench-") as tmp, servers() as urls:
        script = Path(tmp, "post.lua")
        script.write_text(LUA)
        for size in sizes:
            for broken in (False, True):
                payload = Path(tmp, f"{size}-{broken}.json")
                payload.write_bytes(build(size, broken=broken))
                for conc in concurrency:
                    for target in TARGETS:  # warm-up: connections, caches
                        wrk(urls[target], script, payload, conc, 1)
                    samples: dict[str, list[WrkResult]] = {t: [] for t in TARGETS}
                    ratios: list[float] = []
                    for _ in range(rounds):
                        for target in TARGETS:
                            samples[target].append(
                                wrk(urls[target], script, payload, conc, seconds)
                            )
                        ratios.append(samples["chatmend"][-1].rps / samples["floor-json"][-1].rps)
                    results = {
                        t: WrkResult(
                            statistics.median(r.rps for r in s),
                            statistics.median(r.p50_ms for r in s),
                            statistics.median(r.p99_ms for r in s),
                        )
                        for t, s in samples.items()
                    }
                    variant = "broken" if broken else "clean"
                    rows.append(HttpRow(size, variant, conc, results, statistics.median(ratios)))
                    print(
                        f"  http {size} {variant} c={conc}: ratio {rows[-1].ratio:.2f}",
                        file=sys.stderr,
                    )
    return rows


def table(rows: Sequence[HttpRow]) -> str:
    lines = [
        "| messages | payload | conc. | floor-json req/s | chatmend req/s | ratio | "
        "floor-json p50 / p99 ms | chatmend p50 / p99 ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        floor, mend = r.results["floor-json"], r.results["chatmend"]
        lines.append(
            f"| {r.messages} | {r.variant} | {r.concurrency} | {floor.rps:,.0f} "
            f"| {mend.rps:,.0f} | **{r.ratio:.2f}** "
            f"| {floor.p50_ms:.2f} / {floor.p99_ms:.2f} | {mend.p50_ms:.2f} / {mend.p99_ms:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("fake", "floor-json"):
        serve(sys.argv[1:])
    else:
        print(table(run()))
