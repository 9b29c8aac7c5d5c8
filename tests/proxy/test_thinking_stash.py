"""Thinking continuity end to end (issue 18, item 4), through the real app and the official
``anthropic`` SDK: turn 1's response (JSON or SSE) carries a signed thinking block and a
``tool_use``; the client drops the thinking (as a compaction does); turn 2 reaches a strict
thinking-mode DeepSeek-style upstream (``chatmend emulate``'s deepseek Messages contract) with
the exact block, text and signature, restored. On one instance (memory store) and across two
sharing one real redis-server. The thinking text never reaches the logs; an anonymous client's
turns are neither stored nor recalled."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import METRICS_KEY, REASONING_KEY, create_app
from tests.conftest import base_url
from tests.fake_thinking_anthropic import (
    MODEL,
    TOOLS,
    ThinkingAnthropic,
    create_thinking_anthropic,
)
from tests.redis_server import RedisServer

Client = TestClient[Any, Any]
Start = Callable[..., Awaitable[Client]]
URL = "/v1/messages"
THINKING = {"type": "enabled", "budget_tokens": 1024}
QUESTION = {"role": "user", "content": "Read a.txt"}
PLACEHOLDER = {"type": "thinking", "thinking": "", "signature": ""}
HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}


@pytest.fixture
def upstream() -> ThinkingAnthropic:
    return ThinkingAnthropic()


@pytest.fixture
async def start(
    upstream: ThinkingAnthropic,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> Start:
    server = await aiohttp_server(create_thinking_anthropic(upstream))

    async def start(yaml: dict[str, Any] | None = None) -> Client:
        config = parse_config(
            {"profile": "deepseek", **(yaml or {})}, default_upstream=base_url(server)
        )
        return await aiohttp_client(create_app(config))

    return start


def sdk(proxy: Client, key: str = "sk-client-a") -> anthropic.AsyncAnthropic:
    url = str(proxy.make_url("")).rstrip("/")
    return anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0)


async def first_turn(client: anthropic.AsyncAnthropic, *, stream: bool) -> list[dict[str, Any]]:
    """Turn 1 through the SDK: the assistant's content blocks as the SDK hands them over."""
    create: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 2048,
        "thinking": THINKING,
        "tools": TOOLS,
        "messages": [QUESTION],
    }
    if stream:
        async with client.messages.stream(**create) as events:
            reply = await events.get_final_message()
    else:
        reply = await client.messages.create(**create)
    assert reply.stop_reason == "tool_use"
    return [block.model_dump(exclude_none=True) for block in reply.content]


def compacted(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Turn 2's history as a client that keeps no thinking sends it."""
    kept = [block for block in blocks if block["type"] != "thinking"]
    [tool] = [block for block in kept if block["type"] == "tool_use"]
    return [
        QUESTION,
        {"role": "assistant", "content": kept},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool["id"], "content": "hello"}],
        },
    ]


async def second_turn(
    client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], *, stream: bool = False
) -> str:
    create: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 2048,
        "thinking": THINKING,
        "tools": TOOLS,
        "messages": messages,
    }
    if stream:
        async with client.messages.stream(**create) as events:
            reply = await events.get_final_message()
    else:
        reply = await client.messages.create(**create)
    return "".join(block.text for block in reply.content if block.type == "text")


def sent_turn(upstream: ThinkingAnthropic) -> list[dict[str, Any]]:
    """The assistant turn's content in the last request the upstream got."""
    content: list[dict[str, Any]] = upstream.received[-1]["messages"][1]["content"]
    return content


def counter(client: Client, name: str, **labels: str) -> float:
    value = client.app[METRICS_KEY].registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def logged(logs: Any) -> str:
    return orjson.dumps(logs, default=str).decode()


@pytest.mark.parametrize(
    ("stream_one", "stream_two"),
    [(False, False), (True, False), (True, True), (False, True)],
    ids=["json-json", "sse-json", "sse-sse", "json-sse"],
)
async def test_turn_two_gets_the_exact_thinking_block_back(
    start: Start, upstream: ThinkingAnthropic, stream_one: bool, stream_two: bool
) -> None:
    proxy = await start()
    with capture_logs() as logs:
        async with sdk(proxy) as client:
            blocks = await first_turn(client, stream=stream_one)
            # the SDK got the block whole: chatmend relays, it does not rewrite responses
            assert blocks[0] == upstream.thinking[0]
            messages = compacted(blocks)
            answer = await second_turn(client, messages, stream=stream_two)
    assert answer == "a.txt says hello."
    assert upstream.rejected == 0
    sent = sent_turn(upstream)
    assert sent[0] == upstream.thinking[0]  # text and signature, byte for byte
    assert sent[1:] == messages[1]["content"]  # the client's blocks after it, untouched
    assert counter(proxy, "chatmend_reasoning_total", outcome="stored") == 1
    assert counter(proxy, "chatmend_reasoning_total", outcome="restored") == 1
    assert "reasoning_placeholder" not in [entry["event"] for entry in logs]
    sanitized = [e for e in logs if e["event"] == "payload_sanitized"]
    restored = [c for c in sanitized[-1]["changes"] if c["rule"] == "messages-missing-thinking"]
    assert restored[0]["action"] == "restored_thinking"
    assert restored[0]["length"] == len(upstream.thinking[0]["thinking"])
    # privacy: neither the text, a piece of it, nor the signature is in any log line
    assert "PRIVATE-THOUGHT" not in logged(logs)
    assert upstream.thinking[0]["signature"] not in logged(logs)


