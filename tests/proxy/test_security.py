"""Security: the upstream comes only from config (no SSRF), credentials and message text never
reach the logs or chatmend's error bodies, loopback by default, and limits with clear errors."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs
from yarl import URL

from proxy.config import DEFAULT_HOST, Config, parse_config
from proxy.relay.upstream import upstream_url
from proxy.server.app import MAX_HEADER_BYTES, RUNTIME_KEY, planner_of
from proxy.server.reload import reload_config
from rules.engine.base import Outcome, Rule, RuleContext
from tests.budget import examples
from tests.builders import call
from tests.conftest import ProxyFactory
from tests.faulty_upstream import FaultyUpstream, Request, respond, stall_before_headers
from tests.proxy.test_cli import free_port, wait_listening

Client = TestClient[Any, Any]
CHATMEND = Path(sys.executable).parent / "chatmend"
OK = orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": []})


@pytest.fixture
async def upstream() -> AsyncIterator[FaultyUpstream]:
    """The configured upstream: answers 200 to anything and records every request."""
    server = await FaultyUpstream(default=respond(200, OK)).start()
    yield server
    await server.close()


@pytest.fixture
async def evil() -> AsyncIterator[FaultyUpstream]:
    """Another server on loopback that no request may ever reach."""
    server = await FaultyUpstream(default=respond(200, b'{"pwned": true}')).start()
    yield server
    await server.close()


async def raw_exchange(port: int, data: bytes, timeout: float = 3) -> bytes:
    """Send raw bytes, return everything the proxy answers until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def body_of(response: bytes) -> bytes:
    return response.partition(b"\r\n\r\n")[2]


# ---------------------------------------------------------------------------------------------
# SSRF: whatever the request line, Host header or path, only the configured upstream is reached
# ---------------------------------------------------------------------------------------------


def _authority(server: FaultyUpstream) -> str:
    return URL(server.url).raw_authority


