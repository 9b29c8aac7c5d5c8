"""The reasoning stash end to end, through the real app: turn 1's response carries reasoning and
tool calls; turn 2, sent without them, reaches a strict thinking-mode upstream (``chatmend
emulate``'s deepseek contract, docs/providers.md#deepseek-reasoning) with the exact text restored.
On one instance (memory store), across two sharing one real redis-server, and with that Redis
stopped mid-run (a placeholder, never an error). The reasoning text never reaches the logs."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import aiohttp
import openai
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import METRICS_KEY, REASONING_KEY, RUNTIME_KEY, create_app
from rules.chat import reasoning_content
from rules.chat.reasoning_content import RULE
from rules.engine.base import StashQuery
from rules.providers.planner import Plan
from tests.fake_thinking import (
    ThinkingUpstream,
    create_thinking_upstream,
    turn_one,
    turn_two,
)
from tests.proxy.test_operate import serving
from tests.redis_server import RedisServer

Client = TestClient[Any, Any]
Start = Callable[..., Awaitable[Client]]
URL = "/v1/chat/completions"


@pytest.fixture
def upstream() -> ThinkingUpstream:
    return ThinkingUpstream()


@pytest.fixture
async def start(
    upstream: ThinkingUpstream,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> Start:
    server = await aiohttp_server(create_thinking_upstream(upstream))
    url = str(server.make_url("")).rstrip("/")

    async def start(yaml: dict[str, Any] | None = None) -> Client:
        # A client's credential scopes its reasoning; an anonymous one has none stashed.
        app = create_app(parse_config(yaml or {}, default_upstream=url))
        return await aiohttp_client(app, headers={"Authorization": "Bearer sk-client-a"})

    return start


async def first_turn(
    client: Client,
    *,
    stream: bool,
    model: str = "deepseek-v4-pro",
    path: str = URL,
    tools: bool = False,
) -> dict[str, Any]:
    """Send turn 1 and rebuild the assistant message the client got, as an SDK would."""
    response = await client.post(path, data=turn_one(stream=stream, model=model, tools=tools))
    assert response.status == 200, await response.text()
    if not stream:
        message: dict[str, Any] = (await response.json())["choices"][0]["message"]
        return message
    calls: dict[int, dict[str, Any]] = {}
    reasoning = ""
    for line in (await response.read()).split(b"\n"):
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        delta = orjson.loads(line[6:])["choices"][0]["delta"]
        reasoning += delta.get("reasoning_content") or ""
        for piece in delta.get("tool_calls") or []:
            call = calls.setdefault(
                piece["index"], {"type": "function", "function": {"name": "", "arguments": ""}}
            )
            if "id" in piece:
                call["id"] = piece["id"]
            function = piece.get("function", {})
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""
    return {"role": "assistant", "reasoning_content": reasoning, "tool_calls": list(calls.values())}


def sent_reasoning(upstream: ThinkingUpstream) -> Any:
    """The reasoning_content of the tool-call turn in the last request the upstream got."""
    return upstream.received[-1]["messages"][1].get("reasoning_content")


def counter(client: Client, name: str, **labels: str) -> float:
    registry = client.app[METRICS_KEY].registry
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def logged(logs: Any) -> str:
    return orjson.dumps(logs, default=str).decode()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_turn_two_gets_the_exact_reasoning_back(
    start: Start, upstream: ThinkingUpstream, stream: bool
) -> None:
    proxy = await start()
    with capture_logs() as logs:
        message = await first_turn(proxy, stream=stream)
        assert message["reasoning_content"] == upstream.reasonings[0]
        response = await proxy.post(URL, data=turn_two(message, stream=False))
        assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) == upstream.reasonings[0]
    assert upstream.rejected == 0
    assert counter(proxy, "chatmend_reasoning_total", outcome="stored") == 1
    assert counter(proxy, "chatmend_reasoning_total", outcome="restored") == 1
    assert "reasoning_placeholder" not in [entry["event"] for entry in logs]
    sanitized = [e for e in logs if e["event"] == "payload_sanitized"]
    assert sanitized[0]["changes"][0]["action"] == "restored_reasoning"
    assert sanitized[0]["changes"][0]["length"] == len(upstream.reasonings[0])
    # privacy: neither the text nor a piece of it is in any log line
    assert "PRIVATE-THOUGHT" not in logged(logs)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_call_made_from_text_gets_its_reasoning_back(
    start: Start, upstream: ThinkingUpstream, stream: bool
) -> None:
    """DeepSeek writes a call as DSML in content (deepseek-ai/DeepSeek-V3#1244): the reply rules
    make it a tool call, and the stash reads the answer the client got, so turn two, sent back
    without reasoning under the id chatmend made, gets the exact reasoning back."""
    upstream.as_text = True
    proxy = await start()
    message = await first_turn(proxy, stream=stream, tools=True)
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["read_file"]
    assert message["tool_calls"][0]["id"].startswith("call_")
    response = await proxy.post(URL, data=turn_two(message, stream=False))
    assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) == upstream.reasonings[0]
    assert upstream.rejected == 0


async def test_two_agents_sharing_one_key_share_one_scope(
    start: Start, upstream: ThinkingUpstream
) -> None:
    """Documented (issue 27, docs/reasoning.md#scope): the scope is the credential, not the
    conversation. Another conversation on the same key whose tool calls are the same gets the
    first one's reasoning back; another key does not."""
    proxy = await start()
    message = await first_turn(proxy, stream=False)
    other = orjson.loads(turn_two(message))
    other["messages"][0]["content"] = "Another agent, another task: read a.txt"
    response = await proxy.post(URL, data=orjson.dumps(other))
    assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) == upstream.reasonings[0]
    response = await proxy.post(
        URL, data=orjson.dumps(other), headers={"Authorization": "Bearer sk-client-b"}
    )
    assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) != upstream.reasonings[0]


