"""/metrics: counters move as requests are repaired, pass clean, are rejected, or crash a rule."""

from __future__ import annotations

from typing import Any, cast

import orjson
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from proxy.observe.metrics import classify
from proxy.server.app import planner_of
from rules.engine.base import Outcome, Rule, RuleContext
from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeUpstream
from tests.transcripts import BROKEN, CLEAN_BODY


def chat(messages: list[Any]) -> bytes:
    return orjson.dumps({"model": "deepseek-chat", "messages": messages})


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def scrape(proxy: TestClient[Any, Any]) -> Samples:
    response = await proxy.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(await response.text()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _boom(messages: list[Any], ctx: RuleContext) -> Outcome:
    raise RuntimeError("boom")


async def test_counters_after_repaired_clean_rejected_and_failed_requests(
    make_proxy: ProxyFactory, fake: FakeUpstream
) -> None:
    off = {"recover": {"enabled": False}}  # the rejection is what this test counts
    proxy = await make_proxy({"rules": {"consecutive-assistant-messages": False}, **off})
    boom = Rule("exploding", "t", "t", "t", "safe", True, _boom)
    steps = cast(list[Any], planner_of(proxy.app).plans["deepseek"].steps)
    steps.insert(0, (boom, boom.context()))

    repaired = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert repaired.status == 200
    assert (await proxy.post("/v1/chat/completions", data=CLEAN_BODY)).status == 200
    rejected = await proxy.post("/v1/chat/completions", data=chat(BROKEN["split_assistant_turn"]))
    assert rejected.status == 400  # the merge rule is off: the strict fake rejects the split turn
    await proxy.get("/v1/models")

    m = await scrape(proxy)
    requests = "chatmend_requests_total"
    assert value(m, requests, profile="deepseek", api="chat", status="200", route="default") == 2
    assert value(m, requests, profile="deepseek", api="chat", status="400", route="default") == 1
    assert value(m, requests, profile="none", api="other", status="200", route="default") == 1
    rewrites = "chatmend_rewrites_total"
    assert value(m, rewrites, action="dropped_key", rule="empty-tool-calls") == 1
    assert value(m, "chatmend_rule_failures_total", rule="exploding") == 3
    rejections = "chatmend_upstream_rejections_total"
    # DeepSeek words successive users and successive assistants alike: either class is right
    (rejection,) = [labels for (name, labels), n in m.items() if name == rejections and n]
    assert dict(rejection)["class"] in ("successive_assistant", "successive_user")
    assert dict(rejection)["status"] == "400"
    assert value(m, "chatmend_upstream_seconds_count") == 4
    assert value(m, "chatmend_overhead_seconds_count") == 4
    assert value(m, "chatmend_streams_in_flight") == 0


async def test_contract_violations_are_counted(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy({"verify": True, "rules": {"empty-tool-calls": False}})
    # an empty tool_calls another rule touched: the rewritten body is checked and still rejected
    body = chat(
        [
            *BROKEN["empty_tool_calls"][:1],
            {"role": "assistant", "content": "a", "tool_calls": []},
            {"role": "assistant", "content": "b"},
        ]
    )
    await proxy.post("/v1/chat/completions", data=body)
    m = await scrape(proxy)
    assert (
        m[
            (
                "chatmend_contract_violations_total",
                (("code", "empty_tool_calls"), ("profile", "deepseek")),
            )
        ]
        == 1
    )


def test_rejections_are_classified_by_the_catalogue_texts() -> None:
    openai = (
        b'{"error": {"message": "Invalid \'messages[3].tool_calls\': empty array. Expected an '
        b'array with minimum length 1, but got an empty array instead."}}'
    )
    assert classify(openai) == "empty_tool_calls"
    mistral = b'{"object": "error", "message": "Unexpected role \'user\' after role \'tool\'"}'
    assert classify(mistral) == "unexpected_role_order"
    assert classify(b'{"error": {"message": "rate limited"}}') == "unclassified"
    # xAI's envelope: the text is the `error` string (router-for-me/CLIProxyAPI#3704)
    xai = (
        b'{"code": "Client specified an invalid argument", "error": "Invalid request content: '
        b'A tool_choice was set on the request but no tools were specified."}'
    )
    assert classify(xai) == "tool_choice_without_tools"
    kimi = (
        b'{"error": {"message": "tool_choice \'specified\' is incompatible with thinking enabled"}}'
    )
    assert classify(kimi) == "thinking_tool_choice"
    # OpenRouter relays the upstream body in error.metadata.raw (BerriAI/litellm#27439)
    raw = orjson.dumps(
        {
            "error": {
                "message": "The `reasoning_content` in the thinking mode must be passed back "
                "to the API.",
                "type": "invalid_request_error",
            }
        }
    ).decode()
    relayed = {"message": "Provider returned error", "code": 400, "metadata": {"raw": raw}}
    assert classify(orjson.dumps({"error": relayed})) == "reasoning_content_missing"
    assert classify(orjson.dumps({"error": {**relayed, "metadata": {"raw": "{"}}})) == (
        "unclassified"
    )
    assert classify(b"not json") == classify(None) == "unclassified"