@pytest.mark.parametrize(
    ("target", "forwarded_as"),
    [
        ("/v1/models", "/v1/models"),  # with a hostile Host header (below)
        ("http://{evil}/v1/models", "/v1/models"),  # absolute-form request line
        ("http://user@{evil}/v1/models?x=1", "/v1/models?x=1"),
        ("/v1/models?url=http://{evil}/", "/v1/models?url=http://{evil}/"),
        ("/@{evil}/v1/models", "/@{evil}/v1/models"),
        ("/v1/files/x.json", "/v1/files/x.json"),  # a dot inside a segment is fine
    ],
)
async def test_requests_reach_only_the_configured_upstream(
    target: str,
    forwarded_as: str,
    make_proxy: ProxyFactory,
    upstream: FaultyUpstream,
    evil: FaultyUpstream,
) -> None:
    proxy = await make_proxy(url=upstream.url)
    assert proxy.server.port is not None
    evil_authority = _authority(evil)
    request_target = target.format(evil=evil_authority)
    raw = (
        f"GET {request_target} HTTP/1.1\r\nHost: {evil_authority}\r\n"
        f"X-Forwarded-Host: {evil_authority}\r\nForwarded: host={evil_authority}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    response = await raw_exchange(proxy.server.port, raw)
    assert status_of(response) == 200
    assert body_of(response) == OK
    assert evil.connections == 0, "the evil server was contacted"
    (received,) = upstream.requests
    assert received.target == forwarded_as.format(evil=evil_authority)
    assert received.headers["host"] == _authority(upstream)


@pytest.mark.parametrize(
    "path",
    [
        "/../v1/models",
        "/v1/../../admin",
        "/v1/./models",
        "/%2e%2e/v1/models",
        "/%2E%2E/v1/models",
        "/.%2e/v1/models",
        "/v1/..%2f..%2fadmin",
        "/v1/%2e%2e%2Fadmin",
        "/v1/..%5cadmin",
        "/v1/..\\admin",
        "/v1/models/..",
        # issue 15: Tomcat's `..;`, double-encoded and overlong UTF-8 dots
        "/v1/..;/admin",
        "/v1/..;x=1/admin",
        "/v1/%252e%252e/admin",
        "/v1/%c0%ae%c0%ae/admin",
        "/v1/%e0%80%ae%e0%80%ae/admin",
        # and the paths that would have reached another host's path or skipped a route gate
        "//evil.example/v1/models",
        "/%2F%2Fevil.example/v1/models",
        "/admin%2Fv1/models",
        "/v1//models",
    ],
)
async def test_dot_segments_are_refused(
    path: str, make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    """A base URL may carry a path (``https://gateway/tenant-a``): ``..`` must not climb out."""
    proxy = await make_proxy(url=upstream.url + "/tenant-a")
    assert proxy.server.port is not None
    raw = f"GET {path} HTTP/1.1\r\nHost: chatmend\r\nConnection: close\r\n\r\n".encode()
    with capture_logs() as logs:
        response = await raw_exchange(proxy.server.port, raw)
    assert status_of(response) == 400
    assert orjson.loads(body_of(response))["error"]["code"] == "invalid_path"
    assert upstream.requests == []
    done = [e for e in logs if e["event"] == "request_done"]
    assert done[0]["status"] == 400 and done[0]["outcome"] == "rejected"


async def test_the_base_path_is_kept(make_proxy: ProxyFactory, upstream: FaultyUpstream) -> None:
    proxy = await make_proxy(url=upstream.url + "/tenant-a")
    response = await proxy.get("/v1/models")
    assert response.status == 200
    assert upstream.requests[-1].target == "/tenant-a/v1/models"


@pytest.mark.parametrize(
    "request_line",
    [
        "GET @{evil}/v1/models HTTP/1.1",
        "GET .{evil}/v1/models HTTP/1.1",
        "GET :{port}/v1/models HTTP/1.1",
        "GET {evil}/v1/models HTTP/1.1",
        "CONNECT {evil} HTTP/1.1",
        "OPTIONS * HTTP/1.1",
        "GET \\\\{evil}/v1/models HTTP/1.1",
    ],
)
async def test_request_targets_without_a_leading_slash_go_nowhere(
    request_line: str, make_proxy: ProxyFactory, upstream: FaultyUpstream, evil: FaultyUpstream
) -> None:
    """Glued after the base URL these would change its authority; aiohttp refuses or does not
    route them, and ``upstream_url`` adds the slash anyway."""
    proxy = await make_proxy(url=upstream.url)
    assert proxy.server.port is not None
    evil_port = URL(evil.url).port
    line = request_line.format(evil=_authority(evil), port=evil_port)
    response = await raw_exchange(
        proxy.server.port,
        f"{line}\r\nHost: {_authority(evil)}\r\nConnection: close\r\n\r\n".encode(),
    )
    assert status_of(response) in {400, 404}
    assert upstream.requests == []
    assert evil.connections == 0


@settings(max_examples=examples(3), deadline=None)
@given(st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=40))
def test_upstream_url_never_changes_the_origin(path_qs: str) -> None:
    for base in ("https://api.deepseek.com", "http://10.0.0.7:8080/openai"):
        configured = URL(base)
        url = upstream_url(base, path_qs)
        assert (url.scheme, url.host, url.port) == (
            configured.scheme,
            configured.host,
            configured.port,
        )
        assert url.raw_path.startswith(configured.raw_path.rstrip("/") + "/")


# ---------------------------------------------------------------------------------------------
# Credentials and message text never reach the logs or chatmend's own error bodies
# ---------------------------------------------------------------------------------------------

CANARY = "CANARY-c0ffee42"

#: Every header that may carry a credential, each holding the canary.
CREDENTIAL_HEADERS = {
    "Authorization": f"Bearer sk-{CANARY}",
    "api-key": f"azure-{CANARY}",
    "x-api-key": f"anthropic-{CANARY}",
    "Cookie": f"session={CANARY}; other=1",
    "Proxy-Authorization": f"Basic {CANARY}",
    "X-Goog-Api-Key": CANARY,
}


#: The canary in every text field a message can hold, including tool arguments the rules
#: repair, replace with ``{}``, or receive as an object, and results the rules drop.
CANARY_MESSAGES: list[Any] = [
    {"role": "system", "content": CANARY},
    {"role": "user", "content": [{"type": "text", "text": CANARY}]},
    {"role": "assistant", "content": CANARY, "reasoning_content": CANARY, "tool_calls": []},
    {
        "role": "assistant",
        "content": CANARY,
        "reasoning_content": f"thinking about {CANARY}",
        "tool_calls": [
            call("c1", "bash", '{"cmd": "' + CANARY),  # truncated: closed
            call("c2", "bash", f"{{'cmd': '{CANARY}',}}"),  # Python literal, trailing comma
            call("c3", "bash", f"not json at all {CANARY}"),  # unrepairable: replaced with {}
            call("c4", "bash", {"cmd": CANARY}),  # an object instead of a string
            call("c1", "bash", '{"cmd": "' + CANARY + '"}'),  # a duplicate id
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": CANARY},
    {"role": "tool", "tool_call_id": "c1", "content": f"second result {CANARY}"},
    {"role": "tool", "tool_call_id": "unknown", "content": f"orphan {CANARY}"},
    {"role": "user", "content": CANARY},
    {"role": "tool", "content": f"no id {CANARY}"},
]


def _exploding(messages: list[Any], ctx: RuleContext) -> Outcome:
    raise ValueError(f"rule saw {CANARY}")


@dataclass
class Exchange:
    status: int
    body: bytes


@dataclass
class Probe:
    """Requests covering every answer chatmend gives itself and every log event."""

    proxy: Client
    results: list[Exchange] = field(default_factory=list)

    async def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        all_headers = {**CREDENTIAL_HEADERS, **(headers or {})}
        async with self.proxy.request(method, path, data=body, headers=all_headers) as response:
            data = await response.read()
            self.results.append(Exchange(response.status, data))


def chat(messages: list[Any], **extra: Any) -> bytes:
    return orjson.dumps({"model": "m", "messages": messages, **extra})


async def run_probe(proxy: Client) -> Probe:
    probe = Probe(proxy)
    await probe.send("POST", "/v1/chat/completions", chat(CANARY_MESSAGES))
    await probe.send("POST", "/v1/chat/completions", chat(CANARY_MESSAGES, stream=True))
    await probe.send("POST", "/v1/chat/completions", f"{{not json {CANARY}".encode())
    await probe.send("POST", "/v1/chat/completions", b"[" * 2000 + CANARY.encode())
    await probe.send("POST", "/v1/chat/completions", chat(CANARY_MESSAGES) * 100)  # 413
    await probe.send("GET", f"/v1/models?key={CANARY}")
    await probe.send("GET", "/v1/models", headers={"X-Big": CANARY * (MAX_HEADER_BYTES // 10)})
    return probe


def assert_no_canary(logs: list[MutableMapping[str, Any]], probe: Probe) -> None:
    assert logs, "the requests were logged"
    for line in logs:
        assert CANARY not in repr(line), f"canary in a log line: {line}"
    for exchange in probe.results:
        if exchange.status >= 400:  # the upstream here never fails: chatmend answered these
            assert CANARY.encode() not in exchange.body, exchange


async def test_no_credential_or_message_text_in_logs_or_error_bodies(
    make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    proxy = await make_proxy({"max_body_bytes": 64 * 1024}, url=upstream.url)
    boom = Rule("exploding", "test", "test", "test", "safe", True, _exploding)
    cast(list[Any], planner_of(proxy.app).plans["deepseek"].steps).insert(0, (boom, boom.context()))
    with capture_logs() as logs:
        probe = await run_probe(proxy)
    statuses = sorted({exchange.status for exchange in probe.results})
    assert statuses == [200, 400, 413, 431]
    events = {line["event"] for line in logs}
    assert {
        "payload_sanitized",
        "payload_not_sanitized",
        "rule_failed",
        "request_done",
    } <= events
    assert_no_canary(logs, probe)
    # The credentials themselves were forwarded untouched: chatmend is transparent to them.
    sent = upstream.requests[0].headers
    assert sent["authorization"] == CREDENTIAL_HEADERS["Authorization"]
    assert sent["x-api-key"] == CREDENTIAL_HEADERS["x-api-key"]


@pytest.mark.parametrize("fault", ["refused", "timeout"])
async def test_no_canary_on_upstream_failures(fault: str, make_proxy: ProxyFactory) -> None:
    stalled = await FaultyUpstream(default=stall_before_headers()).start()
    url = f"http://127.0.0.1:{free_port()}" if fault == "refused" else stalled.url
    proxy = await make_proxy(url=url, read_timeout=0.2)
    try:
        with capture_logs() as logs:
            probe = Probe(proxy)
            await probe.send("POST", "/v1/chat/completions", chat(CANARY_MESSAGES))
    finally:
        await stalled.close()
    assert probe.results[0].status == (502 if fault == "refused" else 504)
    assert any(line["event"] == "upstream_failed" for line in logs)
    assert_no_canary(logs, probe)


# ---------------------------------------------------------------------------------------------
# A real process: every byte it writes, aiohttp's own error paths included
# ---------------------------------------------------------------------------------------------


@dataclass
class Served:
    url: str
    port: int
    stdout: bytes = b""
    stderr: bytes = b""


async def _serve(*args: str) -> tuple[asyncio.subprocess.Process, Served]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        str(CHATMEND),
        "serve",
        "--port",
        str(port),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "CHATMEND_CONFIG": ""},
    )
    try:
        await wait_listening(port)
    except AssertionError:
        process.kill()
        raise
    return process, Served(f"http://127.0.0.1:{port}", port)


def _listening(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on ``port`` (from /proc/net/tcp{,6})."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
async def test_a_real_process_binds_loopback_and_never_logs_a_canary(
    upstream: FaultyUpstream,
) -> None:
    assert Config().listen.host == DEFAULT_HOST == "127.0.0.1"
    assert parse_config({}).listen.host == "127.0.0.1"
    process, served = await _serve("--upstream", upstream.url)
    try:
        assert _listening(served.port) == {"0100007F"}, "bound to 127.0.0.1 only"
        headers = {**CREDENTIAL_HEADERS, "Connection": "close"}
        async with aiohttp.ClientSession() as http:
            for body in (chat(CANARY_MESSAGES), b"[" * 2000, f"{{{CANARY}".encode()):
                async with http.post(
                    f"{served.url}/v1/chat/completions", data=body, headers=headers
                ) as response:
                    await response.read()
        # Lines aiohttp's parser refuses before chatmend sees the request; its error text
        # quotes the line, so it must not reach the log.
        head = "GET /v1/models HTTP/1.1\r\nHost: x\r\n"
        for extra in (
            f"Authorization: Bearer {CANARY}{'x' * 70_000}\r\n",  # over the field limit
            f"Authorization: Bearer {CANARY}\r\nBad Header: {CANARY}\r\n",  # malformed
            "".join(f"X-H{n}: {CANARY}\r\n" for n in range(200)),  # too many headers
        ):
            answer = await raw_exchange(served.port, (head + extra + "\r\n").encode())
            assert status_of(answer) == 400
        with contextlib.suppress(TimeoutError):  # left half-sent when the process stops
            await raw_exchange(served.port, f"GET /{CANARY} HTTP/1.1\r\nHost:".encode(), 0.2)
    finally:
        process.terminate()
        served.stdout, served.stderr = await process.communicate()
    lines = [orjson.loads(line) for line in served.stdout.splitlines()]  # only JSON lines
    started = next(line for line in lines if line["event"] == "proxy_started")
    assert started["listen"] == f"127.0.0.1:{served.port}"
    assert [line for line in lines if line["event"] == "library_log"], "aiohttp's errors logged"
    assert CANARY.encode() not in served.stdout
    assert CANARY.encode() not in served.stderr
    assert served.stderr == b""
    assert upstream.requests, "the chat request reached the upstream"
    assert all(isinstance(request, Request) for request in upstream.requests)


# ---------------------------------------------------------------------------------------------
# Limits: header size and JSON depth (body size: tests/proxy/test_proxy.py)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Big": "x" * (MAX_HEADER_BYTES + 1)},  # one large header
        {f"X-Many-{n}": "y" * 1000 for n in range(40)},  # many medium ones
    ],
)
async def test_oversized_headers_get_431(
    headers: dict[str, str], make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    proxy = await make_proxy(url=upstream.url)
    response = await proxy.post("/v1/chat/completions", data=chat([]), headers=headers)
    assert response.status == 431
    error = (await response.json())["error"]
    assert set(error) == {"message", "type", "code"}
    assert error["code"] == "request_headers_too_large"
    assert upstream.requests == []


async def test_headers_just_under_the_limit_pass(
    make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    proxy = await make_proxy(url=upstream.url)
    response = await proxy.get("/v1/models", headers={"X-Big": "x" * (MAX_HEADER_BYTES // 2)})
    assert response.status == 200


async def test_json_nested_too_deep_gets_400(
    make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    """orjson stops at 1024 levels; rather than forward a chat body it could not inspect (and
    that may hurt the upstream's parser), chatmend refuses it."""
    proxy = await make_proxy(url=upstream.url)
    deep = b'{"messages": [{"role": "user", "content": ' + b"[" * 1100 + b"]" * 1100 + b"}]}"
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=deep)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == "json_too_deep"
    assert error["type"] == "invalid_request_error"
    assert upstream.requests == []
    skipped = [e for e in logs if e["event"] == "payload_not_sanitized"]
    assert skipped[0]["reason"] == "json_too_deep"


async def test_deep_json_elsewhere_passes_through(
    make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    """chatmend parses only chat-completions bodies; other paths are not its business."""
    proxy = await make_proxy(url=upstream.url)
    deep = b"[" * 1100 + b"]" * 1100
    response = await proxy.post("/v1/embeddings", data=deep)
    assert response.status == 200
    assert upstream.requests[-1].body == deep


async def test_nesting_within_the_limit_is_forwarded(
    make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    proxy = await make_proxy(url=upstream.url)
    body = b'{"messages": [{"role": "user", "content": ' + b"[" * 1000 + b"]" * 1000 + b"}]}"
    response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 200
    assert upstream.requests[-1].body == body


async def test_a_route_held_key_and_client_tokens_never_reach_logs_or_bodies(
    make_proxy: ProxyFactory, upstream: FaultyUpstream
) -> None:
    key, token = f"sk-held-{CANARY}", f"token-{CANARY}-0123456789"
    env = {"HELD_KEY": key, "HELD_TOKENS": token}
    yaml = {
        "routes": {
            "held": {
                "upstream": {"url": upstream.url, "api_key_env": "HELD_KEY"},
                "client_tokens_env": "HELD_TOKENS",
            }
        }
    }
    proxy = await make_proxy(yaml, env=env)
    config = proxy.app[RUNTIME_KEY].current.config
    probe = Probe(proxy)
    with capture_logs() as logs:
        for headers in ({"Authorization": f"Bearer {token}"}, {"Authorization": "Bearer nope"}):
            await probe.send("POST", "/held/v1/chat/completions", chat(CANARY_MESSAGES), headers)
        ok = reload_config(proxy.app, lambda: parse_config(yaml, env={"HELD_TOKENS": token}))
    assert not ok  # HELD_KEY is gone: rejected, naming the variable only
    assert [exchange.status for exchange in probe.results] == [200, 401]
    assert_no_canary(logs, probe)
    assert CANARY not in repr(config) and CANARY not in str(config)
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {key}"


# ---------------------------------------------------------------------------------------------
# No cookie jar: what an upstream sets for one client never rides on another client's request
# ---------------------------------------------------------------------------------------------

COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi"},
                "finish_reason": "stop",
            }
        ],
    }
)


async def test_a_cookie_the_upstream_sets_reaches_only_its_client(
    make_proxy: ProxyFactory,
) -> None:
    """A shared gateway's upstream session kept aiohttp's default cookie jar: a cookie the
    upstream set on one client's answer (a load balancer's, a bot check's) went out on every
    later request, whoever sent it. The client gets its ``Set-Cookie``; its Cookie header is
    forwarded as it sent it; chatmend adds none."""
    import openai

    server = await FaultyUpstream(
        script=[
            respond(
                200,
                COMPLETION,
                {"Set-Cookie": "__cf_bm=alice-session; Path=/; HttpOnly"},
                keep_alive=True,
            )
        ],
        default=respond(200, COMPLETION, keep_alive=True),
    ).start()
    try:
        # By name: aiohttp's jar keeps no cookie from an IP address, a provider has a name.
        proxy = await make_proxy(url=server.url.replace("127.0.0.1", "localhost"))
        base = str(proxy.make_url("/v1"))
        alice = openai.AsyncOpenAI(base_url=base, api_key="sk-alice", max_retries=0)
        bob = openai.AsyncOpenAI(base_url=base, api_key="sk-bob", max_retries=0)
        messages: Any = [{"role": "user", "content": "hi"}]
        answer = await alice.chat.completions.with_raw_response.create(model="m", messages=messages)
        assert "alice-session" in answer.headers.get("set-cookie", "")
        await bob.chat.completions.create(model="m", messages=messages)
        await bob.chat.completions.create(
            model="m", messages=messages, extra_headers={"Cookie": "mine=bob"}
        )
        first, second, third = server.requests
        assert "cookie" not in first.headers
        assert "cookie" not in second.headers, "alice's cookie went out on bob's request"
        assert third.headers["cookie"] == "mine=bob"
        await alice.close()
        await bob.close()
    finally:
        await server.close()
