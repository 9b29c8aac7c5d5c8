"""Issue 15: no request may stall the others, walk around a route's gate or read another's
reasoning. Each test replays an attack that worked on 3c64645.

The stall tests run `chatmend serve` as a real process and probe ``/healthz`` on their own
connections while the attack runs: the median probe must answer within 100 ms and none may
take a second (the attacks stalled every client 2 to 16 s before; off the loop the slowest
probe takes 10-50 ms here, up to 0.7 s when other jobs load the two cores). The probes come
from a process of their own, so the test's own work does not delay them.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import statistics
import sys
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import ConfigError, parse_config
from proxy.observe.log import CONTENT_ALLOWED, MAX_FIELD_CHARS, Sink, Timestamp, cap, cap_fields
from proxy.relay.credentials import request_scope
from proxy.server.app import create_app
from proxy.stash.redis_store import redact
from tests.conftest import base_url
from tests.logs import captured_logs
from tests.proxy.test_operate import serving
from tests.proxy.test_security import raw_exchange, status_of
from tests.soak import reused_id_turns
from tests.transcripts import BROKEN, chat

Server = Callable[..., Awaitable[TestServer]]
Client = Callable[..., Awaitable[TestClient[Any, Any]]]

TOKEN = "chatmend-client-token-abcdef"
URL = "/v1/chat/completions"


@dataclass
class Recorder:
    """An upstream that answers 200 and records what reached it."""

    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)

    def app(self) -> web.Application:
        async def record(request: web.Request) -> web.Response:
            body = await request.read()
            self.requests.append(
                (request.method, request.rel_url.raw_path, dict(request.headers), body)
            )
            return web.json_response({"id": "ok", "object": "chat.completion", "choices": []})

        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", record)
        return app


async def _recorder(aiohttp_server: Server) -> tuple[Recorder, str]:
    recorder = Recorder()
    server = await aiohttp_server(recorder.app(), auto_decompress=False)
    return recorder, base_url(server)


# ---------------------------------------------------------------------------------------------
# Finding 4: the route gate is matched on the decoded path
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/admin/v1/models", 401),
        ("/%61dmin/v1/models", 401),  # was: the default route, no token asked
        ("/ADMIN/v1/models", 401),
        ("/%41dmin/v1/models", 401),
        ("/admin%2Fv1/models", 400),  # an encoded slash: refused
        ("/admin%2fv1/models", 400),
        ("//admin/v1/models", 400),  # an empty segment: refused
        ("/admin//v1/models", 400),
    ],
)
async def test_the_route_gate_holds_however_the_path_is_spelled(
    path: str, status: int, aiohttp_server: Server, aiohttp_client: Client
) -> None:
    recorder, url = await _recorder(aiohttp_server)
    config = parse_config(
        {
            "upstream": {"url": url},
            "routes": {"admin": {"upstream": {"url": url}, "client_tokens_env": "TOKENS"}},
        },
        env={"TOKENS": TOKEN},
    )
    client = await aiohttp_client(create_app(config))
    assert client.port is not None
    raw = f"GET {path} HTTP/1.1\r\nHost: chatmend\r\nConnection: close\r\n\r\n".encode()
    with capture_logs() as logs:
        response = await raw_exchange(client.port, raw)
    assert status_of(response) == status
    assert recorder.requests == []
    if status == 400:
        assert [e["limit"] for e in logs if e["event"] == "limit_exceeded"] == ["path"]
    metrics = await (await client.get("/metrics")).text()
    if status == 400:
        assert 'chatmend_limits_total{limit="path"} 1.0' in metrics


async def test_a_route_path_is_forwarded_as_the_client_encoded_its_rest(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    recorder, url = await _recorder(aiohttp_server)
    config = parse_config(
        {"upstream": {"url": url}, "routes": {"kimi": {"upstream": {"url": url + "/base"}}}}
    )
    client = await aiohttp_client(create_app(config))
    assert (await client.get("/%6Bimi/v1/files/a%20b?x=1")).status == 200
    assert [r[1] for r in recorder.requests] == ["/base/v1/files/a%20b"]


# ---------------------------------------------------------------------------------------------
# Finding 5: no reasoning scope without a credential
# ---------------------------------------------------------------------------------------------


def test_an_anonymous_request_has_no_reasoning_scope() -> None:
    assert request_scope("https://api.deepseek.com", {}) is None
    assert request_scope("https://api.deepseek.com", {"authorization": " "}) is None


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({"x-goog-api-key": "k1"}, {}),
        ({"ocp-apim-subscription-key": "k1"}, {}),
        ({}, {"key": "k1"}),
        ({"authorization": "Bearer k1"}, {}),
    ],
)
def test_every_credential_carrier_scopes_the_reasoning(
    headers: dict[str, str], query: dict[str, str]
) -> None:
    upstream = "https://api.deepseek.com"
    mine = request_scope(upstream, headers, query)
    other = request_scope(
        upstream,
        {k: v.replace("k1", "k2") for k, v in headers.items()},
        {k: v.replace("k1", "k2") for k, v in query.items()},
    )
    assert mine is not None and other is not None and mine != other


def test_one_credential_keeps_the_scope_older_versions_stored_under() -> None:
    import hashlib

    digest = hashlib.sha256(b"Bearer k1").hexdigest()
    assert request_scope("u", {"authorization": "Bearer k1"}) == f"u\n{digest}"


# ---------------------------------------------------------------------------------------------
# Finding 7 and the body policy, in process
# ---------------------------------------------------------------------------------------------


async def test_an_undecoded_body_keeps_its_content_encoding(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    recorder, url = await _recorder(aiohttp_server)
    client = await aiohttp_client(create_app(parse_config({"upstream": {"url": url}})))
    packed = gzip.compress(b'{"file": "x"}')
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    assert (await client.post("/v1/files", data=packed, headers=headers)).status == 200
    # A chat body the rules leave alone goes compressed too, byte for byte.
    clean = gzip.compress(chat([{"role": "user", "content": "hi"}]))
    assert (await client.post(URL, data=clean, headers=headers)).status == 200
    # One they repair goes decoded, without the header.
    broken = gzip.compress(chat(BROKEN["empty_tool_calls"]))
    assert (await client.post(URL, data=broken, headers=headers)).status == 200
    (_, _, files, sent_file), (_, _, clean_headers, sent_clean), (_, _, fixed, sent_fixed) = (
        recorder.requests
    )
    assert files["Content-Encoding"] == "gzip" and sent_file == packed
    assert clean_headers["Content-Encoding"] == "gzip" and sent_clean == clean
    assert "Content-Encoding" not in fixed and orjson.loads(sent_fixed)["messages"]


async def test_an_unknown_request_encoding_goes_as_it_came(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    recorder, url = await _recorder(aiohttp_server)
    client = await aiohttp_client(create_app(parse_config({"upstream": {"url": url}})))
    headers = {"Content-Encoding": "br"}
    response = await client.post(URL, data=b"\x0bnot-really-brotli", headers=headers)
    assert response.status == 200
    (_, _, sent_headers, body) = recorder.requests[0]
    assert sent_headers["Content-Encoding"] == "br" and body == b"\x0bnot-really-brotli"


async def test_a_decoded_body_over_max_body_bytes_is_refused_and_the_connection_closed(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    recorder, url = await _recorder(aiohttp_server)
    config = parse_config({"upstream": {"url": url}, "max_body_bytes": 64 * 1024})
    client = await aiohttp_client(create_app(config))
    bomb = gzip.compress(b"[" + b" " * (10 * 1024 * 1024) + b"]")  # 10 KB -> 10 MB
    assert len(bomb) < 64 * 1024
    with capture_logs() as logs:
        response = await client.post(URL, data=bomb, headers={"Content-Encoding": "gzip"})
    assert response.status == 413
    assert response.headers.get("Connection", "").lower() == "close"
    assert recorder.requests == []
    assert [e["limit"] for e in logs if e["event"] == "limit_exceeded"] == ["decoded_size"]


async def test_expect_100_continue_is_answered_here_and_not_forwarded(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    recorder, url = await _recorder(aiohttp_server)
    client = await aiohttp_client(create_app(parse_config({"upstream": {"url": url}})))
    response = await client.post(
        URL, data=chat([{"role": "user", "content": "hi"}]), expect100=True
    )
    assert response.status == 200
    assert "Expect" not in recorder.requests[0][2]


async def test_a_refused_request_is_never_asked_for_its_body(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    """No 100 Continue before the token check: the 401 comes first (and closes the connection,
    after aiohttp's bounded lingering read of what the client may still send)."""
    recorder, url = await _recorder(aiohttp_server)
    config = parse_config(
        {"upstream": {"url": url}, "client_tokens_env": "TOKENS"}, env={"TOKENS": TOKEN}
    )
    client = await aiohttp_client(create_app(config))
    assert client.port is not None
    raw = (
        f"POST {URL} HTTP/1.1\r\nHost: chatmend\r\nContent-Length: 1000000\r\n"
        "Content-Encoding: gzip\r\nExpect: 100-continue\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(raw)
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 401 ")
    assert b"connection: close" in head.lower()
    assert recorder.requests == []


@pytest.mark.parametrize("method", ["TRACE", "TRACK", "CONNECT", "PROPFIND"])
async def test_methods_outside_an_http_api_are_refused(
    method: str, aiohttp_server: Server, aiohttp_client: Client
) -> None:
    """TRACE would echo the route's upstream key back to the client."""
    recorder, url = await _recorder(aiohttp_server)
    config = parse_config(
        {"upstream": {"url": url, "api_key_env": "KEY"}, "client_tokens_env": "TOKENS"},
        env={"KEY": "sk-upstream-secret-0123456789", "TOKENS": TOKEN},
    )
    client = await aiohttp_client(create_app(config))
    assert client.port is not None
    target = "127.0.0.1:443" if method == "CONNECT" else "/v1/models"
    raw = (
        f"{method} {target} HTTP/1.1\r\nHost: chatmend\r\n"
        f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    ).encode()
    response = await raw_exchange(client.port, raw)
    # aiohttp's parser refuses the methods it does not know, CONNECT host:port is not routed.
    assert status_of(response) == (405 if method in ("TRACE", "PROPFIND") else status_of(response))
    assert status_of(response) in (400, 404, 405)
    assert b"sk-upstream-secret" not in response
    assert recorder.requests == []
    assert recorder.requests == []


def test_the_redis_password_is_redacted_in_the_query_too() -> None:
    shown = redact("redis://cache:6379/0?password=hunter2&db=1")
    assert "hunter2" not in shown and "db=1" in shown
    assert "hunter2" not in redact("redis://:hunter2@cache:6379/0")


def test_log_fields_are_capped() -> None:
    event = cap_fields(
        None,
        "info",
        {
            "event": "payload_sanitized",
            CONTENT_ALLOWED: True,
            "count": 10**6,
            "path": "/" + "a" * 10_000,
            "changes": [{"tool_call_id": "x" * 10_000}] * 5_000,
            "original": "kept whole: log_content is the operator's opt-in " * 100,
        },
    )
    assert CONTENT_ALLOWED not in event
    assert len(orjson.dumps(event)) < 100_000
    assert len(event["path"]) < MAX_FIELD_CHARS + 40 and event["count"] == 10**6
    assert len(event["changes"]) == 101 and event["changes"][-1] == "...[4900 more]"
    assert len(event["original"]) > 1000


def test_capping_a_line_of_short_fields_changes_nothing() -> None:
    """The fast path (short strings and numbers, as ``request_done``) gives what capping each
    field gives, and a long field or a list still takes the capping path."""
    short = {"event": "request_done", "status": 200, "ms": 1.5, "id": None, "ok": True}
    for event in (
        short,
        {**short, "path": "/" + "a" * (MAX_FIELD_CHARS - 1)},
        {**short, "path": "/" + "a" * MAX_FIELD_CHARS},
        {**short, "rules": ["a"] * 3},
        {**short, "status": HTTPStatus.OK, "original": "x" * 1000},
    ):
        capped = {k: v if k == "original" else cap(v) for k, v in event.items()}
        assert cap_fields(None, "info", {**event, CONTENT_ALLOWED: True}) == capped


#: What a route that logs no content must never see in a line: the text of a change's detail.
_TEXT = "the user's own words: my password is hunter2"


def test_content_is_withheld_unless_the_request_logs_content() -> None:
    """Privacy is the logger's (proxy/observe/log.py): a change that carries the client's text
    (``original`` arguments, a dropped ``content`` or ``output``, a long ``value``) loses it on
    every line whose request did not opt in, however deep it stands, and keeps its size; a
    word such as ``auto`` stays, and the opted-in line keeps everything."""
    changes = [
        {"rule": "invalid-tool-arguments", "index": 1, "original": _TEXT},
        {"rule": "thinking-parts", "index": 2, "content": [{"type": "text", "text": _TEXT}]},
        {"rule": "responses-orphan-outputs", "index": 3, "output": _TEXT},
        {"rule": "request-values", "index": -1, "value": _TEXT},
        {"rule": "request-values", "index": -1, "value": "auto"},
        {"rule": "null-content", "index": 4, "content": None, "content_length": 0},
    ]
    for event in (
        {"event": "payload_sanitized", "changes": changes},
        {"event": "recovery_failed", "changed": [{"nested": changes}]},
        {"event": "odd", "content": _TEXT},
        {"event": "odd", "original": "short"},
    ):
        line = orjson.dumps(cap_fields(None, "info", dict(event)))
        assert b"hunter2" not in line and b"short" not in line, line
        assert b"log_content is off" in line
        kept = orjson.dumps(cap_fields(None, "info", {**event, CONTENT_ALLOWED: True}))
        assert (b"hunter2" in kept or b"short" in kept) and b"log_content is off" not in kept
    line = orjson.dumps(cap_fields(None, "info", {"event": "e", "changes": changes}))
    assert b'"value":"auto"' in line and b'"content":null' in line
    assert f"...[{len(_TEXT)} chars, not logged".encode() in line


async def test_a_route_that_logs_content_says_so_on_its_own_lines_only(
    fake_server: Any, aiohttp_client: Any
) -> None:
    """The flow binds the route's opt-in once: the lines of a request on a route with
    ``log_content: true`` carry the mark the processor reads, the others do not; every line of a
    request carries its id."""
    upstream = str(fake_server.make_url("")).rstrip("/")
    body = chat(BROKEN["truncated_arguments"])
    for log_content in (False, True):
        config = parse_config({"log_content": log_content}, default_upstream=upstream, env={})
        client = await aiohttp_client(create_app(config))
        with captured_logs() as logs:
            response = await client.post("/v1/chat/completions", data=body)
        assert response.status == 200
        own = response.headers["X-Chatmend-Request-Id"]
        mine = [e for e in logs if e.get("request_id") == own]
        assert {e["event"] for e in mine} >= {"payload_sanitized", "request_done"}
        assert all((CONTENT_ALLOWED in e) is log_content for e in mine)


def test_the_timestamp_is_written_as_structlogs_iso_utc_stamper_writes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stamp = Timestamp()
    for ns in (0, 1_764_630_000_000_000_000, 1_764_630_000_123_456_789, 1_764_630_001_000_000_999):
        monkeypatch.setattr(time, "time_ns", lambda ns=ns: ns)
        seconds, rest = divmod(ns, 1_000_000_000)
        at = datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000)
        expected = at.isoformat().replace("+00:00", "Z")  # structlog's TimeStamper("iso")
        assert stamp(None, "info", {})["timestamp"] == expected


def test_a_failing_sink_is_counted_never_raised() -> None:
    class Closed:
        def write(self, data: bytes) -> int:
            raise BrokenPipeError

        def flush(self) -> None:
            raise ValueError("closed")

    sink = Sink(Closed())  # type: ignore[arg-type]
    sink.msg(b"line")
    sink.msg(b"line")
    assert sink.failures == 2 and sink.failing  # one a line
    written = io.BytesIO()
    sink.file = written
    sink.msg(b"line")
    assert written.getvalue() == b"line\n" and not sink.failing and sink.failures == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("offload_body_bytes", 0),
        ("offload_processes", -1),
        ("offload_processes", "two"),
        ("sanitize_deadline", 0),
    ],
)
def test_the_new_limits_are_validated(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"^{key}:"):
        parse_config({key: value})


