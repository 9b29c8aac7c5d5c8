"""End to end through the proxy against the fake strict upstream."""

from __future__ import annotations

import asyncio
import gzip
import re
import socket
from typing import Any, cast

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.relay.streaming import BUFFER_MAX_BYTES
from proxy.server.app import RUNTIME_KEY, SESSION_KEY, planner_of
from rules.chat import RULES
from rules.engine.base import Outcome, Rule, RuleContext
from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream, strict_errors
from tests.logs import captured_logs
from tests.transcripts import BROKEN, CLEAN_BODY, REJECTED_WITH, chat

Client = TestClient[Any, Any]


async def test_clean_payload_reaches_upstream_byte_identical(
    proxy: Client, fake: FakeUpstream
) -> None:
    response = await proxy.post("/v1/chat/completions", data=CLEAN_BODY)
    assert response.status == 200
    assert fake.received[-1].body == CLEAN_BODY


async def test_path_without_v1_is_sanitized_too(proxy: Client, fake: FakeUpstream) -> None:
    response = await proxy.post("/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 200, await response.text()
    assert fake.received[-1].path_qs == "/chat/completions"


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_fake_upstream_rejects_each_broken_kind(kind: str) -> None:
    assert strict_errors({"messages": BROKEN[kind]}), "the fixture must really be broken"


@pytest.mark.parametrize("kind", sorted(REJECTED_WITH))
async def test_pairing_kinds_are_rejected_with_the_catalogued_text(
    kind: str, make_proxy: ProxyFactory
) -> None:
    """Each pairing defect, unrepaired, gets the provider's own words back (rules off)."""
    assert strict_errors({"messages": BROKEN[kind]})[0] == REJECTED_WITH[kind]
    rules_off = dict.fromkeys((rule.name for rule in RULES), False)
    proxy = await make_proxy({"rules": rules_off, "recover": {"enabled": False}})
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN[kind]))
    assert response.status == 400
    assert (await response.json())["error"]["message"] == REJECTED_WITH[kind]


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_broken_payload_is_repaired_and_accepted(
    kind: str, proxy: Client, fake: FakeUpstream
) -> None:
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=chat(BROKEN[kind]))
    assert response.status == 200, await response.text()
    sent = orjson.loads(fake.received[-1].body)
    assert strict_errors(sent) == []
    sanitized = [e for e in logs if e["event"] == "payload_sanitized"]
    assert len(sanitized) == 1
    assert sanitized[0]["count"] == len(sanitized[0]["changes"]) > 0
    done = [e for e in logs if e["event"] == "request_done"]
    assert done[0]["changes"] == sanitized[0]["count"]
    assert done[0]["status"] == 200


async def test_reused_ids_keep_both_results(proxy: Client, fake: FakeUpstream) -> None:
    await proxy.post("/v1/chat/completions", data=chat(BROKEN["reused_tool_call_ids"]))
    sent = orjson.loads(fake.received[-1].body)["messages"]
    tool_texts = [m["content"] for m in sent if m["role"] == "tool"]
    assert tool_texts == ["1 failed", "diff --git a/app.py"]


async def test_other_fields_survive_a_rewrite(proxy: Client, fake: FakeUpstream) -> None:
    body = chat(BROKEN["empty_tool_calls"], temperature=0.25, tools=[{"type": "function"}])
    await proxy.post("/v1/chat/completions", data=body)
    sent = orjson.loads(fake.received[-1].body)
    assert sent["temperature"] == 0.25
    assert sent["tools"] == [{"type": "function"}]
    assert sent["model"] == "deepseek-chat"


