"""End to end through the official ``anthropic`` SDK (and raw Claude-Code-shaped bodies) with
``base_url`` pointed at the proxy, in front of a strict fake Anthropic endpoint on loopback."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import create_app
from rules.providers.profiles import PROFILES
from tests.anthropic_bodies import (
    KEPT_INPUTS,
    KEPT_RESULTS,
    KEPT_USER_TEXTS,
    TOOLS,
    broken_session,
    clean_session,
)
from tests.conftest import base_url
from tests.fake_anthropic import TEXT, FakeAnthropic, create_fake_anthropic

Client = TestClient[Any, Any]
Start = Callable[..., Awaitable[tuple[TestServer, Client]]]
HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}


@pytest.fixture
def fake() -> FakeAnthropic:
    return FakeAnthropic(contract=dict(PROFILES["anthropic"].messages_contract))


@pytest.fixture
def start(
    fake: FakeAnthropic,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> Start:
    async def run(
        yaml: dict[str, Any] | None = None, env: dict[str, str] | None = None
    ) -> tuple[TestServer, Client]:
        server = await aiohttp_server(create_fake_anthropic(fake))
        config = parse_config(
            {"profile": "anthropic", **(yaml or {})},
            default_upstream=base_url(server),
            env=env or {},
        )
        return server, await aiohttp_client(create_app(config))

    return run


def lowered(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def sdk(proxy: Client, key: str = "sk-ant-test-not-real") -> anthropic.AsyncAnthropic:
    url = str(proxy.make_url("")).rstrip("/")
    return anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0)


async def test_messages_create_non_streaming(start: Start, fake: FakeAnthropic) -> None:
    _, proxy = await start()
    async with sdk(proxy) as client:
        reply = await client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            messages=[{"role": "user", "content": "hello"}],
        )
    assert reply.content[0].type == "text" and reply.content[0].text == TEXT
    sent = fake.received[-1]
    assert sent.path_qs == "/v1/messages"
    # the client's key passes through (this SDK sends it as a bearer token)
    assert lowered(sent.headers)["authorization"] == "Bearer sk-ant-test-not-real"
    assert orjson.loads(sent.body)["messages"] == [{"role": "user", "content": "hello"}]


async def test_messages_stream_is_relayed_event_by_event(start: Start, fake: FakeAnthropic) -> None:
    _, proxy = await start()
    async with (
        sdk(proxy) as client,
        client.messages.stream(
            model="claude-sonnet-4-5",
            max_tokens=256,
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": "hello"}],
        ) as stream,
    ):
        kinds = [event.type async for event in stream]
        final = await stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_delta" in kinds
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[1].text == TEXT  # type: ignore[union-attr]


async def test_a_multi_turn_tool_loop(start: Start, fake: FakeAnthropic) -> None:
    _, proxy = await start()
    tools: Any = TOOLS[:1]
    history: list[Any] = [{"role": "user", "content": "run the tests"}]
    async with sdk(proxy) as client:
        first = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, tools=tools, messages=history
        )
        assert first.stop_reason == "tool_use"
        call = next(block for block in first.content if block.type == "tool_use")
        history.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
        result = {"type": "tool_result", "tool_use_id": call.id, "content": "3 passed"}
        # The agent put its own note before the result: Anthropic refuses that order.
        history.append({"role": "user", "content": [{"type": "text", "text": "ok:"}, result]})
        second = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, tools=tools, messages=history
        )
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text" and second.content[0].text == TEXT
    sent = orjson.loads(fake.received[-1].body)["messages"][-1]["content"]
    assert sent == [result, {"type": "text", "text": "ok:"}]


async def test_the_upstream_error_reaches_the_sdk_unchanged(start: Start) -> None:
    """A defect no rule repairs under the profile (a trailing prefill, with the repair off)
    comes back as Anthropic's 400, which the SDK raises."""
    _, proxy = await start(
        {"rules": {"messages-trailing-prefill": False}, "recover": {"enabled": False}}
    )
    async with sdk(proxy) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(
                model="claude-opus-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "{"}],
            )
    assert "does not support assistant message prefill" in str(info.value)


def kept(body: dict[str, Any]) -> None:
    text = orjson.dumps(body["messages"]).decode()
    for value in (*KEPT_USER_TEXTS, *KEPT_RESULTS):
        assert json.dumps(value, ensure_ascii=False)[1:-1] in text, value
    inputs = [
        block["input"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]
    for wanted in KEPT_INPUTS:
        assert wanted in inputs, wanted


@pytest.mark.parametrize(
    ("profile", "model", "envelope"),
    [("anthropic", "claude-opus-4-6", "anthropic"), ("deepseek", "deepseek-v4-pro", "openai")],
)
async def test_a_claude_code_session_refused_directly_is_accepted_through_chatmend(
    profile: str, model: str, envelope: str, start: Start, fake: FakeAnthropic
) -> None:
    fake.contract = dict(PROFILES[profile].messages_contract)
    fake.envelope = PROFILES[profile].messages_envelope
    assert fake.envelope == envelope
    server, proxy = await start({"profile": profile})
    raw = json.dumps(broken_session(model)).encode()  # the cut emoji: only the stdlib writes it
    headers = {**HEADERS, "x-api-key": "sk-test"}
    async with proxy.session.post(
        server.make_url("/v1/messages"), data=raw, headers=headers
    ) as direct:
        assert direct.status == 400
        error = await direct.json()
    if envelope == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    else:
        assert error["error"]["type"] == "invalid_request_error"
    with capture_logs() as logs:
        response = await proxy.post("/v1/messages", data=raw, headers=headers)
        assert response.status == 200, await response.text()
        answer = await response.json()
    assert answer["content"][-1]["text"] == TEXT
    count, _, rules = response.headers["X-Chatmend-Changes"].partition("; rules=")
    assert int(count) > 0 and "messages-tool-result-pairing" in rules
    sent = orjson.loads(fake.received[-1].body)
    kept(sent)
    assert sent["metadata"]["user_id"].startswith("user_")
    assert sent["tool_choice"] == {"type": "auto"}
    done = [e for e in logs if e["event"] == "request_done"]
    assert done, logs
    sanitized = [e for e in logs if e["event"] == "payload_sanitized"]
    assert sanitized and sanitized[-1]["path"] == "/v1/messages"
    assert sanitized[-1]["profile"] == profile
    # the log names rules, ids and counts, never the text
    assert "fix the failing test" not in json.dumps(logs, default=str)


async def test_a_clean_claude_code_body_is_forwarded_byte_for_byte(
    start: Start, fake: FakeAnthropic
) -> None:
    _, proxy = await start()
    raw = orjson.dumps({**clean_session(), "stream": True})
    response = await proxy.post("/v1/messages", data=raw, headers={**HEADERS, "x-api-key": "k"})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    text = await response.text()
    assert text.startswith("event: message_start") and "event: message_stop" in text
    assert fake.received[-1].body == raw
    assert (
        "X-Chatmend-Changes" not in response.headers
        or response.headers["X-Chatmend-Changes"] == "0"
    )


async def test_count_tokens_and_other_paths_pass_through(start: Start, fake: FakeAnthropic) -> None:
    _, proxy = await start()
    raw = json.dumps(broken_session()).encode()
    response = await proxy.post("/v1/messages/count_tokens", data=raw, headers=HEADERS)
    assert response.status == 200 and await response.json() == {"input_tokens": 42}
    assert fake.received[-1].body == raw  # not repaired: only /v1/messages is


async def test_report_mode_logs_and_forwards_the_original(
    start: Start, fake: FakeAnthropic
) -> None:
    _, proxy = await start({"mode": "report", "recover": {"enabled": False}})
    raw = orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}],
                }
            ],
        }
    )
    with capture_logs() as logs:
        response = await proxy.post("/v1/messages", data=raw, headers=HEADERS)
    assert response.status == 400  # the fake refuses the original, as the provider would
    assert fake.received[-1].body == raw
    assert any("messages-empty-text-blocks" in json.dumps(e, default=str) for e in logs)


