"""Recovery (``recover:``): a 400 that got through is classified, repaired once and retried.

Against a strict fake that answers each class with its provider's text (a profile's contract),
with the repairing rule off (the ``passthrough`` profile): the first answer is a 400, the
client sees the retry's 200, the upstream saw exactly two bodies, and the header, the log and
the metric name the rule. Then every case where chatmend must not retry.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from typing import Any
from unittest import mock

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.recovery.retry import RECOVERED_HEADER, Retry, enable_line, may_retry, plan_retry
from proxy.relay.streaming import BUFFER_MAX_BYTES, RelayResult
from proxy.server.app import METRICS_KEY, create_app
from rules.engine.base import RuleContext
from rules.engine.pipeline import horizon_of
from rules.providers.contract import responses as responses_contract
from rules.providers.contract import violations
from rules.providers.contract.responses import CHECKS_BY_CODE as RESPONSES_CHECKS
from rules.providers.planner import Planner
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import Sanitized, sanitize_body
from rules.responses import item_ids
from tests.builders import call, result
from tests.conftest import base_url
from tests.fake_responses import FakeResponses, create_fake_responses
from tests.fake_thinking import ThinkingUpstream, create_thinking_upstream, turn_one, turn_two
from tests.fake_upstream import FakeUpstream, create_fake_upstream
from tests.proxy.test_metrics import scrape, value
from tests.transcripts import BROKEN, USER, chat
from tools.emulate.errors import provider_error

Client = TestClient[Any, Any]
Server = Callable[..., Awaitable[TestServer]]
ClientFactory = Callable[..., Awaitable[Client]]

#: Recovery alone: these tests hold each request to its own refusal and retry, so nothing is
#: learned (``learn_ttl: 0``); learned repairs are tested in tests/proxy/test_recover_adapts.py.
RECOVER = {"profile": "passthrough", "recover": {"enabled": True, "learn_ttl": 0}}

THINKING_TURN: list[dict[str, Any]] = [
    USER,
    {"role": "assistant", "content": None, "tool_calls": [call("call_r", "ls", "{}")]},
    result("call_r", "a.py"),
    {"role": "user", "content": "Go on."},
]

#: Core defect -> (the profile whose strict provider rejects it, the body, the class, a rule
#: the repair must have used).
DEFECTS: dict[str, tuple[str, bytes, str, str]] = {
    "split turns": (
        "deepseek",
        chat(BROKEN["split_assistant_turn"]),
        "successive_assistant",
        "consecutive-assistant-messages",
    ),
    "[]": ("deepseek", chat(BROKEN["empty_tool_calls"]), "empty_tool_calls", "empty-tool-calls"),
    "reused ids": (
        "deepseek",
        chat(BROKEN["reused_tool_call_ids"]),
        "duplicate_tool_result",
        "duplicate-tool-call-ids",
    ),
    "bad arguments": (
        "deepseek",
        chat(BROKEN["truncated_arguments"]),
        "invalid_arguments",
        "invalid-tool-arguments",
    ),
    "object arguments": (
        "deepseek",
        chat(BROKEN["object_arguments"]),
        "arguments_not_string",
        "invalid-tool-arguments",
    ),
    "dangling calls": (
        "deepseek",
        chat(BROKEN["unanswered_tool_call"]),
        "unanswered_tool_call",
        "unanswered-tool-calls",
    ),
    "displaced result": (
        "deepseek",
        chat(BROKEN["displaced_tool_result"]),
        "unanswered_tool_call",
        "displaced-tool-results",
    ),
    "missing reasoning_content": (
        "deepseek",
        orjson.dumps({"model": "deepseek-v4-pro", "messages": THINKING_TURN}),
        "reasoning_content_missing",
        "reasoning-content",
    ),
    # A refusal that names the key: only that key goes (what it names, issue 35), not the
    # per-role allowlist its class would run.
    "unknown fields": (
        "groq",
        chat(
            [
                USER,
                {"role": "assistant", "content": "Done.", "reasoning_content": "Easy."},
                {"role": "user", "content": "Thanks."},
            ]
        ),
        "unsupported_field",
        "unsupported-message-keys",
    ),
    "bookkeeping fields": (
        "deepseek",
        chat([*THINKING_TURN[:2], {**THINKING_TURN[2], "tool_name": "ls"}, THINKING_TURN[3]]),
        "unsupported_field",
        "unsupported-message-keys",
    ),
}


async def start(
    aiohttp_server: Server, aiohttp_client: ClientFactory, profile: str, config: dict[str, Any]
) -> tuple[FakeUpstream, Client]:
    fake = FakeUpstream(contract=PROFILES[profile].contract)
    server = await aiohttp_server(create_fake_upstream(fake))
    proxy = await aiohttp_client(
        create_app(parse_config(config, default_upstream=base_url(server)))
    )
    return fake, proxy


@pytest.mark.parametrize("defect", sorted(DEFECTS))
async def test_each_core_defect_is_recovered_through_a_strict_upstream(
    defect: str, aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    profile, body, error_class, rule = DEFECTS[defect]
    contract = PROFILES[profile].contract
    first = violations(orjson.loads(body), contract)
    refused = {"unknown fields": "unknown_field", "bookkeeping fields": "bookkeeping_field"}
    assert first and first[0].code == refused.get(defect, error_class)  # refused as it stands
    fake, proxy = await start(aiohttp_server, aiohttp_client, profile, RECOVER)
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 200, await response.text()
    assert fake.received[0].body == body  # passthrough: sent as it came
    assert len(fake.received) == 2
    assert violations(orjson.loads(fake.received[1].body), contract) == []
    rules, _, named = response.headers[RECOVERED_HEADER].partition("; class=")
    assert named == error_class and rule in rules.split(",")
    assert rule in response.headers["X-Chatmend-Changes"]
    recovered = [e for e in logs if e["event"] == "request_recovered"]
    assert len(recovered) == 1
    assert recovered[0]["error_class"] == error_class and recovered[0]["attempt"] == 1
    assert rule in recovered[0]["rules"] and recovered[0]["status"] == 200
    assert [e["rule"] for e in logs if e["event"] == "recovery_suggests_rule"] == list(
        recovered[0]["rules"]
    )
    done = [e for e in logs if e["event"] == "request_done"]
    assert len(done) == 1 and done[0]["status"] == 200
    samples = await scrape(proxy)
    labels = {"route": "default", "rule": rule, "error_class": error_class}
    assert value(samples, "chatmend_recovered_total", **labels) == 1
    assert (
        value(
            samples,
            "chatmend_requests_total",
            route="default",
            api="chat",
            status="200",
            profile="passthrough",
        )
        == 1
    )
    assert (
        "chatmend_upstream_rejections_total",
        (("class", error_class), ("status", "400")),
    ) not in samples


async def test_a_session_with_every_deepseek_defect_succeeds_and_each_recovery_counts(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """One passthrough proxy in front of a strict DeepSeek: each request of the session carries
    another core defect; every one is answered 200, and the counter has one per request."""
    session = [defect for defect in sorted(DEFECTS) if DEFECTS[defect][0] == "deepseek"]
    fake, proxy = await start(aiohttp_server, aiohttp_client, "deepseek", RECOVER)
    for defect in session:
        response = await proxy.post("/v1/chat/completions", data=DEFECTS[defect][1])
        assert response.status == 200, (defect, await response.text())
    assert len(fake.received) == 2 * len(session)
    samples = await scrape(proxy)
    recovered = [v for (name, _), v in samples.items() if name == "chatmend_recovered_total"]
    assert sum(recovered) >= len(session)
    for defect in session:
        _, _, error_class, rule = DEFECTS[defect]
        labels = {"route": "default", "rule": rule, "error_class": error_class}
        assert value(samples, "chatmend_recovered_total", **labels) >= 1, defect


async def test_the_suggestion_comes_once_per_route_and_rule_and_each_recovery_counts(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    fake, proxy = await start(aiohttp_server, aiohttp_client, "deepseek", RECOVER)
    body = chat(BROKEN["empty_tool_calls"])
    with capture_logs() as logs:
        for _ in range(3):
            assert (await proxy.post("/v1/chat/completions", data=body)).status == 200
    suggested = [e for e in logs if e["event"] == "recovery_suggests_rule"]
    assert len(suggested) == 1
    assert suggested[0]["key"] == "rules"
    assert suggested[0]["yaml"] == "empty-tool-calls: true"
    assert len(fake.received) == 6
    samples = await scrape(proxy)
    labels = {"route": "default", "rule": "empty-tool-calls", "error_class": "empty_tool_calls"}
    assert value(samples, "chatmend_recovered_total", **labels) == 3


async def test_a_stream_is_recovered_before_any_event(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    fake, proxy = await start(aiohttp_server, aiohttp_client, "deepseek", RECOVER)
    body = chat(BROKEN["unanswered_tool_call"], stream=True)
    response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert RECOVERED_HEADER in response.headers
    text = await response.text()
    assert text.endswith("data: [DONE]\n\n")
    assert len(fake.received) == 2


async def test_a_named_route_recovers_and_is_suggested_its_own_key(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    fake = FakeUpstream(contract=PROFILES["kimi"].contract)
    server = await aiohttp_server(create_fake_upstream(fake))
    config = {
        "profile": "passthrough",
        "routes": {
            "kimi": {
                "upstream": {"url": base_url(server)},
                "recover": {"enabled": True},
            }
        },
    }
    proxy = await aiohttp_client(create_app(parse_config(config, default_upstream="http://x")))
    body = chat(
        [
            USER,
            {"role": "assistant", "content": "", "tool_calls": [call("a", "ls", "{}")]},
            result("a", "ok"),
            {"role": "user", "content": "Go."},
        ]
    )
    with capture_logs() as logs:
        response = await proxy.post("/kimi/v1/chat/completions", data=body)
    assert response.status == 200, await response.text()
    assert response.headers[RECOVERED_HEADER] == "tool-call-content; class=tool_call_content_empty"
    suggested = [e for e in logs if e["event"] == "recovery_suggests_rule"]
    assert suggested[0]["key"] == "routes.kimi.rules"
    assert suggested[0]["yaml"] == (
        'tool-call-content: {enabled: true, shape: "omit", kinds: ["absent","null",'
        '"empty_string","empty_list","empty_parts"]}'
    )


async def test_responses_are_recovered(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    fake = FakeResponses()
    server = await aiohttp_server(create_fake_responses(fake))
    config = {**RECOVER, "rules": {"responses-unanswered-calls": False}}
    proxy = await aiohttp_client(
        create_app(parse_config(config, default_upstream=base_url(server)))
    )
    items = [
        {"type": "message", "role": "user", "content": "Go."},
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
        {"type": "message", "role": "user", "content": "Stop."},
    ]
    body = orjson.dumps({"model": "gpt-5", "input": items})
    assert responses_contract.violations(orjson.loads(body))[0].code == "responses_unanswered_call"
    response = await proxy.post("/v1/responses", data=body)
    assert response.status == 200, await response.text()
    assert response.headers[RECOVERED_HEADER] == (
        "responses-unanswered-calls; class=responses_unanswered_call"
    )
    assert len(fake.received) == 2
    assert responses_contract.violations(orjson.loads(fake.received[1])) == []


# --- when chatmend must not retry -------------------------------------------------------------


async def test_on_by_default_and_off_when_switched_off(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 26 turned recovery on by default (a retry follows only a refusal, which costs no
    tokens); ``recover: {enabled: false}`` still switches it off."""
    fake, proxy = await start(
        aiohttp_server, aiohttp_client, "deepseek", {"profile": "passthrough"}
    )
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 200
    assert len(fake.received) == 2
    config = {"profile": "passthrough", "recover": {"enabled": False}}
    fake, proxy = await start(aiohttp_server, aiohttp_client, "deepseek", config)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 400
    assert RECOVERED_HEADER not in response.headers
    assert len(fake.received) == 1