# ---------------------------------------------------------------------------------------------
# A real `chatmend serve`: /healthz while the attack runs
# ---------------------------------------------------------------------------------------------


#: The prober, a process of its own (the test process is busy sending the attack): GET
#: /healthz on a fresh connection every 20 ms until its stdin closes (five probes at least),
#: then print the latencies.
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
    stop = stop or bool(select.select([sys.stdin], [], [], 0.02)[0])
print(json.dumps(latencies))
"""


async def _probe(url: str, attack: Awaitable[Any]) -> tuple[Any, list[float]]:
    """Run ``attack`` while the prober measures /healthz."""
    host, port = url.removeprefix("http://").split(":")
    prober = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROBER, host, port,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert prober.stdin is not None
    try:
        await asyncio.sleep(0.05)  # the prober is up
        result = await attack
    finally:
        prober.stdin.close()
        out, _ = await prober.communicate()
    latencies: list[float] = orjson.loads(out)
    return result, latencies


def _assert_responsive(latencies: list[float]) -> None:
    assert statistics.median(latencies) < 0.1, latencies
    assert max(latencies) < 1.0, latencies


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=io.BytesIO(body), headers=headers) as response,
    ):
        return response.status, await response.read()


def _config(tmp_path: Path, url: str, extra: str = "") -> Path:
    config = tmp_path / "chatmend.yaml"
    config.write_text(f"upstream: {{url: '{url}'}}\n{extra}")
    return config


def _reused_id_turns(turns: int) -> bytes:
    return chat(reused_id_turns(turns))


@pytest.mark.slow
async def test_a_replayed_history_of_thousands_of_turns_stalls_no_one(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Finding 1: 4000 turns reusing one id froze the loop 3.9 s (8,000 passes)."""
    recorder, url = await _recorder(aiohttp_server)
    body = gzip.compress(_reused_id_turns(6000))
    async with serving(_config(tmp_path, url)) as proxy:
        (status, _), latencies = await _probe(
            proxy.url, _post(proxy.url + URL, body, {"Content-Encoding": "gzip"})
        )
    assert status == 200
    sent = orjson.loads(recorder.requests[0][3])
    assert len(sent["messages"]) == 3  # collapsed to one turn
    _assert_responsive(latencies)