async def test_x_api_key_is_a_client_token_and_carries_the_upstream_key(
    start: Start, fake: FakeAnthropic
) -> None:
    """Claude Code sends ``ANTHROPIC_API_KEY`` as ``x-api-key``: it is checked as a client
    token, and the route's upstream key goes out in ``x-api-key`` too; the SDK's bearer token
    works the same way."""
    fake.api_key = "sk-ant-upstream-0123456789"
    env = {"UPSTREAM_KEY": fake.api_key, "CLIENT_TOKENS": "client-token-0123456789"}
    _, proxy = await start(
        {"upstream": {"api_key_env": "UPSTREAM_KEY"}, "client_tokens_env": "CLIENT_TOKENS"}, env
    )
    body = orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    ok = await proxy.post(
        "/v1/messages", data=body, headers={**HEADERS, "x-api-key": "client-token-0123456789"}
    )
    assert ok.status == 200
    sent = lowered(fake.received[-1].headers)
    assert sent["x-api-key"] == fake.api_key and "authorization" not in sent
    wrong = await proxy.post(
        "/v1/messages", data=body, headers={**HEADERS, "x-api-key": "wrong-token-0123456789"}
    )
    assert wrong.status == 401
    assert len(fake.received) == 1  # the wrong token never reached the upstream
    async with sdk(proxy, key="client-token-0123456789") as client:
        reply = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.content[0].type == "text"
    # the SDK's bearer token is a client token too; a Messages request gets the key in x-api-key
    sent = lowered(fake.received[-1].headers)
    assert sent["x-api-key"] == fake.api_key and "authorization" not in sent
    # Claude Code with ANTHROPIC_AUTH_TOKEN sends both headers
    both = {**HEADERS, "Authorization": "Bearer client-token-0123456789", "x-api-key": "x"}
    assert (await proxy.post("/v1/messages", data=body, headers=both)).status == 200
    sent = lowered(fake.received[-1].headers)
    assert sent["x-api-key"] == fake.api_key and "authorization" not in sent


