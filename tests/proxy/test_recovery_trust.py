"""Recovery you can trust (issue 35): each thing measured as a new user and as an attacker
would, as a test.

- Another tenant's request is never rewritten by what one client's refusal taught.
- Escalation drops nothing and invents nothing (a second tool result, an unknown role's message,
  thinking parts, unreadable arguments, a Messages orphan next to a ``"."`` turn).
- A learned repair is the whole plan that recovered: a stub never goes in ahead of a real,
  displaced result.
- A reload during a recovery in flight: what it learns is dropped.
- ``mode: report``: recovery reports what it would retry and forwards nothing else.
- ``passthrough`` runs no rule on the Responses API either.
- A body read through the lone-surrogate path is retried.
- A Responses call and its output that both carry ``call_id: ""`` keep each other.
- Every unsafe or lossy change of a retry is logged with what it changed.

The fakes decide by the request itself (its key, its shape), as a provider would; the judges
are written here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.recovery.retry import RECOVERED_HEADER
from proxy.server.app import LEARNED_KEY, create_app
from proxy.server.reload import reload_config
from tests.conftest import base_url
from tools.emulate.chat import COMPLETION
from tools.emulate.errors import provider_error

Client = TestClient[Any, Any]
Server = Callable[..., Awaitable[TestServer]]
ClientFactory = Callable[..., Awaitable[Client]]
Body = dict[str, Any]
#: A refusal for a request (its body and headers), or ``None``: accepted.
Judge = Callable[[Body, "web.Request"], tuple[int, str] | None]

KEY_A = {"Authorization": "Bearer sk-tenant-a"}
KEY_B = {"Authorization": "Bearer sk-tenant-b"}
USER = {"role": "user", "content": "List the files, then read README.md."}


def call(cid: str, name: str = "ls", arguments: str = "{}") -> Body:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


@dataclass
class Scripted:
    """An upstream that refuses what its ``judge`` refuses, in OpenAI's envelope; it records
    every body and can hold the n-th request until released."""

    judge: Judge
    received: list[Body] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    hold_at: int | None = None
    held: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            self.raw.append(raw)
            self.received.append(json.loads(raw))  # the standard library: lone surrogates too
            if self.hold_at is not None and len(self.received) == self.hold_at:
                self.held.set()
                await self.release.wait()
            refused = self.judge(self.received[-1], request)
            if refused is not None:
                return provider_error(refused[0], refused[1])
            if request.path.endswith("/responses"):
                output = [{"type": "message", "role": "assistant", "content": []}]
                return web.json_response({"id": "resp_1", "object": "response", "output": output})
            return web.json_response(COMPLETION)

        app = web.Application()
        app.router.add_post("/{tail:.*}", handle)
        return app


async def proxy_for(
    aiohttp_server: Server,
    aiohttp_client: ClientFactory,
    upstream: Scripted,
    config: dict[str, Any] | None = None,
) -> tuple[Client, web.Application]:
    server = await aiohttp_server(upstream.app())
    app = create_app(parse_config(config or {}, default_upstream=base_url(server)))
    return await aiohttp_client(app), app


def texts(body: Body) -> str:
    """Every string of a body, one text (what reached the upstream)."""
    return orjson.dumps(body).decode()


# --- another tenant ------------------------------------------------------------------------------


THINKING_REQUIRED: Body = {
    "model": "deepseek-v4-flash",
    "tool_choice": "required",
    "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
    "messages": [USER],
}


async def test_a_repair_learned_from_one_client_never_touches_another_clients_request(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: client A, in thinking mode with ``tool_choice: "required"``, is refused and
    recovered; client B's identical request with its own key, which the upstream accepts as
    sent, went out with ``tool_choice: "auto"`` (``rules=thinking-tool-choice``). Now B's goes
    byte for byte; A's next request is repaired before sending (its own learned repair)."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        # A's deployment refuses a forced choice in thinking mode; B's accepts it
        key_a = request.headers.get("Authorization") == KEY_A["Authorization"]
        if key_a and body.get("tool_choice") == "required":
            return 400, "Thinking mode does not support this tool_choice"
        return None

    upstream = Scripted(judge)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"})
    sent = orjson.dumps(THINKING_REQUIRED)
    first = await proxy.post("/v1/chat/completions", data=sent, headers=KEY_A)
    assert first.status == 200 and RECOVERED_HEADER in first.headers
    assert len(upstream.raw) == 2
    second = await proxy.post("/v1/chat/completions", data=sent, headers=KEY_B)
    assert second.status == 200
    assert upstream.raw[2] == sent  # B's request reached the upstream as B sent it
    assert second.headers["X-Chatmend-Changes"] == "0"
    again = await proxy.post("/v1/chat/completions", data=sent, headers=KEY_A)
    assert again.status == 200 and len(upstream.raw) == 4  # A pays no second refusal
    assert upstream.received[3]["tool_choice"] == "auto"


async def test_a_request_without_a_credential_learns_nothing(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Anonymous clients cannot be told apart: what one's refusal taught is never applied to
    another (each pays its own refusal; recovery still repairs each)."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if body.get("tool_choice") == "required":
            return 400, "Thinking mode does not support this tool_choice"
        return None

    upstream = Scripted(judge)
    proxy, app = await proxy_for(
        aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"}
    )
    sent = orjson.dumps(THINKING_REQUIRED)
    with capture_logs() as logs:
        for _ in range(2):
            assert (await proxy.post("/v1/chat/completions", data=sent)).status == 200
    assert len(upstream.raw) == 4 and not app[LEARNED_KEY].entries()
    skipped = [e for e in logs if e["event"] == "recovery_not_learned"]
    assert [e["reason"] for e in skipped] == ["no_credential", "no_credential"]


# --- escalation ----------------------------------------------------------------------------------

#: Everything escalation used to drop: a second tool result, an ``ipython`` message, thinking
#: parts, arguments that cannot be read.
HOARD: Body = {
    "model": "deepseek-chat",
    "messages": [
        USER,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Check the listing first."},
                {"type": "text", "text": "Listing."},
            ],
            "tool_calls": [call("call_1", "ls", '{"path": "src", "depth":')],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc"},
        {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc\nsecond listing"},
        {"role": "ipython", "content": "In [1]: 6 * 7\nOut[1]: 42"},
        {"role": "user", "content": "Now read it."},
    ],
}


async def test_escalation_drops_nothing_the_client_sent(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: under passthrough, ``400 "Bad request: messages[2] is invalid"`` got a retry
    that dropped the second tool result and the ``ipython`` message (``unknown-roles,
    duplicate-tool-call-ids; class=escalated``), the thinking parts, and the unreadable
    arguments (``{}``). The upstream named nothing: only safe changes may follow it."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        return (400, "Bad request: messages[2] is invalid") if len(upstream.raw) == 1 else None

    upstream = Scripted(judge)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"})
    with capture_logs() as logs:
        await proxy.post("/v1/chat/completions", data=orjson.dumps(HOARD), headers=KEY_A)
    for body in upstream.received:
        sent = texts(body)
        for kept in ("second listing", "6 * 7", "Check the listing first.", '\\"depth\\":'):
            assert kept in sent, kept
    recovered = [e for e in logs if e["event"] == "request_recovered"]
    assert all(not e["changed"] for e in recovered)  # nothing unsafe or lossy was sent


async def test_a_messages_escalation_keeps_an_orphan_result_next_to_a_dot_turn(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: the hand-kept list escalation read (``_DROPS_DATA``) missed
    ``messages-tool-result-pairing``, which dropped an orphan ``tool_result``'s text for a
    ``"."`` turn. Escalation now reads each change's class: the text stays."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if len(upstream.raw) == 1:
            return 400, "messages.1: invalid message"
        return None

    upstream = Scripted(judge)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"})
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "Find the refund code."},
            {"role": "assistant", "content": "Looking."},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "refund.ts"}
                ],
            },
        ],
    }
    await proxy.post("/v1/messages", data=orjson.dumps(body), headers=KEY_A)
    assert all("refund.ts" in texts(sent) for sent in upstream.received)


# --- what is learned ------------------------------------------------------------------------------


def _has_stub(body: Body) -> bool:
    return "No result was recorded" in texts(body)


async def test_a_learned_repair_is_the_whole_plan_never_a_stub_ahead_of_a_real_result(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: ``unanswered-tool-calls``, learned alone on one session, put a "No result was
    recorded" stub ahead of another session's real (displaced) result; a lenient provider would
    have accepted a history that says the call had no result. Learned as the whole repair, the
    displaced result goes home first and no stub is written."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if len(upstream.raw) == 1:
            return 400, (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. (insufficient tool messages following "
                "tool_calls message)"
            )
        return None  # lenient afterwards: what chatmend sends is what the model reads

    upstream = Scripted(judge)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"})
    dangling = {
        "model": "deepseek-chat",
        "messages": [
            USER,
            {"role": "assistant", "content": None, "tool_calls": [call("call_1")]},
            {"role": "user", "content": "Go on."},
        ],
    }
    first = await proxy.post("/v1/chat/completions", data=orjson.dumps(dangling), headers=KEY_A)
    assert first.status == 200 and _has_stub(upstream.received[1])  # named: the stub is true
    displaced = {
        "model": "deepseek-chat",
        "messages": [
            USER,
            {"role": "assistant", "content": None, "tool_calls": [call("call_9")]},
            {"role": "user", "content": "Go on."},
            {"role": "tool", "tool_call_id": "call_9", "content": "README.md"},
        ],
    }
    second = await proxy.post("/v1/chat/completions", data=orjson.dumps(displaced), headers=KEY_A)
    assert second.status == 200 and len(upstream.received) == 3
    sent = upstream.received[2]["messages"]
    assert not _has_stub(upstream.received[2])
    assert sent[2] == {"role": "tool", "tool_call_id": "call_9", "content": "README.md"}


async def test_a_recovery_in_flight_during_a_reload_learns_nothing(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: a reload during an in-flight recovery left a learned repair that was still
    applied after the reload turned recovery off. What a recovery that started before the
    reload learns is dropped."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if body.get("tool_choice") == "required":
            return 400, "Thinking mode does not support this tool_choice"
        return None

    upstream = Scripted(judge, hold_at=2)  # the retry waits
    server = await aiohttp_server(upstream.app())
    settings: dict[str, Any] = {"profile": "passthrough"}
    app = create_app(parse_config(settings, default_upstream=base_url(server)))
    proxy = await aiohttp_client(app)
    sent = orjson.dumps(THINKING_REQUIRED)
    pending = asyncio.create_task(proxy.post("/v1/chat/completions", data=sent, headers=KEY_A))
    await asyncio.wait_for(upstream.held.wait(), 5)
    off = {**settings, "recover": {"enabled": False}}
    assert reload_config(app, lambda: parse_config(off, default_upstream=base_url(server)))
    upstream.release.set()
    with capture_logs() as logs:
        response = await pending
    assert response.status == 200  # that request was recovered under the config it began with
    assert not app[LEARNED_KEY].entries()
    assert [e["reason"] for e in logs if e["event"] == "recovery_not_learned"] == ["reloaded"]
    upstream.hold_at = None
    after = await proxy.post("/v1/chat/completions", data=sent, headers=KEY_A)
    assert after.status == 400  # recovery is off now, and nothing learned repairs it
    assert upstream.raw[-1] == sent


# --- report mode, passthrough -------------------------------------------------------------------


async def test_report_mode_reports_what_recovery_would_retry_and_forwards_nothing_else(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: ``mode: report`` routes still recovered: the upstream got a repaired retry,
    not the original bytes report mode promises."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if body.get("tool_choice") == "required":
            return 400, "Thinking mode does not support this tool_choice"
        return None

    upstream = Scripted(judge)
    config = {"profile": "deepseek", "mode": "report"}
    proxy, app = await proxy_for(aiohttp_server, aiohttp_client, upstream, config)
    sent = orjson.dumps(THINKING_REQUIRED)
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=sent, headers=KEY_A)
    assert response.status == 400 and RECOVERED_HEADER not in response.headers
    assert upstream.raw == [sent]
    (reported,) = [e for e in logs if e["event"] == "recovery_reported"]
    assert reported["rules"] == ["thinking-tool-choice"]
    assert reported["changed"][0]["safety"] == "unsafe"
    assert not app[LEARNED_KEY].entries()


async def test_passthrough_sends_a_responses_body_byte_for_byte(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: ``passthrough`` still ran the Responses rules."""
    upstream = Scripted(lambda body, request: None)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"})
    body = orjson.dumps(
        {
            "model": "gpt-4.1",
            "input": [
                {"role": "user", "content": "go"},
                {"type": "function_call_output", "call_id": "call_gone", "output": "stray"},
            ],
        }
    )
    response = await proxy.post("/v1/responses", data=body, headers=KEY_A)
    assert response.status == 200 and upstream.raw == [body]
    assert response.headers["X-Chatmend-Changes"] == "0"


