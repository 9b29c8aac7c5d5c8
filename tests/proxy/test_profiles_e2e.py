"""Profiles end to end: the proxy, under a provider's profile, in front of that provider's
emulation (``chatmend emulate --profile``), turns every broken request into an accepted one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import create_app
from rules.providers.profiles import PROFILES
from tests.transcripts import BROKEN, USER
from tools.emulate.app import create_emulator

#: Requests broken in the ways profiles repair beyond the core pairing rules.
SHAPES: dict[str, dict[str, Any]] = {
    "developer_role": {"messages": [{"role": "developer", "content": "Be terse."}, USER]},
    "empty_tools": {"messages": [USER], "tools": [], "tool_choice": "auto"},
    "mid_system": {
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            USER,
            {"role": "assistant", "content": "On it."},
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Status?"},
        ]
    },
    "leading_assistant": {
        "messages": [{"role": "assistant", "content": "Hello, how can I help?"}, USER]
    },
    "trailing_assistant": {"messages": [USER, {"role": "assistant", "content": "Sure, I"}]},
    "split_user": {"messages": [USER, {"role": "user", "content": "Also the lint."}]},
    "junk_fields": {
        "messages": [
            {**USER, "timestamp": 1700000000, "api_content": "x"},
            {"role": "assistant", "content": "Done.", "finish_reason": "stop", "refusal": None},
            {"role": "user", "content": "Thanks."},
        ]
    },
}

CASES = [(kind, {"messages": messages}) for kind, messages in sorted(BROKEN.items())]
CASES += sorted(SHAPES.items())
#: Profiles that repair: passthrough forwards as sent, by design.
REPAIRING = [name for name in PROFILES if name != "passthrough"]


@pytest.fixture
def start(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> Callable[[str], Awaitable[tuple[TestClient[Any, Any], TestClient[Any, Any]]]]:
    async def start(profile: str) -> tuple[TestClient[Any, Any], TestClient[Any, Any]]:
        upstream = await aiohttp_server(create_emulator(profile=profile))
        url = str(upstream.make_url("")).rstrip("/")
        proxy = await aiohttp_client(
            create_app(parse_config({"profile": profile}, default_upstream=url))
        )
        direct = await aiohttp_client(create_emulator(profile=profile))
        return proxy, direct

    return start


@pytest.mark.slow
@pytest.mark.parametrize("profile", REPAIRING)
async def test_every_broken_request_is_accepted_through_the_profile(
    profile: str,
    start: Callable[[str], Awaitable[tuple[TestClient[Any, Any], TestClient[Any, Any]]]],
) -> None:
    proxy, direct = await start(profile)
    rejected_directly = 0
    for kind, payload in CASES:
        body = orjson.dumps({"model": "some-model", **payload})
        response = await direct.post("/v1/chat/completions", data=body)
        rejected_directly += response.status >= 400
        with capture_logs() as logs:
            response = await proxy.post("/v1/chat/completions", data=body)
        assert response.status == 200, (profile, kind, await response.text())
        assert not [e for e in logs if e["event"] == "contract_violation"], (profile, kind)
    assert rejected_directly, f"{profile}: its emulation rejects none of the cases"


async def test_the_model_picks_the_stricter_sibling(
    start: Callable[[str], Awaitable[tuple[TestClient[Any, Any], TestClient[Any, Any]]]],
) -> None:
    proxy, _ = await start("deepseek")
    body = orjson.dumps({"model": "deepseek-reasoner", "messages": BROKEN["empty_tool_calls"]})
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 200
    (sanitized,) = [e for e in logs if e["event"] == "payload_sanitized"]
    assert sanitized["profile"] == "deepseek-reasoner"