async def test_a_request_not_in_thinking_mode_is_not_observed(
    start: Start, upstream: ThinkingUpstream
) -> None:
    """A model that does not think has no reasoning to keep: its response is relayed without an
    observer (the hooks cost nothing past the one parse the rules reuse)."""
    proxy = await start()
    response = await proxy.post(URL, data=turn_one(model="deepseek-chat"))
    assert response.status == 200, await response.text()
    assert counter(proxy, "chatmend_reasoning_total", outcome="stored") == 0
    thinking = await first_turn(proxy, stream=False)  # the same client in thinking mode
    assert thinking["reasoning_content"]
    assert counter(proxy, "chatmend_reasoning_total", outcome="stored") == 1


async def test_without_the_stash_the_strict_upstream_rejects_turn_two(
    start: Start, upstream: ThinkingUpstream
) -> None:
    """The premise: the emulated thinking-mode upstream refuses what the client sends."""
    proxy = await start({"profile": "passthrough", "recover": {"enabled": False}})
    message = await first_turn(proxy, stream=False)
    response = await proxy.post(URL, data=turn_two(message))
    assert response.status == 400
    text = (await response.json())["error"]["message"]
    assert text == "The `reasoning_content` in the thinking mode must be passed back to the API."


async def test_a_miss_sends_the_placeholder_and_logs_it(
    start: Start, upstream: ThinkingUpstream
) -> None:
    proxy = await start()
    unknown = {
        "tool_calls": [
            {
                "id": "call_never_seen",
                "type": "function",
                "function": {"name": "read_file", "arguments": "{}"},
            }
        ]
    }
    with capture_logs() as logs:
        response = await proxy.post(URL, data=turn_two(unknown))
    assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) == " "
    placed = [e for e in logs if e["event"] == "reasoning_placeholder"]
    assert placed and placed[0]["count"] == 1 and placed[0]["indices"] == [1]
    assert counter(proxy, "chatmend_reasoning_total", outcome="placeholder") == 1


async def test_another_client_key_does_not_get_the_reasoning(
    start: Start, upstream: ThinkingUpstream
) -> None:
    """The scope holds a digest of the client's credential: same ids, other tenant, no text."""
    proxy = await start()
    response = await proxy.post(
        URL, data=turn_one(), headers={"Authorization": "Bearer sk-tenant-a"}
    )
    message = (await response.json())["choices"][0]["message"]
    body = turn_two(message)
    await proxy.post(URL, data=body, headers={"Authorization": "Bearer sk-tenant-b"})
    assert sent_reasoning(upstream) == " "
    await proxy.post(URL, data=body, headers={"Authorization": "Bearer sk-tenant-a"})
    assert sent_reasoning(upstream) == upstream.reasonings[0]


async def test_store_off_keeps_only_the_placeholder(
    start: Start, upstream: ThinkingUpstream
) -> None:
    proxy = await start({"reasoning": {"store": "off"}})
    assert proxy.app[REASONING_KEY].stash is None
    message = await first_turn(proxy, stream=True)
    response = await proxy.post(URL, data=turn_two(message))
    assert response.status == 200
    assert sent_reasoning(upstream) == " "