async def test_upstream_rejection_is_relayed_verbatim(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    rules_off = dict.fromkeys((rule.name for rule in RULES), False)
    proxy = await make_proxy({"rules": rules_off, "recover": {"enabled": False}})
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 400
    body = await response.json()
    assert "empty array" in body["error"]["message"]
    assert fake.received[-1].body == chat(BROKEN["empty_tool_calls"])


async def test_streaming_relays_every_event(proxy: Client, fake: FakeUpstream) -> None:
    response = await proxy.post(
        "/v1/chat/completions", data=chat(BROKEN["split_assistant_turn"], stream=True)
    )
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    text = await response.text()
    assert text.count("data: ") == fake.stream_chunks + 3
    assert text.endswith("data: [DONE]\n\n")


@pytest.mark.slow
async def test_stream_chunks_arrive_before_the_stream_ends(
    proxy: Client, fake: FakeUpstream
) -> None:
    fake.stream_chunks, fake.stream_delay = 5, 0.2
    response = await proxy.post(
        "/v1/chat/completions", data=chat([{"role": "user", "content": "x"}], stream=True)
    )
    first = await response.content.readline()
    assert first.startswith(b"data: ")
    assert fake.chunks_sent < fake.stream_chunks, "the proxy buffered the stream"
    await response.read()


async def test_client_disconnect_mid_stream_closes_upstream(
    proxy: Client, fake: FakeUpstream
) -> None:
    fake.stream_chunks, fake.stream_delay = 50, 0.05
    response = await proxy.post(
        "/v1/chat/completions", data=chat([{"role": "user", "content": "x"}], stream=True)
    )
    await response.content.readline()
    response.close()  # the client walks away
    await asyncio.wait_for(fake.stream_aborted.wait(), timeout=2)
    assert fake.chunks_sent < fake.stream_chunks


async def test_gzip_response_is_relayed_compressed(proxy: Client, fake: FakeUpstream) -> None:
    response = await proxy.post(
        "/v1/chat/completions",
        data=chat([{"role": "user", "content": "x"}]),
        headers={"Accept-Encoding": "gzip"},
    )
    assert response.status == 200
    assert response.headers["Content-Encoding"] == "gzip"
    assert (await response.json())["object"] == "chat.completion"  # aiohttp decodes it


async def test_no_compression_unless_the_client_asks(proxy: Client, fake: FakeUpstream) -> None:
    response = await proxy.post(
        "/v1/chat/completions",
        data=chat([{"role": "user", "content": "x"}]),
        headers={"Accept-Encoding": "identity"},
    )
    assert "Content-Encoding" not in response.headers
    assert "gzip" not in fake.received[-1].headers.get("Accept-Encoding", "")


async def test_gzip_request_body_is_decoded_and_repaired(proxy: Client, fake: FakeUpstream) -> None:
    body = gzip.compress(chat(BROKEN["empty_tool_calls"]))
    response = await proxy.post(
        "/v1/chat/completions", data=body, headers={"Content-Encoding": "gzip"}
    )
    assert response.status == 200, await response.text()
    assert "Content-Encoding" not in fake.received[-1].headers
    assert strict_errors(orjson.loads(fake.received[-1].body)) == []


async def test_body_over_limit_gets_413(make_proxy: ProxyFactory, fake: FakeUpstream) -> None:
    proxy = await make_proxy({"max_body_bytes": 1000})
    response = await proxy.post("/v1/chat/completions", data=b"x" * 2000)
    assert response.status == 413
    error = (await response.json())["error"]
    assert set(error) == {"message", "type", "code"}
    assert error["code"] == "request_too_large"
    assert fake.received == []


async def test_chunked_body_over_limit_gets_413(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    proxy = await make_proxy({"max_body_bytes": 1000})

    async def chunks() -> Any:
        for _ in range(4):
            yield b"y" * 500

    response = await proxy.post("/v1/chat/completions", data=chunks())
    assert response.status == 413
    assert fake.received == []


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_upstream_gets_502(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy(url=f"http://user:sk-secret@127.0.0.1:{_unused_port()}/v1?key=k1")
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 502
    assert (await response.json())["error"]["code"] == "upstream_unreachable"
    failed = [e for e in logs if e["event"] == "upstream_failed"]
    assert failed and failed[0]["host"].startswith("127.0.0.1:") and failed[0]["cause"]
    assert "sk-secret" not in repr(logs) and "k1" not in repr(failed)


async def test_silent_upstream_gets_504(make_proxy: ProxyFactory, aiohttp_server: Any) -> None:
    async def stall(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", stall)
    server: TestServer = await aiohttp_server(app)
    proxy = await make_proxy(url=str(server.make_url("")).rstrip("/"), read_timeout=0.2)
    response = await proxy.post(
        "/v1/chat/completions", data=chat([{"role": "user", "content": "x"}])
    )
    assert response.status == 504
    assert (await response.json())["error"]["code"] == "upstream_timeout"


async def test_pass_through_get_keeps_path_and_query(proxy: Client, fake: FakeUpstream) -> None:
    response = await proxy.get(
        "/v1/models?limit=5&after=a%20b", headers={"Authorization": "Bearer sk-test"}
    )
    assert response.status == 200
    assert (await response.json())["data"][0]["id"] == "deepseek-chat"
    assert fake.received[-1].path_qs == "/v1/models?limit=5&after=a%20b"
    assert fake.received[-1].headers["Authorization"] == "Bearer sk-test"


async def test_pass_through_post_body_status_and_headers(proxy: Client, fake: FakeUpstream) -> None:
    body = b'{"input": "embed me",  "model": "e"}'
    response = await proxy.post(
        "/v1/embeddings",
        data=body,
        headers={"Connection": "keep-alive, X-Hop", "X-Hop": "1", "X-Keep": "2", "TE": "trailers"},
    )
    assert response.status == 201
    assert response.headers["X-Echo"] == "yes"
    assert await response.read() == body
    received = fake.received[-1]
    assert received.body == body
    assert received.headers["X-Keep"] == "2"
    assert "X-Hop" not in received.headers
    assert "TE" not in received.headers


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
async def test_pass_through_other_methods(method: str, proxy: Client, fake: FakeUpstream) -> None:
    response = await proxy.request(method, "/echo/files/1", data=b"abc")
    assert response.status == 201
    assert fake.received[-1].method == method
    assert fake.received[-1].body == b"abc"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "body_not_json"),
        (b"[1, 2]", "body_not_object"),
        (b'{"messages": {"role": "user"}}', "messages_not_list"),
        (b'{"model": "m"}', "messages_missing"),
    ],
)
async def test_unparseable_bodies_are_forwarded_unchanged(
    body: bytes, reason: str, proxy: Client, fake: FakeUpstream
) -> None:
    with capture_logs() as logs:
        await proxy.post("/v1/chat/completions", data=body)
    assert fake.received[-1].body == body
    skipped = [e for e in logs if e["event"] == "payload_not_sanitized"]
    assert skipped and skipped[0]["reason"] == reason


def _exploding(messages: list[Any], ctx: RuleContext) -> Outcome:
    raise RuntimeError("boom with secret text")


async def test_a_crashing_rule_is_skipped_and_logged(proxy: Client, fake: FakeUpstream) -> None:
    boom = Rule("exploding", "test", "test", "test", "safe", True, _exploding)
    steps = cast(list[Any], planner_of(proxy.app).plans["deepseek"].steps)
    steps.insert(0, (boom, boom.context()))
    with captured_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 200
    failed = [e for e in logs if e["event"] == "rule_failed"]
    assert failed == [
        {
            "event": "rule_failed",
            "log_level": "error",
            "request_id": failed[0]["request_id"],
            "rule": "exploding",
            "error": "RuntimeError",
            "where": failed[0]["where"],
        }
    ]
    assert "secret" not in repr(logs)
    assert strict_errors(orjson.loads(fake.received[-1].body)) == []


async def test_request_id_is_echoed_or_generated(proxy: Client) -> None:
    with captured_logs() as logs:
        given = await proxy.get("/v1/models", headers={"X-Request-ID": "abc-123"})
        generated = await proxy.get("/v1/models")
        bad = await proxy.get("/v1/models", headers={"X-Request-ID": "x" * 500})
        control = await proxy.get("/v1/models", headers={"X-Request-ID": "a\tb"})
    assert given.headers["X-Request-ID"] == "abc-123"
    assert len(generated.headers["X-Request-ID"]) == 32
    assert len(bad.headers["X-Request-ID"]) == 32
    assert len(control.headers["X-Request-ID"]) == 32
    # chatmend's own id: always generated, never the client's, unique, logged as request_id.
    own = [r.headers["X-Chatmend-Request-Id"] for r in (given, generated, bad, control)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in own) and len(set(own)) == 4
    assert generated.headers["X-Request-ID"] == own[1]
    done = [e for e in logs if e["event"] == "request_done"]
    assert [e["request_id"] for e in done] == own
    assert [e["client_request_id"] for e in done] == ["abc-123", None, None, None]


async def test_every_answer_carries_the_request_id(proxy: Client) -> None:
    """chatmend's own answers (a refused method, a refused path) carry it too."""
    refused = await proxy.request("TRACE", "/v1/models")
    bad_path = await proxy.get("/v1/%00")
    assert refused.status == 405 and bad_path.status >= 400
    for response in (refused, bad_path):
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Chatmend-Request-Id"])


async def test_logs_never_carry_message_text_or_credentials(proxy: Client) -> None:
    canary = "CANARY-7f3a"
    messages = [
        {"role": "user", "content": canary},
        {"role": "assistant", "content": canary, "tool_calls": []},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x": "' + canary},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": canary},
    ]
    with capture_logs() as logs:
        await proxy.post(
            "/v1/chat/completions",
            data=chat(messages),
            headers={"Authorization": "Bearer sk-" + canary},
        )
    assert any(e["event"] == "payload_sanitized" for e in logs)
    assert canary not in repr(logs)


async def test_head_passes_through(proxy: Client, fake: FakeUpstream) -> None:
    response = await proxy.head("/v1/models")
    assert response.status == 200
    assert fake.received[-1].method == "HEAD"
    direct = await proxy.app[SESSION_KEY].head(
        f"{proxy.app[RUNTIME_KEY].current.config.default.upstream.url}/v1/models"
    )
    # The upstream's Content-Length describes the body a GET would get; HEAD relays it as is.
    assert response.headers["Content-Length"] == direct.headers["Content-Length"] != "0"


async def test_upstream_break_mid_stream_is_not_hidden(
    make_proxy: ProxyFactory, aiohttp_server: Any
) -> None:
    async def half(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: {}\n\n")
        assert request.transport is not None
        request.transport.close()  # the upstream dies mid-stream
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", half)
    server: TestServer = await aiohttp_server(app)
    proxy = await make_proxy(url=str(server.make_url("")).rstrip("/"))
    with capture_logs() as logs:
        response = await proxy.post(
            "/v1/chat/completions", data=chat([{"role": "user", "content": "x"}])
        )
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    done = [e for e in logs if e["event"] == "request_done"]
    assert done and done[0]["outcome"] == "upstream_failed"


async def test_small_response_broken_off_gets_a_clean_502(
    make_proxy: ProxyFactory, aiohttp_server: Any
) -> None:
    """A sized completion is read whole before the client sees anything (one write), so an
    upstream that dies inside it is reported as an OpenAI-style 502, not a cut connection."""

    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = 1000
        await response.prepare(request)
        await response.write(b'{"id": "chatcmpl-1", "choices": [')
        assert request.transport is not None
        request.transport.close()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", cut)
    server: TestServer = await aiohttp_server(app)
    proxy = await make_proxy(url=str(server.make_url("")).rstrip("/"))
    with capture_logs() as logs:
        response = await proxy.post(
            "/v1/chat/completions", data=chat([{"role": "user", "content": "x"}])
        )
        body = await response.json()
    assert response.status == 502
    assert body["error"]["code"] == "upstream_broken"
    assert len(response.headers["X-Request-ID"]) == 32
    done = [e for e in logs if e["event"] == "request_done"]
    assert done and done[0]["outcome"] == "upstream_failed" and done[0]["status"] == 502


async def test_large_sized_response_is_relayed_intact(
    make_proxy: ProxyFactory, aiohttp_server: Any
) -> None:
    """Above BUFFER_MAX_BYTES the body is streamed through; it still arrives whole."""
    payload = bytes(range(256)) * (2 * BUFFER_MAX_BYTES // 256 + 1)

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=payload, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/v1/files/big/content", big)
    server: TestServer = await aiohttp_server(app)
    proxy = await make_proxy(url=str(server.make_url("")).rstrip("/"))
    response = await proxy.get("/v1/files/big/content")
    assert response.status == 200
    assert response.headers["Content-Length"] == str(len(payload))
    assert await response.read() == payload


#: `tool_calls: []` (with empty-tool-calls off) before a split turn the merge repairs: the
#: rewritten body is still rejected.
LEFT_REJECTED = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "", "tool_calls": []},
    {"role": "assistant", "content": "second half of a split turn"},
]


async def test_what_the_rules_leave_rejected_is_logged_as_contract_violation(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    proxy = await make_proxy({"verify": True, "rules": {"empty-tool-calls": False}})
    messages = LEFT_REJECTED
    with capture_logs() as logs:
        await proxy.post("/v1/chat/completions", data=chat(messages))
    violated = [e for e in logs if e["event"] == "contract_violation"]
    assert len(violated) == 1
    assert violated[0]["codes"] == {"empty_tool_calls": 1}
    assert violated[0]["violations"][0]["index"] == 1
    assert "empty array" in violated[0]["violations"][0]["message"]
    assert "second half" not in repr(logs)


async def test_a_repaired_body_logs_no_contract_violation(proxy: Client) -> None:
    with capture_logs() as logs:
        await proxy.post("/v1/chat/completions", data=chat(BROKEN["split_assistant_turn"]))
    assert [e for e in logs if e["event"] == "contract_violation"] == []
    assert [e for e in logs if e["event"] == "payload_sanitized"]


async def test_health_probes_are_answered_by_chatmend_and_never_forwarded(
    proxy: Client, fake: FakeUpstream
) -> None:
    with capture_logs() as logs:
        live = await proxy.get("/healthz")
        ready = await proxy.get("/readyz")
        head = await proxy.head("/healthz")
    assert (live.status, await live.json()) == (200, {"status": "ok"})
    assert (ready.status, await ready.json()) == (
        200,
        {
            "status": "ready",
            "profile": "deepseek",
            "routes": {"default": "deepseek"},
            "config_generation": 0,
        },
    )
    assert head.status == 200
    assert fake.received == [], "a probe reached the upstream"
    assert logs == [], "probes are not logged"
    # other paths still go upstream, /v1/healthz included
    with capture_logs() as logs:
        await proxy.get("/v1/healthz")
    (done,) = [e for e in logs if e["event"] == "request_done"]
    assert done["upstream_ms"] is not None


async def test_readyz_is_503_once_the_upstream_session_is_closed(proxy: Client) -> None:
    await proxy.app[SESSION_KEY].close()
    response = await proxy.get("/readyz")
    assert response.status == 503
    assert (await response.json())["status"] == "not_ready"


async def test_every_relayed_response_says_what_chatmend_changed_and_its_overhead(
    proxy: Client, fake: FakeUpstream
) -> None:
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 200
    assert response.headers["X-Chatmend-Changes"] == "1; rules=empty-tool-calls"
    assert float(response.headers["X-Chatmend-Overhead-Ms"]) >= 0
    clean = await proxy.get("/v1/models")
    assert clean.headers["X-Chatmend-Changes"] == "0"


async def test_global_report_mode_logs_the_rewrites_and_forwards_the_original(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    proxy = await make_proxy({"mode": "report", "recover": {"enabled": False}})
    body = chat(BROKEN["split_assistant_turn"])
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 400  # the strict fake rejects what chatmend only reported
    assert fake.received[-1].body == body
    assert not [e for e in logs if e["event"] == "payload_sanitized"]
    (reported,) = [e for e in logs if e["event"] == "payload_reported"]
    assert reported["rules"] == {"consecutive-assistant-messages": 1}
    assert response.headers["X-Chatmend-Changes"] == "0; reported=1"


async def test_one_rule_in_report_mode_while_the_others_enforce(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    off = {"recover": {"enabled": False}}  # the original's 400 is what this test reads
    proxy = await make_proxy({"rules": {"empty-tool-calls": {"mode": "report"}}, **off})
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    sent = orjson.loads(fake.received[-1].body)
    assert sent["messages"][1]["tool_calls"] == []  # reported, not applied
    (reported,) = [e for e in logs if e["event"] == "payload_reported"]
    assert reported["changes"][0]["rule"] == "empty-tool-calls"
    assert response.headers["X-Chatmend-Changes"] == "0; reported=1"
    # the rest still enforces, and mode: enforce on a rule overrides a global report
    proxy = await make_proxy({"mode": "report", "rules": {"empty-tool-calls": {"mode": "enforce"}}})
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.headers["X-Chatmend-Changes"] == "1; rules=empty-tool-calls"
    assert "tool_calls" not in orjson.loads(fake.received[-1].body)["messages"][1]


async def test_the_contract_is_not_checked_at_run_time_unless_verify(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    """`verify` is opt-in: the property tests hold the rules to the contract, so the proxy does
    not re-read every rewritten body."""
    proxy = await make_proxy({"rules": {"empty-tool-calls": False}})
    messages = LEFT_REJECTED
    with capture_logs() as logs:
        await proxy.post("/v1/chat/completions", data=chat(messages))
    assert [e for e in logs if e["event"] == "payload_sanitized"]
    assert [e for e in logs if e["event"] == "contract_violation"] == []