# --- lone surrogates, blank ids -----------------------------------------------------------------


async def test_a_body_read_through_the_lone_surrogate_path_is_retried(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: a body that needed the lone-surrogate reading was never retried (5 of 300
    fuzzed histories stayed refused for that alone)."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if any(m.get("tool_calls") == [] for m in body["messages"]):
            return 400, (
                "Invalid 'messages[1].tool_calls': empty array. Expected an array with minimum "
                "length 1, but got an empty array instead."
            )
        return None

    upstream = Scripted(judge)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"})
    # a cut emoji: a lone high surrogate, as JavaScript clients write it
    raw = (
        b'{"model":"deepseek-chat","messages":[{"role":"user","content":"Hi \\ud83d there"},'
        b'{"role":"assistant","content":"Ok.","tool_calls":[]},'
        b'{"role":"user","content":"Go on."}]}'
    )
    response = await proxy.post("/v1/chat/completions", data=raw, headers=KEY_A)
    assert response.status == 200, await response.text()
    assert len(upstream.raw) == 2 and upstream.raw[0] == raw
    assert "tool_calls" not in upstream.received[1]["messages"][1]
    assert upstream.received[1]["messages"][0]["content"] == "Hi \ufffd there"


async def test_a_responses_call_and_its_output_with_an_empty_call_id_keep_each_other(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: a Responses call and its output that both carry ``call_id: ""`` lost the
    output as an orphan (under the default profile)."""
    upstream = Scripted(lambda body, request: None)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream)
    body = {
        "model": "gpt-4.1",
        "input": [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "", "output": "README.md"},
        ],
    }
    response = await proxy.post("/v1/responses", data=orjson.dumps(body), headers=KEY_A)
    assert response.status == 200
    items = upstream.received[0]["input"]
    assert [item.get("type", "message") for item in items] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert items[1]["call_id"] == items[2]["call_id"] != ""
    assert items[2]["output"] == "README.md"


# --- what a retry changed is logged ---------------------------------------------------------------


async def test_every_unsafe_or_lossy_change_of_a_retry_is_logged_with_what_it_changed(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """A dropped request parameter is logged with its name and value; no message text."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if "logprobs" in body:
            return 400, "Unrecognized request argument supplied: logprobs"
        return None

    upstream = Scripted(judge)
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, {"profile": "passthrough"})
    body = {"model": "gpt-4.1", "logprobs": True, "messages": [USER]}
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=orjson.dumps(body), headers=KEY_A)
    assert response.status == 200
    assert response.headers[RECOVERED_HEADER] == (
        "unsupported-parameters; class=unsupported_parameter"
    )
    (recovered,) = [e for e in logs if e["event"] == "request_recovered"]
    assert recovered["changed"] == [
        {
            "rule": "unsupported-parameters",
            "index": -1,
            "action": "dropped_parameter",
            "parameter": "logprobs",
            "value": True,
            "safety": "unsafe",
        }
    ]
    assert USER["content"] not in str(logs)


async def test_the_page_shows_each_change_with_its_class(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """What a retry changed is shown on the page with its fix safety."""

    def judge(body: Body, request: web.Request) -> tuple[int, str] | None:
        if body.get("tool_choice") == "required":
            return 400, "Thinking mode does not support this tool_choice"
        return None

    upstream = Scripted(judge)
    config = {"profile": "passthrough", "ui": {"enabled": True}}
    proxy, _ = await proxy_for(aiohttp_server, aiohttp_client, upstream, config)
    sent = orjson.dumps(THINKING_REQUIRED)
    response = await proxy.post("/v1/chat/completions", data=sent, headers=KEY_A)
    assert response.status == 200
    view = await proxy.get(f"/chatmend/request/{response.headers['X-Chatmend-Request-Id']}")
    html = await view.text()
    assert "<th>safety</th>" in html
    assert "<td>replaced_tool_choice</td><td>unsafe</td>" in html
