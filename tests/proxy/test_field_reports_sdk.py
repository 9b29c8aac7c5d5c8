"""The field reports of issue 25 end to end, through the official openai SDK: the reporter's
request, sent as the SDK sends it, is refused by the emulated provider directly (its own words)
and accepted through chatmend under the profile the upstream's host selects (OpenRouter: the
downstream provider's emulation behind the ``openrouter`` profile)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestClient, TestServer

from proxy.config import parse_config, profile_for_upstream
from proxy.server.app import create_app
from rules.providers.planner import Planner
from tests.rules.test_field_reports import REPORTS, Report
from tools.emulate.app import create_emulator

Client = TestClient[Any, Any]


def sdk(client: Client) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=str(client.make_url("/v1")), api_key="sk-test-not-real", max_retries=0
    )


async def send(client: Client, body: dict[str, Any]) -> Any:
    rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
    async with sdk(client) as api:
        return await api.chat.completions.create(
            model=body["model"], messages=body["messages"], extra_body=rest
        )


@pytest.mark.slow
@pytest.mark.parametrize("report", REPORTS, ids=[r.source for r in REPORTS])
async def test_the_sdk_request_is_refused_directly_and_accepted_through_chatmend(
    report: Report,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    profile, _ = profile_for_upstream(report.upstream)
    downstream = Planner(default=profile).plan(report.body["model"]).profile
    provider = await aiohttp_server(create_emulator(profile=downstream))
    direct = await aiohttp_client(create_emulator(profile=downstream))
    url = str(provider.make_url("")).rstrip("/")
    proxy = await aiohttp_client(
        create_app(parse_config({"profile": profile}, default_upstream=url))
    )
    with pytest.raises(openai.BadRequestError):
        await send(direct, report.body)
    completion = await send(proxy, report.body)
    assert completion.choices[0].message.role == "assistant"