async def test_verify_logs_what_the_rules_left_and_metrics_count_the_api(start: Start) -> None:
    """With ``verify: true`` a rewritten Messages body is checked against the profile's
    Messages contract (a prefill, its repair off, is left: logged in Anthropic's words); the
    request counter says ``api="messages"``."""
    off = {"recover": {"enabled": False}}  # the 400 is what this test reads
    _, proxy = await start({"verify": True, "rules": {"messages-trailing-prefill": False}, **off})
    body = {
        "model": "claude-opus-4-6",
        "max_tokens": 64,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}],
            },
            {"role": "assistant", "content": "{"},
        ],
    }
    with capture_logs() as logs:
        response = await proxy.post("/v1/messages", data=orjson.dumps(body), headers=HEADERS)
    assert response.status == 400  # the fake refuses the prefill, as Anthropic would
    left = [e for e in logs if e["event"] == "contract_violation"]
    assert left and "does not support assistant message prefill" in json.dumps(left)
    metrics = await (await proxy.get("/metrics")).text()
    assert 'api="messages"' in metrics


async def test_recovery_repairs_a_messages_400_and_retries_once(
    start: Start, fake: FakeAnthropic
) -> None:
    """Under a profile that leaves Kimi ids alone, an upstream that refuses them (Anthropic's
    charset) answers 400; with ``recover`` on, chatmend renames them and sends once more."""
    _, proxy = await start({"profile": "kimi", "recover": {"enabled": True}})
    body = {
        "model": "kimi-k2.6",
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": "list"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "functions.ls:0", "name": "ls", "input": {}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "functions.ls:0", "content": "a"}
                ],
            },
        ],
    }
    response = await proxy.post("/v1/messages", data=orjson.dumps(body), headers=HEADERS)
    assert response.status == 200, await response.text()
    recovered = response.headers["X-Chatmend-Recovered"]
    assert "messages-tool-use-id-charset" in recovered
    assert "class=messages_tool_use_id_pattern" in recovered
    assert len(fake.received) == 2
    sent = orjson.loads(fake.received[-1].body)
    assert sent["messages"][1]["content"][0]["id"] == "functions_ls_0"
    assert sent["messages"][2]["content"][0]["tool_use_id"] == "functions_ls_0"


@pytest.mark.timeout(120)
async def test_a_big_messages_body_is_repaired_in_a_worker_process(
    start: Start, fake: FakeAnthropic
) -> None:
    """Over ``offload_body_bytes`` the parse and the rules run in a worker process: the
    Messages plans travel there with the planner."""
    _, proxy = await start({"offload_body_bytes": 1024, "offload_processes": 1})
    raw = json.dumps(broken_session("claude-opus-4-6")).encode()
    assert len(raw) > 1024
    response = await proxy.post("/v1/messages", data=raw, headers=HEADERS)
    assert response.status == 200, await response.text()
    kept(orjson.loads(fake.received[-1].body))


EDITS: Any = {"edits": [{"type": "clear_tool_uses_20250919"}]}


async def test_context_management_follows_the_anthropic_beta_header(
    start: Start, fake: FakeAnthropic
) -> None:
    """The SDK's beta client sends `context_management` with its `anthropic-beta` header: it
    reaches Anthropic byte for byte. The same body without the header (a relay dropped it) is
    refused directly, and through chatmend goes without the field (anthropics/claude-code#14135)."""
    server, proxy = await start()
    async with sdk(proxy) as client:
        reply = await client.beta.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            messages=[{"role": "user", "content": "hello"}],
            context_management=EDITS,
            betas=["context-management-2025-06-27"],
        )
    assert reply.content[0].type == "text" and reply.content[0].text == TEXT
    sent = fake.received[-1]
    assert "context-management-2025-06-27" in lowered(sent.headers)["anthropic-beta"]
    assert orjson.loads(sent.body)["context_management"] == EDITS
    # A raw body, several beta headers, one of them the one: byte for byte.
    raw = orjson.dumps({**clean_session(), "context_management": EDITS})
    both = [
        ("anthropic-beta", "claude-code-20250219"),
        ("anthropic-beta", " Context-Management-2025-06-27"),
    ]
    response = await proxy.post("/v1/messages", data=raw, headers=[*HEADERS.items(), *both])
    assert response.status == 200, await response.text()
    assert fake.received[-1].body == raw
    # Without it: Anthropic refuses the body, chatmend removes the field.
    others = {**HEADERS, "anthropic-beta": "claude-code-20250219"}
    async with proxy.session.post(server.make_url("/v1/messages"), data=raw, headers=others) as r:
        assert r.status == 400
        assert (await r.json())["error"]["message"] == (
            "context_management: Extra inputs are not permitted"
        )
    response = await proxy.post("/v1/messages", data=raw, headers=others)
    assert response.status == 200, await response.text()
    assert response.headers["X-Chatmend-Changes"] == "1; rules=messages-context-management"
    sent_body = orjson.loads(fake.received[-1].body)
    assert "context_management" not in sent_body
    assert sent_body["messages"] == clean_session()["messages"]