@pytest.mark.slow
async def test_a_gzip_bomb_costs_neither_memory_nor_time(
    tmp_path: Path, aiohttp_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 2: a 1 MB gzip body inflated to 1 GB on the loop (410 MB RSS, 4.6 s stall),
    before the token check, and went on inflating after the 401."""
    recorder, url = await _recorder(aiohttp_server)
    deflater = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1024 * 1024)
    bomb = b"".join(deflater.compress(zeros) for _ in range(256)) + deflater.flush()
    assert len(bomb) < 2 * 1024 * 1024  # 256 MiB of zeros
    config = _config(tmp_path, url, "client_tokens_env: TOKENS\nmax_body_bytes: 8388608\n")
    monkeypatch.setenv("TOKENS", TOKEN)  # the server process inherits it
    async with serving(config) as proxy:
        before = _rss_kib(proxy.process.pid)

        async def attack() -> list[tuple[int, bytes]]:
            gz = {"Content-Encoding": "gzip"}
            authed = {**gz, "Authorization": f"Bearer {TOKEN}"}
            return await asyncio.gather(
                *(_post(proxy.url + URL, bomb, gz) for _ in range(3)),
                *(_post(proxy.url + URL, bomb, authed) for _ in range(3)),
            )

        answers, latencies = await _probe(proxy.url, attack())
        grown = _rss_kib(proxy.process.pid) - before
    assert [status for status, _ in answers] == [401] * 3 + [413] * 3
    assert recorder.requests == []
    assert grown < 150 * 1024, f"RSS grew {grown} KiB"  # 6 bodies of 1 MB, 8 MB decoded each
    _assert_responsive(latencies)


def _tiny_messages(megabytes: int) -> bytes:
    message = {"role": "user", "content": "hi"}
    return chat([message] * (megabytes * 1024 * 1024 // 31))


@pytest.mark.slow
async def test_a_big_body_is_repaired_off_the_event_loop(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Finding 3: 30 MB of tiny messages stalled every client 3.6 s. The deadline keeps the
    test short: the worker's first 1.5 s are what is probed, then the body goes as it came."""
    recorder, url = await _recorder(aiohttp_server)
    body = _tiny_messages(24)  # inline (before): a stall of about 2 s
    async with serving(_config(tmp_path, url, "sanitize_deadline: 1.5\n")) as proxy:
        (status, _), latencies = await _probe(proxy.url, _post(proxy.url + URL, body, {}))
    assert status == 200
    assert recorder.requests[0][3] == body  # nothing to repair: byte for byte
    _assert_responsive(latencies)


@pytest.mark.slow
async def test_a_repair_past_its_deadline_fails_open_counted(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    recorder, url = await _recorder(aiohttp_server)
    body = _tiny_messages(4)
    config = _config(tmp_path, url, "sanitize_deadline: 0.01\n")
    async with serving(config) as proxy:
        status, _ = await _post(proxy.url + URL, body, {})
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(proxy.url + "/metrics")).text()
        (event,) = await proxy.wait_for("limit_exceeded")
    assert status == 200
    assert recorder.requests[0][3] == body  # fail-open: as it came
    assert event["limit"] == "sanitize_deadline"
    assert 'chatmend_limits_total{limit="sanitize_deadline"} 1.0' in metrics


@pytest.mark.slow
async def test_hostile_tool_arguments_stall_no_one(tmp_path: Path, aiohttp_server: Server) -> None:
    """Finding 3: 21 KB of gzip holding `{"a":{"a":...` arguments took 16 s inline (now cut at
    1024 levels); a wide shape reaches the token cap instead."""
    recorder, url = await _recorder(aiohttp_server)
    arguments = "{" + '"a":1,' * 200_000 + "x"  # 1.2 MB: over offload_body_bytes
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    body = gzip.compress(
        chat(
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            ]
        )
    )
    assert len(body) < 100_000
    async with serving(_config(tmp_path, url)) as proxy:
        (status, _), latencies = await _probe(
            proxy.url, _post(proxy.url + URL, body, {"Content-Encoding": "gzip"})
        )
        (event,) = await proxy.wait_for("limit_exceeded")
    assert status == 200
    sent = orjson.loads(recorder.requests[0][3])
    assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert event["limit"] == "arguments_cost_cap"
    _assert_responsive(latencies)