async def test_a_non_thinking_request_is_neither_looked_up_nor_changed(
    start: Start, upstream: ThinkingUpstream
) -> None:
    proxy = await start()
    message = await first_turn(proxy, stream=False)
    body = turn_two(message, model="deepseek-chat")
    response = await proxy.post(URL, data=body)
    assert response.status == 200
    assert "reasoning_content" not in upstream.received[-1]["messages"][1]


@pytest.mark.slow
async def test_two_instances_sharing_redis_restore_each_others_turns(
    start: Start, upstream: ThinkingUpstream, redis_server: RedisServer
) -> None:
    config = {"reasoning": {"store": "redis", "redis": {"url": redis_server.url}}}
    first, second = await start(config), await start(config)
    with capture_logs() as logs:
        for stream in (False, True):
            message = await first_turn(first, stream=stream)
            response = await second.post(URL, data=turn_two(message))
            assert response.status == 200, await response.text()
            assert sent_reasoning(upstream) == message["reasoning_content"]
            # and the other way round
            message = await first_turn(second, stream=stream)
            response = await first.post(URL, data=turn_two(message))
            assert response.status == 200, await response.text()
            assert sent_reasoning(upstream) == message["reasoning_content"]
    assert upstream.rejected == 0
    assert "PRIVATE-THOUGHT" not in logged(logs)
    # Redis holds hashes as keys (under the prefix), the text only as values.
    stash = first.app[REASONING_KEY].stash
    assert stash is not None
    keys = await stash.store.client.keys("*")
    assert len(keys) == 4
    for key in keys:
        assert key.startswith(b"chatmend:reasoning:")
        assert len(key) == len("chatmend:reasoning:") + 64


@pytest.mark.slow
async def test_redis_stopped_mid_run_degrades_to_the_placeholder_then_recovers(
    start: Start, upstream: ThinkingUpstream, redis_server: RedisServer
) -> None:
    config = {
        "reasoning": {
            "store": "redis",
            "redis": {"url": redis_server.url, "timeout_seconds": 0.2},
        }
    }
    proxy = await start(config)
    stash = proxy.app[REASONING_KEY].stash
    assert stash is not None
    stash.retry_seconds = 0.0  # try Redis again on every request (the default waits 1 s)
    message = await first_turn(proxy, stream=True)
    redis_server.stop()
    with capture_logs() as logs:
        response = await proxy.post(URL, data=turn_two(message))
        assert response.status == 200, await response.text()
        assert sent_reasoning(upstream) == " "
        # a turn 1 while Redis is down: relayed whole, the write fails quietly
        lost = await first_turn(proxy, stream=True)
        assert lost["reasoning_content"] == upstream.reasonings[-1]
        response = await proxy.post(URL, data=turn_two(lost))
        assert response.status == 200
    events = [e["event"] for e in logs]
    assert events.count("reasoning_store_unavailable") == 1
    assert "reasoning_placeholder" in events
    errors = counter(proxy, "chatmend_reasoning_store_errors_total", store="redis", operation="get")
    assert errors >= 2
    assert counter(proxy, "chatmend_reasoning_store_errors_total", store="redis", operation="put")
    unavailable = next(e for e in logs if e["event"] == "reasoning_store_unavailable")
    assert unavailable["url"] == redis_server.url

    # Redis back on the same port: the next turns are stored and restored again.
    redis_server.start()
    with capture_logs() as logs:
        message = await first_turn(proxy, stream=False)
        response = await proxy.post(URL, data=turn_two(message))
        assert response.status == 200
    assert sent_reasoning(upstream) == message["reasoning_content"]
    assert "reasoning_store_recovered" in [e["event"] for e in logs]


async def test_kimi_thinking_models_under_the_kimi_profile(
    start: Start, upstream: ThinkingUpstream
) -> None:
    """docs/providers.md#kimi-reasoning: Kimi K2.5 rejects a tool-call turn without its
    reasoning."""
    upstream.profile = "kimi"
    proxy = await start({"profile": "kimi"})
    model = "moonshotai/kimi-k2.5"
    turn = await first_turn(proxy, stream=True, model=model)
    response = await proxy.post(URL, data=turn_two(turn, model=model))
    assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) == upstream.reasonings[-1]
    # a turn chatmend never saw gets Kimi's placeholder, which the emulated Kimi accepts
    turn["tool_calls"][0]["id"] = "functions.read_file:0"
    response = await proxy.post(URL, data=turn_two(turn, model=model))
    assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) == "tool call"
    # and without chatmend's rule the emulated Kimi rejects it in its own words
    direct = await start({"profile": "passthrough", "recover": {"enabled": False}})
    response = await direct.post(URL, data=turn_two(turn, model=model))
    assert response.status == 400
    assert (await response.json())["error"]["message"] == (
        "thinking is enabled but reasoning_content is missing in assistant tool call message "
        "at index 1"
    )


