"""The benchmark's servers: a fake upstream and two floor relays, plus how to start each target.

- ``fake``: a fast upstream. A request whose body has ``"stream": true`` gets an SSE stream
  (``text/event-stream``, one ``data: {chat.completion.chunk}\\n\\n`` per chunk, then
  ``data: [DONE]\\n\\n``); its length and pace come from two headers only the fake reads,
  ``X-Bench-Chunks`` (default 20) and ``X-Bench-Interval-Ms`` (default 0). Each chunk carries
  ``bench_index`` and ``bench_sent_ns``, the upstream's ``time.monotonic_ns()`` right before
  the write (system-wide on Linux, so a client on the same machine can subtract it from its
  own clock). Every other request gets one fixed JSON completion.
- ``floor-raw``: a minimal aiohttp relay with one pooled ClientSession: forwards the request
  bytes and headers (minus hop-by-hop), relays the answer (whole if it has a length, else
  chunk by chunk as it arrives). No JSON.
- ``floor-json``: the same plus one orjson parse and one serialize of the body (the least a
  JSON-aware proxy pays).

- ``nginx`` (``start_upstream``): the same fixed completion from nginx, when it is installed
  (``make bench`` installs it as it does wrk): an upstream that needs a fraction of the CPU the
  Python fake does, so that on a small machine the targets, not the backdrop, share the cores.
  Non-streaming requests only (its answer is the fixed JSON whatever the body asks); without
  nginx the Python fake stands in, and says so.

Run one: ``.venv/bin/python -m bench.servers fake PORT [--loop uvloop]`` or
``.venv/bin/python -m bench.servers floor-raw PORT http://127.0.0.1:UPSTREAM_PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from bench.procs import Fleet, chatmend_has_loop_flag, free_port, uvloop_available, venv_bin
from proxy.relay.upstream import HOP_BY_HOP

MODEL = "deepseek-chat"  # the model name tests.payloads puts in every request
# Every client sends this key; chatmend forwards it, a peer that requires a key is given it.
API_KEY = "sk-bench-5f0c2a9e7b1d4c3a8e6f0b2d4a7c9e1f"
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
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
CHUNKS_HEADER = "X-Bench-Chunks"
INTERVAL_HEADER = "X-Bench-Interval-Ms"
DONE = b"data: [DONE]\n\n"
# The proxy's own hop-by-hop set, plus what aiohttp recomputes for the next hop.
_HOP_BY_HOP = HOP_BY_HOP | {"host", "content-length"}
MAX_BODY = 64 * 1024 * 1024


def _wants_stream(body: bytes) -> bool:
    # The substring test keeps the big non-streaming payloads free of a JSON parse.
    if b'"stream"' not in body:
        return False
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and parsed.get("stream") is True


def chunk_event(index: int, sent_ns: int) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": f"tok{index} "}, "finish_reason": None}],
        "bench_index": index,
        "bench_sent_ns": sent_ns,
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def fake_app() -> web.Application:
    async def stream(request: web.Request) -> web.StreamResponse:
        chunks = int(request.headers.get(CHUNKS_HEADER, "20"))
        interval = float(request.headers.get(INTERVAL_HEADER, "0")) / 1000.0
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        try:
            for i in range(chunks):
                if i and interval > 0:
                    await asyncio.sleep(interval)
                await response.write(chunk_event(i, time.monotonic_ns()))
            await response.write(DONE)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client left
        return response

    async def complete(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if _wants_stream(body):
            return await stream(request)
        return web.Response(body=COMPLETION, content_type="application/json")

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_route("*", "/{tail:.*}", complete)
    return app


_SESSION = web.AppKey("session", ClientSession)


def _with_session(app: web.Application) -> web.Application:
    async def startup(app: web.Application) -> None:
        app[_SESSION] = ClientSession(
            connector=TCPConnector(limit=0),
            timeout=ClientTimeout(total=None, sock_read=300),
            auto_decompress=False,
        )

    async def cleanup(app: web.Application) -> None:
        await app[_SESSION].close()

    app.on_startup.append(startup)
    app.on_cleanup.append(cleanup)
    return app


def floor_raw_app(upstream: str) -> web.Application:
    async def relay(request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with request.app[_SESSION].request(
            request.method,
            upstream + request.rel_url.raw_path_qs,
            data=await request.read(),
            headers=headers,
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Accept", "Content-Type"),
        ) as response:
            content_type = response.headers.get("Content-Type", "application/octet-stream")
            if response.content_length is not None:
                return web.Response(
                    status=response.status,
                    body=await response.read(),
                    headers={"Content-Type": content_type},
                )
            out = web.StreamResponse(status=response.status, headers={"Content-Type": content_type})
            await out.prepare(request)
            async for chunk in response.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_route("*", "/{tail:.*}", relay)
    return _with_session(app)


def floor_json_app(upstream: str) -> web.Application:
    async def relay(request: web.Request) -> web.Response:
        body = orjson.dumps(orjson.loads(await request.read()))
        headers = {"Content-Type": "application/json"}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        async with request.app[_SESSION].post(
            upstream + request.rel_url.raw_path_qs, data=body, headers=headers
        ) as response:
            payload = await response.read()
            return web.Response(
                status=response.status, body=payload, content_type=response.content_type
            )

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_route("*", "/{tail:.*}", relay)
    return _with_session(app)


def serve(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.servers")
    parser.add_argument("kind", choices=("fake", "floor-raw", "floor-json"))
    parser.add_argument("port", type=int)
    parser.add_argument("upstream", nargs="?", default="")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args(argv)
    if args.kind == "fake":
        app = fake_app()
    elif args.kind == "floor-raw":
        app = floor_raw_app(args.upstream)
    else:
        app = floor_json_app(args.upstream)
    loop: asyncio.AbstractEventLoop | None = None
    if args.loop == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None, loop=loop)


# --- starting the targets -----------------------------------------------------------------


def default_loop() -> str:
    """The event loop chatmend runs on by default, which the floors then use too.

    ``chatmend serve --loop auto`` picks uvloop when it is installed; a chatmend without the
    flag runs on asyncio's own loop.
    """
    return "uvloop" if chatmend_has_loop_flag() and uvloop_available() else "asyncio"


def start_fake(fleet: Fleet, name: str = "direct") -> str:
    """The fake upstream (on uvloop when installed: it is the backdrop, the faster the better)."""
    port = free_port()
    loop = "uvloop" if uvloop_available() else "asyncio"
    command = [sys.executable, "-m", "bench.servers", "fake", str(port), "--loop", loop]
    return fleet.start(name, command, port)


#: nginx answering every request with ``COMPLETION``, in one process, everything it writes in
#: its own directory (``{root}``), on loopback (``{port}``).
NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log error;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    client_max_body_size 0;
    client_body_buffer_size 1m;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            default_type application/json;
            return 200 '{body}';
        }}
    }}
}}
"""