async def test_max_attempts_zero_never_retries(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    config = {"profile": "passthrough", "recover": {"enabled": True, "max_attempts": 0}}
    fake, proxy = await start(aiohttp_server, aiohttp_client, "deepseek", config)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 400
    assert len(fake.received) == 1


async def test_a_422_whose_repair_changes_nothing_is_relayed(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Mistral answers a user's ``name`` with a 422. A 422 is read since issue 26 (pydantic
    servers refuse a schema with it, nothing processed), but the class's repair (the per-role
    allowlist, which holds ``name``) leaves this body as it is: relayed, one send."""
    fake, proxy = await start(aiohttp_server, aiohttp_client, "mistral", RECOVER)
    body = {"messages": [{**USER, "name": "alice"}]}
    found = violations(body, PROFILES["mistral"].contract)
    assert (found[0].code, found[0].status) == ("unknown_field", 422)
    response = await proxy.post("/v1/chat/completions", data=chat([{**USER, "name": "alice"}]))
    assert response.status == 422
    assert len(fake.received) == 1


@pytest.mark.parametrize("status", [401, 404, 409, 413, 429, 500])
async def test_only_a_400_or_422_is_retried(
    status: int, aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Scripted((status, EMPTY_TEXT), (200, ""))
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == status
    assert len(upstream.received) == 1


class Scripted:
    """An upstream that answers from a script (status, error text) and records every body."""

    def __init__(
        self,
        *answers: tuple[int, str],
        delay: float = 0.0,
        chunked: bool = False,
        gzip: bool = False,
    ) -> None:
        self.answers = list(answers)
        self.received: list[bytes] = []
        self.delay = delay
        #: Send errors without a Content-Length, in two chunks (as some CDNs do).
        self.chunked = chunked
        #: Gzip errors when the request offers it (the SDKs all offer gzip, deflate).
        self.gzip = gzip

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            self.received.append(await request.read())
            status, text = self.answers[min(len(self.received), len(self.answers)) - 1]
            if status == 200:
                return web.json_response({"id": "x", "choices": []})
            if self.delay and len(self.received) == 1:
                await asyncio.sleep(self.delay)
            error = provider_error(status, text)
            if self.gzip and "gzip" in request.headers.get("Accept-Encoding", ""):
                assert isinstance(error.body, bytes)
                error.body = gzip.compress(error.body)
                error.headers["Content-Encoding"] = "gzip"
            if not self.chunked:
                return error
            response = web.StreamResponse(
                status=status, headers={"Content-Type": "application/json"}
            )
            response.enable_chunked_encoding()
            await response.prepare(request)
            assert isinstance(error.body, bytes)
            half = len(error.body) // 2
            await response.write(error.body[:half])
            await response.write(error.body[half:])
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        return app


EMPTY_TEXT = violations(orjson.loads(chat(BROKEN["empty_tool_calls"])))[0].message


async def scripted(
    aiohttp_server: Server,
    aiohttp_client: ClientFactory,
    upstream: Scripted,
    config: dict[str, Any] | None = None,
) -> Client:
    server = await aiohttp_server(upstream.app())
    parsed = parse_config(config or RECOVER, default_upstream=base_url(server))
    return await aiohttp_client(create_app(parsed))


async def test_an_unsized_400_is_read_whole_and_recovered(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Scripted((400, EMPTY_TEXT), (200, ""), chunked=True)
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 200
    assert len(upstream.received) == 2


async def test_a_gzipped_400_is_read_and_recovered(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Clients offer gzip and the offer goes upstream: a compressed error is classified on its
    inflated text, recovered, and a relayed error keeps its bytes."""
    upstream = Scripted((400, EMPTY_TEXT), (200, ""), gzip=True)
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    headers = {"Accept-Encoding": "gzip, deflate"}
    body = chat(BROKEN["empty_tool_calls"])
    response = await proxy.post("/v1/chat/completions", data=body, headers=headers)
    assert response.status == 200, await response.text()
    assert response.headers[RECOVERED_HEADER] == "empty-tool-calls; class=empty_tool_calls"
    assert len(upstream.received) == 2
    # with the repair refused too, the gzipped 400 reaches the client as it came
    upstream = Scripted((400, EMPTY_TEXT), (400, EMPTY_TEXT), gzip=True)
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    response = await proxy.post("/v1/chat/completions", data=body, headers=headers)
    assert response.status == 400
    assert (await response.json())["error"]["message"] == EMPTY_TEXT


