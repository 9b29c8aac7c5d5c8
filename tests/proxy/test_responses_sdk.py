"""End to end through the official openai SDK's ``client.responses.create`` (streaming too):
the SDK -> chatmend -> a fake strict Responses upstream that answers with the
docs/providers.md#openai-responses texts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import openai
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from proxy.config import parse_config
from proxy.server.app import create_app
from rules.providers.contract.responses import violations
from tests.fake_responses import TEXT, FakeResponses, create_fake_responses

Client = TestClient[Any, Any]
LONG = "call_" + "q" * 111

#: Broken inputs, each with what a strict Responses endpoint answers (docs/providers.md#responses).
BROKEN: dict[str, tuple[list[dict[str, Any]], str]] = {
    "orphan_output": (
        [
            {"role": "user", "content": "list"},
            {"type": "function_call_output", "call_id": "call_trimmed", "output": "a.txt"},
        ],
        "No tool call found for function call output with call_id call_trimmed.",
    ),
    "missing_output": (
        [
            {"role": "user", "content": "list"},
            {"type": "function_call", "call_id": "call_XXX", "name": "ls", "arguments": "{}"},
            {"role": "user", "content": "well?"},
        ],
        "No tool output found for function call call_XXX.",
    ),
    "displaced_message": (
        [
            {"role": "user", "content": "list"},
            {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
            {"role": "developer", "content": "be brief"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
        ],
        "No tool call found for tool output with call_id call_1",
    ),
    "duplicate_item": (
        [
            {"role": "user", "content": "list"},
            {"type": "reasoning", "id": "rs_0468", "summary": []},
            {"type": "reasoning", "id": "rs_0468", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
        ],
        "Duplicate item found with id rs_0468. Remove duplicate items from your input and try "
        "again.",
    ),
    "long_call_id": (
        [
            {"role": "user", "content": "list"},
            {"type": "function_call", "call_id": LONG, "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": LONG, "output": "a.txt"},
        ],
        "Invalid 'input[1].call_id': string too long. Expected a string with maximum length 64, "
        "but got a string with length 116 instead.",
    ),
    "doubled_history": (
        [
            {"role": "user", "content": "turn 1"},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "ls",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
            {"role": "user", "content": "turn 1"},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "ls",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
            {"role": "user", "content": "turn 2"},
        ],
        "Duplicate item found with id fc_1. Remove duplicate items from your input and try again.",
    ),
}


@pytest.fixture
def upstream_state() -> FakeResponses:
    return FakeResponses()


@pytest.fixture
async def upstream(
    upstream_state: FakeResponses, aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> TestServer:
    return await aiohttp_server(create_fake_responses(upstream_state))


async def start_proxy(
    upstream: TestServer,
    aiohttp_client: Callable[..., Awaitable[Client]],
    yaml: dict[str, Any] | None = None,
) -> Client:
    config = parse_config(yaml or {}, default_upstream=str(upstream.make_url("")).rstrip("/"))
    return await aiohttp_client(create_app(config))


def sdk(base: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base, api_key="sk-test-not-real", max_retries=0)


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_the_fake_rejects_the_broken_input_with_the_providers_text(
    kind: str, upstream: TestServer
) -> None:
    broken, text = BROKEN[kind]
    async with sdk(str(upstream.make_url("/v1"))) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.responses.create(model="gpt-4.1", input=cast(Any, broken))
    assert text in str(info.value)


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_sdk_non_streaming(
    kind: str,
    upstream: TestServer,
    upstream_state: FakeResponses,
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    proxy = await start_proxy(upstream, aiohttp_client)
    broken, _ = BROKEN[kind]
    async with sdk(str(proxy.make_url("/v1"))) as client:
        response = await client.responses.create(model="gpt-4.1", input=cast(Any, broken))
    assert response.output_text == TEXT
    assert violations(orjson.loads(upstream_state.received[-1])) == []


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_sdk_streaming(
    kind: str,
    upstream: TestServer,
    upstream_state: FakeResponses,
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    proxy = await start_proxy(upstream, aiohttp_client)
    broken, _ = BROKEN[kind]
    async with sdk(str(proxy.make_url("/v1"))) as client:
        stream = await client.responses.create(
            model="gpt-4.1", input=cast(Any, broken), stream=True
        )
        events = [event async for event in stream]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "".join(upstream_state.deltas)
    assert events[-1].type == "response.completed"
    assert violations(orjson.loads(upstream_state.received[-1])) == []


async def test_context_management_never_reaches_an_ineligible_upstream(
    upstream: TestServer,
    upstream_state: FakeResponses,
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    proxy = await start_proxy(upstream, aiohttp_client)
    cm = [{"type": "compaction", "compact_threshold": 200000}]
    async with sdk(str(proxy.make_url("/v1"))) as client:
        response = await client.responses.create(
            model="gpt-5.6", input="hi", extra_body={"context_management": cm}
        )
    assert response.output_text == TEXT
    sent = orjson.loads(upstream_state.received[-1])
    assert "context_management" not in sent
    assert sent["input"] == "hi"  # a string input passes untouched


async def test_a_clean_request_is_forwarded_byte_for_byte(
    upstream: TestServer,
    upstream_state: FakeResponses,
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    proxy = await start_proxy(upstream, aiohttp_client)
    body = b'{"model": "gpt-4.1",  "input": [{"role": "user", "content": "hi"}]}'
    response = await proxy.post(
        "/v1/responses", data=body, headers={"Content-Type": "application/json"}
    )
    assert response.status == 200
    assert upstream_state.received[-1] == body


async def test_a_rule_switched_off_lets_the_upstream_answer_as_it_would(
    upstream: TestServer, aiohttp_client: Callable[..., Awaitable[Client]]
) -> None:
    proxy = await start_proxy(
        upstream,
        aiohttp_client,
        # recovery (on by default) would repair and retry the 400 this test reads
        {"rules": {"responses-orphan-outputs": False}, "recover": {"enabled": False}},
    )
    broken, text = BROKEN["orphan_output"]
    async with sdk(str(proxy.make_url("/v1"))) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.responses.create(model="gpt-4.1", input=cast(Any, broken))
    assert text in str(info.value)