@pytest.mark.slow
async def test_a_closed_stdout_fails_no_request(tmp_path: Path, aiohttp_server: Server) -> None:
    """Finding 6: `chatmend serve | head -c 1` answered every request with an empty reply."""
    import asyncio.subprocess

    from tests.proxy.test_cli import CHATMEND, free_port, wait_listening

    _, url = await _recorder(aiohttp_server)
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        str(CHATMEND), "serve", "--config", str(_config(tmp_path, url)), "--port", str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await wait_listening(port)
        assert process.stdout is not None
        await process.stdout.read(1)  # as `head -c 1` does, then
        process._transport.get_pipe_transport(1).close()  # type: ignore[attr-defined]
        await asyncio.sleep(0.1)
        proxy = f"http://127.0.0.1:{port}"
        clean = chat([{"role": "user", "content": "hi"}])
        for _ in range(3):
            status, answer = await _post(proxy + URL, clean, {})
            assert status == 200 and orjson.loads(answer)["id"] == "ok"
        async with aiohttp.ClientSession() as http:
            ready = await http.get(proxy + "/readyz")
            assert ready.status == 503
            assert (await ready.json())["reason"] == "log_sink"
            metrics = await (await http.get(proxy + "/metrics")).text()
        assert "chatmend_log_write_failures_total 0.0" not in metrics
        assert "chatmend_log_write_failures_total" in metrics
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.slow
async def test_workers_repair_a_big_body_in_their_worker_processes(
    tmp_path: Path, aiohttp_server: Server
) -> None:
    """Under --workers each server process has its own pool; the repair is the inline one."""
    from rules.providers.sanitize import sanitize_body

    recorder, url = await _recorder(aiohttp_server)
    padding = [{"role": "user", "content": "x" * 1000}, {"role": "assistant", "content": "y"}]
    body = chat(padding * 1100 + BROKEN["empty_tool_calls"])
    assert len(body) > 1024 * 1024  # over offload_body_bytes
    expected = sanitize_body(body, parse_config({}).planner()).body
    assert expected != body
    async with serving(_config(tmp_path, url), "--workers", "2") as proxy:
        statuses = [(await _post(proxy.url + URL, body, {}))[0] for _ in range(3)]
    assert statuses == [200] * 3
    assert [sent for *_, sent in recorder.requests] == [expected] * 3
