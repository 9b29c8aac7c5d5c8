"""Verified-prefix reuse as users run it: growing sessions sent by the openai and anthropic SDKs
through two chatmend servers in front of one strict fake, one with the prefix cache (the
default) and one with ``prefix_cache: {enabled: false}``. Each request reaches the upstream as
the same bytes through both, with the same changes counted, and the cached server says in
/metrics that it reused the sessions' prefixes."""

from __future__ import annotations

import copy
import re
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anthropic
import openai
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.relay.prefix import PrefixCache
from proxy.server.app import create_app
from rules.providers.profiles import PROFILES
from tests.anthropic_bodies import broken_session
from tests.conftest import ProxyFactory, base_url
from tests.fake_anthropic import FakeAnthropic, create_fake_anthropic
from tests.fake_upstream import FakeUpstream, strict_errors
from tests.proxy.test_prefix import with_cache_marker
from tests.sessions import api_session, session
from tests.writings import WRITINGS, items_written

Client = TestClient[Any, Any]
OFF = {"prefix_cache": {"enabled": False}}
#: The rules over the whole list each time (``prefix_cache.resume`` is on by default).
WHOLE = {"prefix_cache": {"resume": False}}


def _encodable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


def _hits(metrics: str) -> float:
    return _counted(metrics, "chatmend_prefix_reads_total", "hit")