async def test_an_unsized_4xx_too_big_to_buffer_is_relayed_whole_and_not_retried(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    huge = EMPTY_TEXT + " " + "x" * (BUFFER_MAX_BYTES + 10)
    upstream = Scripted((400, huge), (200, ""), chunked=True)
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 400
    assert (await response.json())["error"]["message"] == huge
    assert len(upstream.received) == 1


async def test_an_unknown_class_is_not_retried(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Scripted((400, "Your request was malformed in some new way."), (200, ""))
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 400
    assert len(upstream.received) == 1


async def test_a_repair_that_changes_nothing_is_not_retried(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """The provider names a defect the body does not have: the repair finds nothing to do."""
    upstream = Scripted((400, EMPTY_TEXT), (200, ""))
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    response = await proxy.post("/v1/chat/completions", data=chat([USER]))
    assert response.status == 400
    assert (await response.json())["error"]["message"] == EMPTY_TEXT
    assert len(upstream.received) == 1


async def test_the_retrys_own_400_is_relayed_as_is_with_the_first_error_logged(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    second = "Something else is wrong now."
    upstream = Scripted((400, EMPTY_TEXT), (400, second), (200, ""))
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 400
    assert (await response.json())["error"]["message"] == second
    assert len(upstream.received) == 2  # one retry at most
    failed = [e for e in logs if e["event"] == "recovery_failed"]
    assert len(failed) == 1
    assert failed[0]["error_class"] == "empty_tool_calls"
    assert failed[0]["retry_class"] == "unclassified"
    assert not [e for e in logs if e["event"] in ("request_recovered", "recovery_suggests_rule")]
    assert len([e for e in logs if e["event"] == "request_done"]) == 1
    samples = await scrape(proxy)
    assert not [name for name, _ in samples if name == "chatmend_recovered_total"]


async def test_a_repaired_body_over_max_body_bytes_is_not_retried(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """The stub result for a dangling call makes the body bigger than the limit."""
    body = chat(BROKEN["unanswered_tool_call"])
    upstream = Scripted((400, violations(orjson.loads(body))[0].message), (200, ""))
    config = {**RECOVER, "max_body_bytes": len(body)}
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream, config)
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 400
    assert len(upstream.received) == 1
    assert [e["reason"] for e in logs if e["event"] == "recovery_skipped"] == ["body_too_large"]


async def test_the_retrys_latency_is_in_the_overhead(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Scripted((400, EMPTY_TEXT), (200, ""), delay=0.2)
    proxy = await scripted(aiohttp_server, aiohttp_client, upstream)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 200
    assert float(response.headers["X-Chatmend-Overhead-Ms"]) >= 200
    samples = await scrape(proxy)
    assert value(samples, "chatmend_overhead_seconds_count") == 1
    assert value(samples, "chatmend_overhead_seconds_sum") >= 0.2


def _retry(body: bytes) -> Retry:
    return Retry("empty_tool_calls", {"empty-tool-calls": {}}, Sanitized(body), None)


def test_a_client_that_went_away_is_not_retried() -> None:
    transport = mock.Mock()
    transport.is_closing.return_value = True
    request = make_mocked_request("POST", "/v1/chat/completions", transport=transport)
    first = RelayResult(web.Response(status=400), "completed", 10, body=b"{}")
    with capture_logs() as logs:
        assert not may_retry(request, first, _retry(b"{}"), max_body_bytes=99)
    assert logs[0]["reason"] == "client_disconnected"
    transport.is_closing.return_value = False
    assert may_retry(request, first, _retry(b"{}"), max_body_bytes=99)


def test_plan_retry_tries_each_class_a_shared_text_names() -> None:
    """deepseek-reasoner words successive users and successive assistants alike: the repair
    that changes the body is the one taken."""
    body = chat(BROKEN["split_assistant_turn"])
    text = violations(orjson.loads(body))[0].message
    error = orjson.dumps({"error": {"message": text}})
    retry = plan_retry(error, body, Sanitized(body), Planner("passthrough"), "chat")
    assert retry is not None
    assert retry.error_class == "successive_assistant"
    assert list(retry.rules) == ["consecutive-assistant-messages"]
    assert retry.index == 1


#: MiniMax's Responses endpoint (agent0ai/agent-zero#1754) in the words its chat endpoint's
#: refusal is catalogued under (the chat class ``orphan_tool_result``).
MINIMAX_ORPHAN = orjson.dumps(
    {
        "error": {
            "message": "invalid params, tool result's tool id(call_gone) not found (2013)",
            "code": "invalid_prompt",
        }
    }
)
OUTPUT_TEXT = "EUR/USD 1.0862"


def _responses(*items: dict[str, Any]) -> bytes:
    user = {"type": "message", "role": "user", "content": "Save the rate."}
    return orjson.dumps({"model": "MiniMax-M2.7", "input": [user, *items]})


def test_a_chat_class_on_a_responses_request_is_repaired_by_its_responses_twin() -> None:
    """The output whose call is gone stays, as text under chatmend's heading (unsafe: allowed,
    the refusal named it), never dropped (lossy: not without ``recover.lossy``)."""
    body = _responses(
        {"type": "function_call_output", "call_id": "call_gone", "output": OUTPUT_TEXT},
        {"type": "function_call", "call_id": "call_1", "name": "save", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
    )
    retry = plan_retry(MINIMAX_ORPHAN, body, Sanitized(body), Planner("passthrough"), "responses")
    assert retry is not None
    assert retry.error_class == "responses_orphan_output"
    assert dict(retry.rules) == {"responses-orphan-outputs": {"action": "text"}}
    assert [change.action for change in retry.changes] == ["rendered_output"]
    sent = orjson.loads(retry.sanitized.body)["input"]
    assert OUTPUT_TEXT in sent[1]["content"] and sent[2:] == orjson.loads(body)["input"][2:]


def test_the_twin_repair_does_not_retry_a_responses_body_whose_outputs_all_have_calls() -> None:
    """The same words over a body the repair finds nothing in: no retry (what the provider
    would then refuse is not the orphan)."""
    body = _responses(
        {"type": "function_call", "call_id": "call_1", "name": "save", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": OUTPUT_TEXT},
    )
    assert (
        plan_retry(MINIMAX_ORPHAN, body, Sanitized(body), Planner("passthrough"), "responses")
        is None
    )


#: abliteration.ai's refusal of a hosted tool's key (lidge-jun/opencodex#3204).
UNSUPPORTED_TOOL_FIELD = orjson.dumps(
    {
        "error": {
            "message": "This object contains an unsupported field.",
            "type": "invalid_request",
            "param": "tools.1.search_content_types",
        }
    }
)
EXEC = {"type": "function", "name": "exec", "parameters": {"type": "object", "properties": {}}}


def _with_tools(*tools: dict[str, Any], **fields: Any) -> bytes:
    user = {"type": "message", "role": "user", "content": "Find the changelog."}
    return orjson.dumps({"model": "m", "input": [user], "tools": list(tools), **fields})


def test_a_key_refused_at_a_tools_path_is_dropped_from_the_tools_that_carry_it() -> None:
    body = _with_tools(EXEC, {"type": "web_search", "search_content_types": ["text", "image"]})
    retry = plan_retry(
        UNSUPPORTED_TOOL_FIELD, body, Sanitized(body), Planner("passthrough"), "responses"
    )
    assert retry is not None
    assert dict(retry.rules) == {
        "responses-unsupported-tool-keys": {"keys": ["search_content_types"]}
    }
    sent = orjson.loads(retry.sanitized.body)
    assert sent["tools"] == [EXEC, {"type": "web_search"}]
    assert sent["input"] == orjson.loads(body)["input"]


def test_a_key_refused_at_a_tools_path_touches_no_parameter_and_no_body_without_it() -> None:
    """The path says a tool's key: a request parameter of the same name stays, and a request
    whose tools do not carry the key is not retried."""
    body = _with_tools(EXEC, {"type": "web_search"}, search_content_types=["text"])
    planner = Planner("passthrough")
    assert plan_retry(UNSUPPORTED_TOOL_FIELD, body, Sanitized(body), planner, "responses") is None


#: Command Code's refusal of Codex's non-function tools (CommandCodeAI/command-code#885).
FUNCTION_TOOLS_ONLY = orjson.dumps(
    {
        "error": {
            "message": 'Only `type:"function"` tools are supported on this endpoint. Built-in '
            "tools (web_search, file_search, code_interpreter, computer_use, mcp) are not "
            "executed here.",
            "param": "tools.1.type",
            "type": "invalid_request_error",
        }
    }
)
#: Another endpoint's words for it: only the path to the tool's type, read as the Messages
#: class and taken to its Responses twin.
TOOL_TYPE_PATH = orjson.dumps(
    {"error": {"message": "Input should be 'function'", "param": "tools.1.type"}}
)
PATCH = {"type": "custom", "name": "apply_patch", "format": {"type": "text"}}


@pytest.mark.parametrize("error", [FUNCTION_TOOLS_ONLY, TOOL_TYPE_PATH], ids=["words", "path"])
def test_a_refused_tool_type_removes_the_tools_that_are_not_functions(error: bytes) -> None:
    body = _with_tools(EXEC, PATCH, {"type": "web_search"}, tool_choice="auto")
    retry = plan_retry(error, body, Sanitized(body), Planner("passthrough"), "responses")
    assert retry is not None
    assert retry.error_class == "responses_server_tool"
    assert list(retry.rules) == ["responses-server-tools"]
    sent = orjson.loads(retry.sanitized.body)
    assert sent == {**orjson.loads(body), "tools": [EXEC]}


def _refused(message: str, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "param": param}})


@pytest.mark.parametrize(
    "error",
    [
        # a value refused at tool_choice, not at a tool (a review's cases)
        _refused(
            "Invalid value: 'web_search'. Supported values are: 'function' and 'mcp'.",
            "tool_choice.type",
        ),
        _refused('invalid tool_choice.type: "function" (allowed: auto, none, required)'),
        _refused(
            "tool_choice: unknown variant `web_search`, expected `function` or `allowed_tools`"
        ),
        _refused("The 'web_search' option for tools is not yet supported."),
        # a path to a function tool: its name, or its missing type
        _refused("Invalid 'tools[0].name': string does not match pattern."),
        _refused("Field required", "tools.0.type"),
    ],
    ids=["choice-value", "choice-allowed", "choice-variant", "no-path", "name-path", "type-path"],
)
def test_a_refusal_that_names_no_built_in_tool_removes_none(error: bytes) -> None:
    """Only a tools path to a tool of the refused type (or to a built-in tool) removes tools:
    a refusal of ``tool_choice``, of a function's name or of a function's missing type leaves
    the built-in tools beside it, and is not retried."""
    untyped = {key: value for key, value in EXEC.items() if key != "type"}
    for tools in ((EXEC, {"type": "web_search"}), (untyped, {"type": "web_search"})):
        body = _with_tools(*tools, tool_choice={"type": "function", "name": "exec"})
        planner = Planner("passthrough")
        assert plan_retry(error, body, Sanitized(body), planner, "responses") is None


def test_a_refused_tool_type_is_not_retried_when_every_tool_is_a_function() -> None:
    body = _with_tools(EXEC, {**EXEC, "name": "read"})
    planner = Planner("passthrough")
    assert plan_retry(FUNCTION_TOOLS_ONLY, body, Sanitized(body), planner, "responses") is None


def _variant(value: str, expected: str, at: int = 0) -> bytes:
    """serde's words for the type of the tool at ``at``, without DeepSeek's catalogued prefix."""
    text = f"tools[{at}]: unknown variant `{value}`, expected {expected}"
    return orjson.dumps({"error": {"message": text, "type": "invalid_request_error"}})


WEB_SEARCHES = "`web_search_20250305` or `web_search_20260209`"
BASH = {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search"}


def _messages(*tools: dict[str, Any]) -> bytes:
    user = {"role": "user", "content": [{"type": "text", "text": "Why does it fail?"}]}
    return orjson.dumps({"model": "m", "max_tokens": 64, "messages": [user], "tools": list(tools)})


def test_an_unknown_variant_custom_on_a_tool_drops_the_tag_and_keeps_the_tool() -> None:
    """decolua/9router#3905, worded without DeepSeek's prefix: read by what it names (the
    value is the type a tool carries), not by the catalogue. Safe: an untagged tool is a custom
    one."""
    body = _messages({"type": "custom", **BASH}, WEB_SEARCH)
    error = _variant("custom", WEB_SEARCHES)
    retry = plan_retry(error, body, Sanitized(body), Planner("passthrough"), "messages")
    assert retry is not None
    assert dict(retry.rules) == {"messages-custom-tool-type": {}}
    assert orjson.loads(retry.sanitized.body) == {**orjson.loads(body), "tools": [BASH, WEB_SEARCH]}


def test_an_unknown_variant_of_a_server_tool_removes_it_and_keeps_what_the_refusal_accepts() -> (
    None
):
    body = _messages(BASH, WEB_SEARCH, {"type": "web_fetch_20250910", "name": "web_fetch"})
    error = _variant("web_fetch_20250910", WEB_SEARCHES, at=2)
    retry = plan_retry(error, body, Sanitized(body), Planner("passthrough"), "messages")
    assert retry is not None
    assert dict(retry.rules) == {
        "messages-server-tools": {"keep": ["web_search_20250305", "web_search_20260209"]}
    }
    assert orjson.loads(retry.sanitized.body)["tools"] == [BASH, WEB_SEARCH]


@pytest.mark.parametrize("api", ["messages", "chat"])
def test_an_unknown_variant_no_tool_carries_as_its_type_is_no_tool_type(api: str) -> None:
    """The same words over tools that carry no such type (untagged client tools; chat's
    functions): nothing to repair, no retry."""
    if api == "messages":
        body = _messages(BASH, WEB_SEARCH)
    else:
        function = {"type": "function", "function": {"name": "Bash", "parameters": {}}}
        body = orjson.dumps({"model": "m", "messages": [USER], "tools": [function]})
    error = _variant("custom", WEB_SEARCHES)
    assert plan_retry(error, body, Sanitized(body), Planner("passthrough"), api) is None


def test_enable_line() -> None:
    assert enable_line("empty-tools", {}) == "empty-tools: true"
    assert enable_line("reasoning-content", {"models": ["*"]}) == (
        'reasoning-content: {enabled: true, models: ["*"]}'
    )


async def test_the_retried_response_is_observed_for_the_reasoning_stash(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Under deepseek with `empty-tool-calls` off, turn one carries a `[]` the thinking-mode
    upstream refuses; the retry's answer (reasoning and a tool call) is stored all the same,
    and turn two gets that reasoning back."""
    upstream = ThinkingUpstream()
    server = await aiohttp_server(create_thinking_upstream(upstream))
    config = {"recover": {"enabled": True}, "rules": {"empty-tool-calls": False}}
    proxy = await aiohttp_client(
        create_app(parse_config(config, default_upstream=base_url(server)))
    )
    earlier = [
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hi.", "tool_calls": []},
    ]
    first = orjson.loads(turn_one(stream=True))
    first["messages"] = [*earlier, *first["messages"]]
    # the stash keeps nothing for an anonymous client (issue 15): this one has a key
    key = {"Authorization": "Bearer sk-client-one"}
    response = await proxy.post("/v1/chat/completions", data=orjson.dumps(first), headers=key)
    assert response.status == 200, await response.text()
    assert response.headers[RECOVERED_HEADER] == "empty-tool-calls; class=empty_tool_calls"
    assert upstream.rejected == 1
    registry = proxy.app[METRICS_KEY].registry
    assert registry.get_sample_value("chatmend_reasoning_total", {"outcome": "stored"}) == 1
    text = await response.text()
    assert upstream.reasonings[0][:10] in text
    call = {
        "id": upstream.call_ids[0],
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
    }
    second = await proxy.post(
        "/v1/chat/completions", data=turn_two({"tool_calls": [call]}, stream=False), headers=key
    )
    assert second.status == 200, await second.text()
    assert upstream.received[-1]["messages"][1]["reasoning_content"] == upstream.reasonings[0]


#: OpenAI's Responses API (GPT-5.6, ``store: false``) refusing a message item's id whose
#: reasoning item came back without its id (NousResearch/hermes-agent#97442).
REQUIRED_REASONING = orjson.dumps(
    {
        "error": {
            "message": "Item 'msg_h1' of type 'message' was provided without its required "
            "'reasoning' item: 'rs_h1'.",
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }
)
ASK = {"type": "message", "role": "user", "content": "Summarise the open bugs."}
AGAIN = {"type": "message", "role": "user", "content": "Which one is the oldest?"}
ANSWER: dict[str, Any] = {
    "type": "message",
    "id": "msg_h1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Three open bugs."}],
}
BLOB = {"type": "reasoning", "encrypted_content": "gAAAAB_blob", "summary": []}
#: An earlier turn whose reasoning item kept its id: its message's id stays.
EARLIER: list[dict[str, Any]] = [
    {"type": "reasoning", "id": "rs_h0", "encrypted_content": "gAAAAB_zero", "summary": []},
    {**ANSWER, "id": "msg_h0", "content": [{"type": "output_text", "text": "Looking."}]},
]


def _hermes(*items: dict[str, Any]) -> bytes:
    return orjson.dumps({"model": "gpt-5.6-sol", "store": False, "input": list(items)})


def test_a_message_whose_reasoning_item_lost_its_id_goes_without_its_own_id() -> None:
    """The refusal names the message; no item carries the reasoning id it requires: that
    message's id goes (unsafe, named), its text and every other item and id stay."""
    body = _hermes(ASK, *EARLIER, AGAIN, BLOB, ANSWER, AGAIN)
    retry = plan_retry(
        REQUIRED_REASONING, body, Sanitized(body), Planner("passthrough"), "responses"
    )
    assert retry is not None
    assert retry.error_class == "item_id"
    assert dict(retry.rules) == {"responses-item-ids": {"ids": ["msg_h1"], "unpaired": True}}
    assert [(c.rule, c.index, c.action) for c in retry.changes] == [
        ("responses-item-ids", 5, "dropped_id")
    ]
    answer_without_id = {key: value for key, value in ANSWER.items() if key != "id"}
    expected = orjson.loads(_hermes(ASK, *EARLIER, AGAIN, BLOB, answer_without_id, AGAIN))
    assert orjson.loads(retry.sanitized.body) == expected


def test_the_message_named_is_moved_not_stripped_when_its_reasoning_item_is_there() -> None:
    """continuedev/continue#11994's case, in the same words: the request holds both items, the
    message away from its reasoning item: the move (safe), every id kept."""
    call = {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "a.py"}
    reasoning = {**BLOB, "id": "rs_h1"}
    body = _hermes(ASK, reasoning, call, ANSWER, output)
    retry = plan_retry(
        REQUIRED_REASONING, body, Sanitized(body), Planner("passthrough"), "responses"
    )
    assert retry is not None
    assert list(retry.rules) == ["responses-reasoning-order"]
    expected = orjson.loads(_hermes(ASK, reasoning, ANSWER, call, output))
    assert orjson.loads(retry.sanitized.body) == expected


NOT_RETRIED: dict[str, tuple[dict[str, Any], ...]] = {
    # the item named is not in the request: another id, or none at all
    "another message id": (ASK, BLOB, {**ANSWER, "id": "msg_other"}, AGAIN),
    "the message has no id": (
        ASK,
        BLOB,
        {key: value for key, value in ANSWER.items() if key != "id"},
        AGAIN,
    ),
    # the reasoning item it requires is there, right before it: not what the refusal is about
    "the reasoning item has its id": (ASK, {**BLOB, "id": "rs_h1"}, ANSWER, AGAIN),
    # the id is on an item of another type than the refusal says
    "another type": (
        ASK,
        {"type": "function_call", "id": "msg_h1", "call_id": "c", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "a.py"},
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_RETRIED))
def test_no_retry_when_the_request_holds_no_such_message_id_without_its_reasoning(
    case: str,
) -> None:
    body = _hermes(*NOT_RETRIED[case])
    planner = Planner("passthrough")
    assert plan_retry(REQUIRED_REASONING, body, Sanitized(body), planner, "responses") is None


def test_an_item_reference_named_keeps_its_id() -> None:
    """An ``item_reference`` is its id: the words without a type (continuedev/continue#11994's)
    naming one are no id to drop."""
    error = orjson.dumps(
        {
            "error": {
                "message": "Item 'msg_h1' was provided without its required 'reasoning' item: "
                "'rs_h1'.",
                "param": "input",
            }
        }
    )
    body = _hermes(ASK, BLOB, {"type": "item_reference", "id": "msg_h1"}, AGAIN)
    assert plan_retry(error, body, Sanitized(body), Planner("passthrough"), "responses") is None
    answer = _hermes(ASK, BLOB, ANSWER, AGAIN)
    retry = plan_retry(error, answer, Sanitized(answer), Planner("passthrough"), "responses")
    assert retry is not None and dict(retry.rules) == {
        "responses-item-ids": {"ids": ["msg_h1"], "unpaired": True}
    }


def test_every_turn_replayed_in_that_shape_loses_its_message_id_in_the_one_retry() -> None:
    """A client replays each turn so (Hermes): the retry drops the id of every message after a
    reasoning item of its own turn without an id, not the one named alone, which would leave
    the next one refused (a review's case); a turn whose reasoning item kept its id keeps its
    message's."""
    second = {**ANSWER, "id": "msg_h2", "content": [{"type": "output_text", "text": "Done."}]}
    body = _hermes(ASK, *EARLIER, AGAIN, BLOB, ANSWER, AGAIN, BLOB, second, AGAIN)
    retry = plan_retry(
        REQUIRED_REASONING, body, Sanitized(body), Planner("passthrough"), "responses"
    )
    assert retry is not None
    assert dict(retry.rules) == {"responses-item-ids": {"ids": ["msg_h1"], "unpaired": True}}
    ids = [item.get("id") for item in orjson.loads(retry.sanitized.body)["input"]]
    assert ids == [None, "rs_h0", "msg_h0", None, None, None, None, None, None, None]


@pytest.mark.parametrize(
    "reference", [{"type": "item_reference", "id": "msg_h1"}, {"id": "msg_h1"}], ids=str
)
@pytest.mark.parametrize("options", [{"ids": ["msg_h1"]}, {"max_length": 4}], ids=str)
def test_responses_item_ids_never_empties_an_item_reference(
    reference: dict[str, Any], options: dict[str, Any]
) -> None:
    """A reference is its id (a typed ``item_reference``, or an object of an id alone, as the
    SDKs send one): the rule, run by an operator's config, leaves it whole."""
    body = _hermes(ASK, reference, AGAIN)
    planner = Planner("passthrough", overrides={"responses-item-ids": {"enabled": True, **options}})
    assert sanitize_body(body, planner, "responses").body is body


def test_a_non_object_tool_at_the_path_is_removed() -> None:
    """The catalogued words for a tool that is no object, at its position: the server-tools
    repair removes it (what the path names is evidence enough)."""
    error = _refused("Invalid type for 'tools.1', expected an json object.")
    for api, body, rule in (
        ("messages", _messages(BASH, "web_search"), "messages-server-tools"),  # type: ignore[arg-type]
        ("responses", _with_tools(EXEC, "web_search"), "responses-server-tools"),  # type: ignore[arg-type]
    ):
        retry = plan_retry(error, body, Sanitized(body), Planner("passthrough"), api)
        assert retry is not None and list(retry.rules) == [rule], api
        assert len(orjson.loads(retry.sanitized.body)["tools"]) == 1


@pytest.mark.parametrize(
    "error",
    [
        _refused("Invalid type for 'tools.0.input_schema', expected an json object."),
        _refused("Invalid type for 'tools.0.parameters', expected an json object."),
        _refused(
            "Invalid value: 'web_search'. Supported values are: 'function' and 'mcp'.",
            "tool_choice.tools[0].type",
        ),
        _refused("tools[0].type: unknown variant `function`, expected `web_search`"),
    ],
    ids=["messages-schema", "responses-schema", "tool-choice-path", "function-refused"],
)
def test_a_refusal_inside_a_tool_or_of_a_function_removes_no_other_tool(error: bytes) -> None:
    """A schema inside a function tool, a path inside ``tool_choice``, or a refused function
    type (never removed): no built-in tool beside it goes (a review's cases), whichever tool
    stands first."""
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search"}]}
    bad = {**EXEC, "parameters": "x"}
    built_in = ({"type": "web_search"}, {"type": "file_search"})
    bodies = [
        ("messages", _messages({**BASH, "input_schema": "x"}, WEB_SEARCH)),
        ("responses", _with_tools(bad, *built_in, tool_choice=choice)),
    ]
    if b"tool_choice" in error:  # a built-in tool at the position the path inside it names
        bodies.append(("responses", _with_tools(*built_in, bad, tool_choice=choice)))
    for api, body in bodies:
        retry = plan_retry(error, body, Sanitized(body), Planner("passthrough"), api)
        assert retry is None, (api, retry.rules)


def test_the_responses_server_tool_check_finds_what_its_rule_removes() -> None:
    """The check and ``responses-server-tools`` agree: an entry that is no object, or whose
    type is a string other than ``function``, is refused; an entry without a type is not (the
    rule keeps it, so the check would still fail after the repair)."""
    check = RESPONSES_CHECKS["responses_server_tool"]
    untyped = {key: value for key, value in EXEC.items() if key != "type"}
    for tools, found in (
        ([EXEC, untyped], False),
        ([EXEC, "web_search"], True),
        ([untyped, {"type": "web_search"}], True),
    ):
        request = {"model": "m", "input": [], "tools": tools}
        assert bool(check.run([], request, {})) is found, tools


def test_a_learned_unpaired_repair_drops_the_next_turns_id_before_it_is_refused() -> None:
    """What recovery learns for this refusal (``ids`` and ``unpaired``) keeps the session's
    next turn from being refused: the new message's id goes too, by its shape, though no
    refusal named it; a function call in that shape loses its id (its ``call_id`` stays), a
    custom tool's call (not reported in that shape) keeps its id, and a response with no
    reasoning item after another tool's output keeps its message's."""
    second = {**ANSWER, "id": "msg_h2", "content": [{"type": "output_text", "text": "Done."}]}
    call = {"type": "function_call", "id": "fc_h3", "call_id": "c3", "name": "ls"}
    custom = {"type": "custom_tool_call", "id": "ctc_h4", "call_id": "c4", "name": "patch"}
    plain = {**ANSWER, "id": "msg_h5", "content": [{"type": "output_text", "text": "Ok."}]}
    body = _hermes(
        ASK, *EARLIER, AGAIN, BLOB, ANSWER, AGAIN, BLOB, second, call,
        {"type": "function_call_output", "call_id": "c3", "output": "a.py"},
        BLOB, custom, {"type": "custom_tool_call_output", "call_id": "c4", "output": "ok"},
        plain, AGAIN,
    )  # fmt: skip
    learned = {"responses-item-ids": {"enabled": True, "ids": ["msg_h1"], "unpaired": True}}
    sent = sanitize_body(body, Planner("passthrough", overrides=learned), "responses")
    kept = [item.get("id") for item in orjson.loads(sent.body)["input"] if item.get("id")]
    assert kept == ["rs_h0", "msg_h0", "ctc_h4", "msg_h5"]  # a custom call: not that shape
    assert [c.detail["reason"] for c in sent.changes] == ["named", "unpaired", "unpaired"]


def test_an_untyped_item_reference_named_is_no_id_to_drop() -> None:
    """``{"id": …}`` alone is a reference (the SDKs' form): named by the refusal, no retry (a
    review's case: the drop went on to other ids the refusal never named)."""
    second = {**ANSWER, "id": "msg_h2"}
    body = _hermes(ASK, BLOB, {"id": "msg_h1"}, AGAIN, BLOB, second, AGAIN)
    planner = Planner("passthrough")
    assert plan_retry(REQUIRED_REASONING, body, Sanitized(body), planner, "responses") is None


def test_unpaired_keeps_the_ids_a_built_in_tool_call_requires() -> None:
    """Only messages and function calls are refused in that shape (a review's case: a
    ``web_search_call`` or an MCP approval request needs its id, the approval's response names
    it): the retry for a named message leaves every other type's id."""
    built_in: list[dict[str, Any]] = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {}},
        {"type": "mcp_approval_request", "id": "mcpr_1", "name": "x", "server_label": "s"},
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": None},
    ]
    body = _hermes(ASK, BLOB, *built_in, ANSWER, AGAIN)
    retry = plan_retry(
        REQUIRED_REASONING, body, Sanitized(body), Planner("passthrough"), "responses"
    )
    assert retry is not None
    ids = [item.get("id") for item in orjson.loads(retry.sanitized.body)["input"]]
    assert ids == [None, None, "ws_1", "mcpr_1", "ig_1", None, None]


def test_unpaired_runs_whole_never_resumed() -> None:
    """With ``unpaired`` an item is decided by its turn's reasoning item, not by itself: the
    rule's per-item horizon does not hold, so a resumed session runs it whole."""
    plain = RuleContext(options={"ids": ["msg_1"]})
    shaped = RuleContext(options={"ids": ["msg_1"], "unpaired": True})
    assert horizon_of(item_ids.RULE, plain) is not None
    assert horizon_of(item_ids.RULE, shaped) is None