async def test_a_named_route_restores_its_own_turns(
    start: Start, upstream: ThinkingUpstream
) -> None:
    proxy = await start()
    url = proxy.app[RUNTIME_KEY].current.config.default.upstream.url
    routed = await start({"routes": {"ds": {"upstream": {"url": url}}}})
    message = await first_turn(routed, stream=True, path="/ds" + URL)
    response = await routed.post("/ds" + URL, data=turn_two(message))
    assert response.status == 200
    assert sent_reasoning(upstream) == upstream.reasonings[-1]


async def test_a_failing_lookup_fails_open(
    start: Start, upstream: ThinkingUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug on the lookup path costs the restore, never the request (rules are fail-open)."""
    proxy = await start()
    message = await first_turn(proxy, stream=False)

    def broken(*args: Any) -> list[str]:
        raise RuntimeError("PRIVATE-THOUGHT in an exception text")

    recall = StashQuery(serves=lambda *args: True, keys=broken)
    monkeypatch.setattr(Plan, "recalling", lambda self: (recall, RULE.context()))
    with capture_logs() as logs:
        response = await proxy.post(URL, data=turn_two(message))
    assert response.status == 200
    assert sent_reasoning(upstream) == " "
    failed = [e for e in logs if e["event"] == "reasoning_recall_failed"]
    assert failed and failed[0]["error"] == "RuntimeError"
    assert "PRIVATE-THOUGHT" not in logged(logs)


@pytest.mark.slow
async def test_a_body_repaired_in_a_worker_process_gets_its_reasoning_back(
    start: Start, upstream: ThinkingUpstream
) -> None:
    """Issue 15: a body over offload_body_bytes is parsed (for the stash keys) and repaired in
    a worker process; the lookup in between still restores the turn's reasoning."""
    proxy = await start({"offload_body_bytes": 1})
    message = await first_turn(proxy, stream=False)
    response = await proxy.post(URL, data=turn_two(message, stream=False))
    assert response.status == 200, await response.text()
    assert sent_reasoning(upstream) == upstream.reasonings[0]
    assert counter(proxy, "chatmend_reasoning_total", outcome="restored") == 1


async def test_an_anonymous_client_is_never_stored_nor_recalled(
    upstream: ThinkingUpstream,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    """Issue 15: every client without a credential hashed to one scope (sha256 of "") and got
    the others' reasoning back."""
    server = await aiohttp_server(create_thinking_upstream(upstream))
    app = create_app(parse_config({}, default_upstream=str(server.make_url("")).rstrip("/")))
    anonymous = await aiohttp_client(app)
    message = await first_turn(anonymous, stream=False)
    response = await anonymous.post(URL, data=turn_two(message, stream=False))
    assert response.status == 200
    assert sent_reasoning(upstream) != upstream.reasonings[0]
    assert counter(anonymous, "chatmend_reasoning_total", outcome="stored") == 0
    assert counter(anonymous, "chatmend_reasoning_total", outcome="restored") == 0


@pytest.mark.slow
async def test_serve_with_the_redis_store_logs_only_json(
    tmp_path: Path,
    upstream: ThinkingUpstream,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    redis_server: RedisServer,
) -> None:
    """`chatmend serve` with `reasoning.store: redis`, as an operator runs it: turn 2 gets its
    reasoning back through Redis, and every line the process writes (stdout and stderr) is a JSON
    log event. redis-py 8 warned, as a plain-text line, when the asyncio client was given the
    synchronous Retry class (issue 34)."""
    server = await aiohttp_server(create_thinking_upstream(upstream))
    config = tmp_path / "chatmend.yaml"
    config.write_text(
        f"upstream: {{url: '{str(server.make_url('')).rstrip('/')}'}}\n"
        f"reasoning: {{store: redis, redis: {{url: '{redis_server.url}'}}}}\n"
    )
    headers = {"Authorization": "Bearer sk-client-a", "Content-Type": "application/json"}
    async with serving(config) as proxy, aiohttp.ClientSession(headers=headers) as http:
        async with http.post(proxy.url + URL, data=turn_one(stream=False)) as response:
            assert response.status == 200, await response.text()
            message = (await response.json())["choices"][0]["message"]
        async with http.post(proxy.url + URL, data=turn_two(message)) as response:
            assert response.status == 200, await response.text()
        await proxy.wait_for("request_done", 2)
        proxy.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proxy.process.wait(), 10) == 0
    assert sent_reasoning(upstream) == message["reasoning_content"]
    lines = proxy.log.read_bytes().splitlines()
    assert lines
    for line in lines:
        assert isinstance(orjson.loads(line), dict), line


async def test_a_store_slower_than_the_sanitize_deadline_sends_the_body_as_it_came(
    start: Start, upstream: ThinkingUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline acts where the repair waits, the store's lookup (proxy/server/trip.py runs
    the rest inline, where nothing waits): past it, the body goes as it came, counted."""
    proxy = await start({"sanitize_deadline": 0.05, "recover": {"enabled": False}})
    message = await first_turn(proxy, stream=False)
    store = proxy.app[REASONING_KEY].stash.store

    async def slow(keys: Any) -> dict[str, str]:
        await asyncio.sleep(0.5)
        return {}

    monkeypatch.setattr(store, "get_many", slow)
    body = turn_two(message)
    with capture_logs() as logs:
        await proxy.post(URL, data=body)
    assert upstream.received[-1] == orjson.loads(body)  # no reasoning restored, nothing changed
    (limit,) = [e for e in logs if e["event"] == "limit_exceeded"]
    assert (limit["limit"], limit["seconds"]) == ("sanitize_deadline", 0.05)
    assert counter(proxy, "chatmend_limits_total", limit="sanitize_deadline") == 1
    assert "payload_sanitized" not in [entry["event"] for entry in logs]


async def test_a_long_thinking_session_resumes_with_every_turn_restored(
    start: Start, upstream: ThinkingUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent on DeepSeek's thinking mode through the openai SDK, dropping
    ``reasoning_content`` as most do: every request is given the reasoning of every tool-call
    turn so far, one more than the last request, and still resumes the rules from the last
    one (rules/engine/resume.py: the facts say the same of the old turns), rather than running
    them over the whole history; the stash's keys are worked out for the turns each request
    adds only (proxy/stash/hooks.py); each turn reaches the strict upstream with its own text."""
    keyed: list[int] = []
    turn_key = reasoning_content.turn_key

    def counted(scope: str, calls: Any) -> str | None:
        keyed.append(1)
        return turn_key(scope, calls)

    monkeypatch.setattr(reasoning_content, "turn_key", counted)
    proxy = await start()
    stash = proxy.app[REASONING_KEY].stash
    assert stash is not None
    asked: list[int] = []
    fetch = stash.recall

    async def asking(keys: Any) -> dict[str, str]:
        asked.append(len(keys))
        found: dict[str, str] = await fetch(keys)
        return found

    monkeypatch.setattr(stash, "recall", asking)
    client = openai.AsyncOpenAI(
        base_url=str(proxy.make_url("/v1")), api_key="sk-client-a", max_retries=0
    )
    messages: list[dict[str, Any]] = []
    requests = 0
    async with client:
        for turn in range(12):
            messages.append({"role": "user", "content": f"Read a.txt ({turn})"})
            for _ in range(2):  # the tool call, then the answer once its result is in
                answer = await client.chat.completions.create(
                    model="deepseek-v4-pro", messages=cast(Any, messages)
                )
                requests += 1
                message = answer.choices[0].message.model_dump(exclude_none=True)
                message.pop("reasoning_content", None)  # what the client keeps of it
                messages.append(message)
                if not message.get("tool_calls"):
                    break
                call = message["tool_calls"][0]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "hi"})
    assert upstream.rejected == 0 and len(upstream.received) == requests
    texts = dict(zip(upstream.call_ids, upstream.reasonings, strict=True))
    for received in upstream.received:
        for sent in received["messages"]:
            if sent.get("tool_calls"):
                assert sent["reasoning_content"] == texts[sent["tool_calls"][0]["id"]]
    restored = counter(proxy, "chatmend_reasoning_total", outcome="restored")
    # Each tool-call turn's, on every later request: turn t's two requests restore t + 1.
    assert restored == sum(2 * turn + 1 for turn in range(12))
    resumed = counter(proxy, "chatmend_prefix_resumes_total", result="resumed")
    assert resumed >= requests - 4, (resumed, requests)
    # A key for each turn a request adds (the lookup, then the rules restoring it), not one
    # for every turn of the history on every request (144 for the lookup alone).
    assert len(keyed) <= 3 * requests, (len(keyed), requests)
    # The store is asked for each turn's text once, when it is new (144 keys without that).
    assert asked == [1] * 12, asked