def nginx_bin() -> str | None:
    """nginx, if installed (Debian puts it in /usr/sbin, often off a user's PATH)."""
    found = shutil.which("nginx")
    if found is None and Path("/usr/sbin/nginx").exists():
        found = "/usr/sbin/nginx"
    return found


def start_nginx(fleet: Fleet, name: str = "direct") -> str | None:
    """The fixed completion from nginx on a free loopback port (its config and files in a new
    temporary directory), or ``None`` if nginx is not installed."""
    binary = nginx_bin()
    if binary is None:
        return None
    root = Path(tempfile.mkdtemp(prefix="chatmend-bench-nginx-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    port = free_port()
    body = COMPLETION.decode()
    assert "'" not in body and "\\" not in body  # quoted as is in the config
    conf = root / "nginx.conf"
    conf.write_text(NGINX_CONF.format(root=root, port=port, body=body))
    return fleet.start(
        name, [binary, "-p", str(root), "-e", str(root / "error.log"), "-c", str(conf)], port
    )


def start_upstream(fleet: Fleet, name: str = "direct") -> tuple[str, str]:
    """The fastest fake upstream at hand for non-streaming requests: nginx if installed, else
    the Python fake (with a line on stderr saying so); its URL and which it is."""
    url = start_nginx(fleet, name)
    if url is not None:
        return url, "nginx"
    print(
        "nginx not installed: the Python fake upstream stands in (it shares the cores with the "
        "targets; Debian: apt-get install nginx-light, or make bench installs it)",
        file=sys.stderr,
    )
    return start_fake(fleet, name), "python"


def start_floor(fleet: Fleet, kind: str, upstream: str, loop: str | None = None) -> str:
    port = free_port()
    command = [sys.executable, "-m", "bench.servers", kind, str(port), upstream]
    command += ["--loop", loop or default_loop()]
    return fleet.start(kind, command, port)


def start_chatmend(
    fleet: Fleet,
    upstream: str,
    name: str = "chatmend",
    loop: str | None = None,
    extra: Sequence[str] = (),
) -> str:
    """``chatmend serve`` with its default config (JSON logs to /dev/null); ``extra`` flags
    are appended (e.g. ``--workers 2``)."""
    port = free_port()
    command = [venv_bin("chatmend"), "serve", "--upstream", upstream, "--port", str(port)]
    if loop is not None:
        command += ["--loop", loop]
    return fleet.start(name, [*command, *extra], port)


if __name__ == "__main__":
    serve(sys.argv[1:])
