"""`chatmend emulate` as a strict Anthropic-format endpoint, `chatmend check` on Messages
bodies, and the proxy in front of the emulator with the official SDK."""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from proxy.config import parse_config
from proxy.server.app import create_app
from rules.providers.planner import Planner
from rules.providers.profiles import PROFILES
from tests.anthropic_bodies import broken_session, clean_session
from tests.conftest import base_url
from tools.check import CLEAN, INVALID, REPAIRED, api_of_body, run_check
from tools.emulate.app import create_emulator
from tools.emulate.messages import TEXT

HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}


@pytest.mark.parametrize(
    ("profile", "model"), [("anthropic", "claude-opus-4-6"), ("deepseek", "deepseek-v4-pro")]
)
async def test_emulate_refuses_in_the_provider_words_and_envelope(
    profile: str, model: str, aiohttp_client: Any
) -> None:
    emulator: TestClient[Any, Any] = await aiohttp_client(create_emulator(profile=profile))
    raw = json.dumps(broken_session(model)).encode()
    response = await emulator.post("/v1/messages", data=raw, headers=HEADERS)
    assert response.status == 400
    body = await response.json()
    if PROFILES[profile].messages_envelope == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"].startswith("The request body is not valid JSON")
    else:
        assert body["error"]["type"] == "invalid_request_error"
    clean = await emulator.post(
        "/v1/messages", data=orjson.dumps(clean_session(model)), headers=HEADERS
    )
    assert clean.status == 200
    assert (await clean.json())["content"][-1]["text"] == TEXT
    count = await emulator.post("/v1/messages/count_tokens", data=raw, headers=HEADERS)
    assert count.status == 200 and (await count.json())["input_tokens"] > 0


async def test_the_sdk_through_chatmend_in_front_of_emulate(
    aiohttp_server: Callable[..., Awaitable[TestServer]], aiohttp_client: Any
) -> None:
    """What a user's CI does: Claude-Code-shaped traffic -> chatmend -> chatmend emulate."""
    server = await aiohttp_server(create_emulator(profile="anthropic"))
    config = parse_config({"profile": "anthropic"}, default_upstream=base_url(server), env={})
    proxy: TestClient[Any, Any] = await aiohttp_client(create_app(config))
    session = broken_session("claude-opus-4-6")
    session["messages"][7]["content"][1]["text"] = "cut"  # the SDK cannot send a lone surrogate
    session["max_tokens"] = 4096  # the SDK wants a stream for more
    session["thinking"] = {"type": "adaptive"}  # what the SDK wants for Claude 4.6
    async with anthropic.AsyncAnthropic(
        base_url=str(proxy.make_url("")).rstrip("/"), api_key="sk-test", max_retries=0
    ) as client:
        reply = await client.messages.create(**session)
        streamed = await client.messages.create(**session, stream=True)
        kinds = [event.type async for event in streamed]
    assert reply.content[-1].type == "text" and reply.content[-1].text == TEXT
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"


def check(raw: bytes, profile: str) -> tuple[int, dict[str, Any]]:
    out, err = io.BytesIO(), io.StringIO()
    plan = Planner(default=profile)
    status = run_check(io.BytesIO(raw), plan, fix=False, fmt="json", out=out, err=err)
    return status, orjson.loads(out.getvalue())


@pytest.mark.parametrize("profile", ["anthropic", "deepseek"])
def test_check_reads_a_messages_body(profile: str) -> None:
    assert api_of_body(clean_session()).name == "messages"
    assert api_of_body({"messages": [{"role": "user", "content": "hi"}]}).name == "chat"
    status, report = check(orjson.dumps(clean_session()), profile)
    assert status == CLEAN and report["profile"] == profile and report["violations"] == []
    status, report = check(json.dumps(broken_session("claude-opus-4-6")).encode(), profile)
    assert status == REPAIRED
    codes = {v["code"] for v in report["violations"]}
    assert {"messages_unanswered_tool_use", "messages_duplicate_tool_use_id"} <= codes
    assert report["violations_after"] == []
    assert any(c["rule"] == "messages-tool-result-pairing" for c in report["changes"])


def test_check_reports_what_a_rule_left() -> None:
    """A defect no anthropic rule repairs with the repair switched off: still invalid."""
    body = {
        "system": "s",
        "model": "claude-opus-4-6",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "{"}],
    }
    out, err = io.BytesIO(), io.StringIO()
    planner = Planner(default="anthropic", overrides={"messages-trailing-prefill": False})
    status = run_check(
        io.BytesIO(orjson.dumps(body)), planner, fix=False, fmt="text", out=out, err=err
    )
    assert status == INVALID
    assert "does not support assistant message prefill" in out.getvalue().decode()


async def test_kimi_k2_7_code_takes_adaptive_thinking_through_chatmend(
    aiohttp_server: Callable[..., Awaitable[TestServer]], aiohttp_client: Any
) -> None:
    """`chatmend emulate --profile kimi` refuses Claude Code's adaptive thinking for Kimi K2.7
    Code in Kimi's words (MoonshotAI/Kimi-K2#141); through chatmend the request runs with
    `enabled` and the client's `max_tokens - 1`; Kimi K2.6 keeps `adaptive` as sent."""
    server = await aiohttp_server(create_emulator(profile="kimi"))
    emulator: TestClient[Any, Any] = await aiohttp_client(server)
    config = parse_config({"profile": "kimi"}, default_upstream=base_url(server), env={})
    proxy: TestClient[Any, Any] = await aiohttp_client(create_app(config))
    raw = orjson.dumps({**clean_session("kimi-k2.7-code"), "thinking": {"type": "adaptive"}})
    direct = await emulator.post("/v1/messages", data=raw, headers=HEADERS)
    assert direct.status == 400
    error = (await direct.json())["error"]
    assert error["message"] == "invalid thinking: only type=enabled is allowed for this model"
    response = await proxy.post("/v1/messages", data=raw, headers=HEADERS)
    assert response.status == 200, await response.text()
    assert response.headers["X-Chatmend-Changes"] == "1; rules=messages-thinking-type"
    older = orjson.dumps({**clean_session("kimi-k2.6"), "thinking": {"type": "adaptive"}})
    response = await proxy.post("/v1/messages", data=older, headers=HEADERS)
    assert response.status == 200, await response.text()
    assert response.headers.get("X-Chatmend-Changes", "0") == "0"