async def test_without_chatmend_the_strict_upstream_rejects_turn_two(
    start: Start, upstream: ThinkingAnthropic
) -> None:
    """The premise: the emulated DeepSeek endpoint refuses what the client sends."""
    proxy = await start({"profile": "passthrough", "recover": {"enabled": False}})
    async with sdk(proxy) as client:
        blocks = await first_turn(client, stream=True)
        with pytest.raises(anthropic.BadRequestError) as refused:
            await second_turn(client, compacted(blocks))
    assert "The `content[].thinking` in the thinking mode must be passed back to the API." in str(
        refused.value
    )


async def test_a_turn_chatmend_never_saw_gets_the_placeholder(
    start: Start, upstream: ThinkingAnthropic
) -> None:
    proxy = await start()
    unknown: list[dict[str, Any]] = [
        QUESTION,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_never", "name": "read_file", "input": {}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_never"}]},
    ]
    with capture_logs() as logs:
        async with sdk(proxy) as client:
            await second_turn(client, unknown)
    assert sent_turn(upstream)[0] == PLACEHOLDER
    placed = [e for e in logs if e["event"] == "reasoning_placeholder"]
    assert placed and placed[0]["indices"] == [1]
    assert counter(proxy, "chatmend_reasoning_total", outcome="placeholder") == 1


async def test_another_client_key_does_not_get_the_thinking(
    start: Start, upstream: ThinkingAnthropic
) -> None:
    """The scope holds a digest of the client's credential (here ``x-api-key``)."""
    proxy = await start()
    async with sdk(proxy, "sk-tenant-a") as tenant_a, sdk(proxy, "sk-tenant-b") as tenant_b:
        messages = compacted(await first_turn(tenant_a, stream=False))
        await second_turn(tenant_b, messages)
        assert sent_turn(upstream)[0] == PLACEHOLDER
        await second_turn(tenant_a, messages)
        assert sent_turn(upstream)[0] == upstream.thinking[0]


async def test_an_anonymous_client_is_never_stored_nor_recalled(
    start: Start, upstream: ThinkingAnthropic
) -> None:
    proxy = await start()
    turn_one = {
        "model": MODEL,
        "max_tokens": 64,
        "thinking": THINKING,
        "tools": TOOLS,
        "messages": [QUESTION],
    }
    response = await proxy.post(URL, data=orjson.dumps(turn_one), headers=HEADERS)
    assert response.status == 200, await response.text()
    blocks = (await response.json())["content"]
    turn_two = {**turn_one, "messages": compacted(blocks)}
    response = await proxy.post(URL, data=orjson.dumps(turn_two), headers=HEADERS)
    assert response.status == 200, await response.text()
    assert sent_turn(upstream)[0] == PLACEHOLDER
    assert counter(proxy, "chatmend_reasoning_total", outcome="stored") == 0


async def test_a_request_not_in_thinking_mode_is_not_observed(
    start: Start, upstream: ThinkingAnthropic
) -> None:
    proxy = await start()
    async with sdk(proxy) as client:
        await client.messages.create(
            model="deepseek-chat",  # no `thinking` and not a model that thinks by default
            max_tokens=64,
            tools=TOOLS,  # type: ignore[arg-type]
            messages=[QUESTION],  # type: ignore[list-item]
        )
    assert counter(proxy, "chatmend_reasoning_total", outcome="stored") == 0


async def test_store_off_keeps_only_the_placeholder(
    start: Start, upstream: ThinkingAnthropic
) -> None:
    proxy = await start({"reasoning": {"store": "off"}})
    assert proxy.app[REASONING_KEY].stash is None
    async with sdk(proxy) as client:
        await second_turn(client, compacted(await first_turn(client, stream=True)))
    assert sent_turn(upstream)[0] == PLACEHOLDER


async def test_a_body_repaired_in_a_worker_process_gets_its_thinking_back(
    start: Start, upstream: ThinkingAnthropic
) -> None:
    """A body over offload_body_bytes: the stash keys are computed in a worker process."""
    proxy = await start({"offload_body_bytes": 1})
    async with sdk(proxy) as client:
        await second_turn(client, compacted(await first_turn(client, stream=False)))
    assert sent_turn(upstream)[0] == upstream.thinking[0]


@pytest.mark.slow  # a real redis-server
async def test_two_instances_sharing_redis_restore_each_others_turns(
    start: Start, upstream: ThinkingAnthropic, redis_server: RedisServer
) -> None:
    config = {"reasoning": {"store": "redis", "redis": {"url": redis_server.url}}}
    first, second = await start(config), await start(config)
    with capture_logs() as logs:
        async with sdk(first) as one, sdk(second) as two:
            for stream in (False, True):
                blocks = await first_turn(one, stream=stream)
                await second_turn(two, compacted(blocks))
                assert sent_turn(upstream)[0] == blocks[0] == upstream.thinking[-1]
                blocks = await first_turn(two, stream=stream)
                await second_turn(one, compacted(blocks), stream=True)
                assert sent_turn(upstream)[0] == blocks[0] == upstream.thinking[-1]
    assert upstream.rejected == 0
    assert "PRIVATE-THOUGHT" not in logged(logs)
    stash = first.app[REASONING_KEY].stash
    assert stash is not None
    keys = await stash.store.client.keys("*")
    assert len(keys) == 4
    for key in keys:
        assert key.startswith(b"chatmend:reasoning:")
        assert len(key) == len("chatmend:reasoning:") + 64