def _counted(metrics: str, name: str, result: str) -> float:
    found = re.search(rf'^{name}\{{result="{result}"\}} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


async def test_a_stuck_chat_session_through_the_openai_sdk(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    cached, plain = await make_proxy(), await make_proxy(OFF)
    whole = await make_proxy(WHOLE)  # the cache, the rules over the whole list
    bodies = [orjson.loads(body) for body in session(80, "stuck", seed=11)]
    for number, body in enumerate(bodies):
        sent = []
        for proxy in (cached, plain, whole):
            client = openai.AsyncOpenAI(
                base_url=str(proxy.make_url("/v1")), api_key="sk-test", max_retries=0
            )
            async with client:
                raw = await client.chat.completions.with_raw_response.create(
                    model=body["model"],
                    messages=cast(Any, body["messages"]),
                    tools=cast(Any, body["tools"]),
                    temperature=body["temperature"],
                )
            sent.append((fake.received[-1].body, raw.headers["X-Chatmend-Changes"]))
        assert sent[0] == sent[1] == sent[2], number
        assert strict_errors(orjson.loads(sent[0][0])) == [], number
    assert sent[0][1].startswith("1;")  # the defect is carried, and repaired, to the end
    metrics = await (await cached.get("/metrics")).text()
    assert _hits(metrics) == len(bodies) - 1
    # Resumed (the default): every hit but the first few (a rule woken for the first time runs
    # whole); the same bytes as the rules over the whole list, above.
    resumed = _counted(metrics, "chatmend_prefix_resumes_total", "resumed")
    assert resumed >= len(bodies) - 4, resumed
    whole_metrics = await (await whole.get("/metrics")).text()
    assert _counted(whole_metrics, "chatmend_prefix_resumes_total", "resumed") == 0
    assert _hits(await (await plain.get("/metrics")).text()) == 0


async def test_a_claude_code_session_through_the_anthropic_sdk(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    fake = FakeAnthropic(contract=dict(PROFILES["anthropic"].messages_contract))
    server = await aiohttp_server(create_fake_anthropic(fake))
    proxies = []
    for extra in ({}, OFF):
        config = parse_config(
            {"profile": "anthropic", **extra}, default_upstream=base_url(server), env={}
        )
        proxies.append(await aiohttp_client(create_app(config)))
    whole = broken_session()
    messages = [m for m in whole["messages"] if _encodable(m)]  # not its cut emoji: the SDK
    # cannot send a lone surrogate. Each request's newest turn carries the cache marker, moved
    # on by the next request, as Claude Code does.
    for cut in range(1, len(messages) + 1):
        sent = []
        for proxy in proxies:
            url = str(proxy.make_url("")).rstrip("/")
            client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
            async with client:
                raw = await client.messages.with_raw_response.create(
                    model=whole["model"],
                    max_tokens=256,
                    system=whole["system"],
                    tools=whole["tools"],
                    messages=[
                        *copy.deepcopy(messages[: cut - 1]),
                        with_cache_marker(messages[cut - 1]),
                    ],
                )
            sent.append((fake.received[-1].body, raw.headers["X-Chatmend-Changes"]))
        assert sent[0] == sent[1], cut
    assert _hits(await (await proxies[0].get("/metrics")).text()) >= len(messages) - 2


async def test_a_failing_cache_costs_the_request_nothing(
    make_proxy: ProxyFactory, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail-open, like a rule: a cache that raises is logged, and the body is read whole."""

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(PrefixCache, "read", broken)
    proxy = await make_proxy()
    body = session(20, "stuck", seed=2)[-1]
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 200
    assert response.headers["X-Chatmend-Changes"].startswith("1;")
    assert [e["error"] for e in logs if e["event"] == "prefix_cache_failed"] == ["RuntimeError"]


#: What Claude Code sends with every request (its ``anthropic-beta`` values): facts the rules
#: are given (``RequestFacts.betas``), the same each request.
CLAUDE_CODE_BETAS = (
    "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
)


async def test_a_claude_code_session_with_its_betas_resumes(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    """Claude Code's betas reach the rules that read them (``messages-context-management``) on
    every request; the session still resumes (the plan given the same betas is the same plan),
    sending the bytes the rules over the whole list send. Before, every request ran whole."""
    fake = FakeAnthropic(contract=dict(PROFILES["anthropic"].messages_contract))
    server = await aiohttp_server(create_fake_anthropic(fake))
    proxies = []
    for extra in ({}, WHOLE):
        config = parse_config(
            {"profile": "anthropic", **extra}, default_upstream=base_url(server), env={}
        )
        proxies.append(await aiohttp_client(create_app(config)))
    bodies = [orjson.loads(body) for body in api_session("messages", 60, "stuck-split", seed=11)]
    for number, body in enumerate(bodies):
        sent = []
        for proxy in proxies:
            client = anthropic.AsyncAnthropic(
                base_url=str(proxy.make_url("")).rstrip("/"),
                api_key="sk-ant-test",
                max_retries=0,
                default_headers={"anthropic-beta": CLAUDE_CODE_BETAS},
            )
            async with client:
                raw = await client.messages.with_raw_response.create(
                    model=body["model"],
                    max_tokens=body["max_tokens"],
                    system=body["system"],
                    tools=body["tools"],
                    messages=body["messages"],
                )
            sent.append((fake.received[-1].body, raw.headers["X-Chatmend-Changes"]))
        assert sent[0] == sent[1], number
    assert "messages-duplicate-tool-use-ids" in sent[0][1]  # the reused id, carried to the end
    metrics = await (await proxies[0].get("/metrics")).text()
    resumed = _counted(metrics, "chatmend_prefix_resumes_total", "resumed")
    assert resumed >= len(bodies) - 4, resumed


@pytest.mark.parametrize("writing", ["go", "dotnet", "indented"])
async def test_a_stuck_session_in_another_writing_is_reused_through_the_server(
    make_proxy: ProxyFactory, fake: FakeUpstream, writing: str
) -> None:
    """A client that does not write orjson's bytes (Go's ``encoding/json``, .NET's
    ``System.Text.Json``, an indented body; no Python SDK writes them, so the bodies are posted
    as those clients write them): every request after the first is a hit, resumed, and the
    upstream gets the same bytes as through a server without the cache, the messages no rule
    touched as the client wrote them."""
    cached, plain = await make_proxy(), await make_proxy(OFF)
    bodies = [WRITINGS[writing](orjson.loads(body)) for body in session(60, "stuck", seed=11)]
    headers = {"Authorization": "Bearer sk-test", "Content-Type": "application/json"}
    for number, body in enumerate(bodies):
        sent = []
        for proxy in (cached, plain):
            response = await proxy.post("/v1/chat/completions", data=body, headers=headers)
            assert response.status == 200, number
            sent.append((fake.received[-1].body, response.headers["X-Chatmend-Changes"]))
        assert sent[0] == sent[1], number
        assert strict_errors(orjson.loads(sent[0][0])) == [], number
        # The turn no rule touched reaches the upstream as the client wrote it.
        assert items_written(sent[0][0], "messages")[-1] == items_written(body, "messages")[-1]
    assert sent[0][1].startswith("1;")  # the defect carried, and repaired, to the end
    metrics = await (await cached.get("/metrics")).text()
    assert _hits(metrics) == len(bodies) - 1
    assert _counted(metrics, "chatmend_prefix_resumes_total", "resumed") >= len(bodies) - 4
