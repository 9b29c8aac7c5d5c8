"""One case per catalogued rejection a profile applies, taken from the check's record
(``Check.examples``): ``chatmend emulate --profile P`` rejects the raw case with that provider's
status and quoted text, and the proxy under the same profile gets it accepted (docs/providers.md
rows are cited next to each check's text)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import create_app
from rules.providers.contract import CHECKS_BY_CODE, violations
from rules.providers.profiles import PROFILES
from tools.emulate.app import create_emulator


def example_for(profile: str, code: str) -> dict[str, Any]:
    """The first example of check ``code`` (``Check.examples``) that ``profile``'s contract
    refuses with it, as a whole request (tests/rules/test_checks.py holds every profile to
    having one)."""
    contract = PROFILES[profile].contract
    for example in CHECKS_BY_CODE[code].examples:
        payload = {"model": "some-model", **example.request}
        if code in {v.code for v in violations(payload, contract)}:
            return payload
    raise AssertionError(f"no example of {code} is refused under {profile}")


ROWS = sorted((name, code) for name, profile in PROFILES.items() for code in profile.contract)


Start = Callable[[str], Awaitable[tuple[TestClient[Any, Any], TestClient[Any, Any]]]]


@pytest.fixture
def start(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> Start:
    async def start(profile: str) -> tuple[TestClient[Any, Any], TestClient[Any, Any]]:
        upstream = await aiohttp_server(create_emulator(profile=profile))
        url = str(upstream.make_url("")).rstrip("/")
        config = parse_config({"profile": profile}, default_upstream=url)
        proxy = await aiohttp_client(create_app(config))
        direct = await aiohttp_client(create_emulator(profile=profile))
        return direct, proxy

    return start


@pytest.mark.parametrize("profile", sorted({name for name, _ in ROWS}))
async def test_each_catalogued_rejection_is_emulated_and_repaired(
    profile: str, start: Start
) -> None:
    direct, proxy = await start(profile)
    contract = PROFILES[profile].contract
    for code in contract:
        payload = example_for(profile, code)
        found = violations(payload, contract)
        assert code in {v.code for v in found}, (profile, code, found)
        body = orjson.dumps(payload)
        response = await direct.post("/v1/chat/completions", data=body)
        answer = await response.json()
        message = answer["message"] if "object" in answer else answer["error"]["message"]
        assert (response.status, message) == (found[0].status, found[0].message), (profile, code)
        with capture_logs() as logs:
            response = await proxy.post("/v1/chat/completions", data=body)
        assert response.status == 200, (profile, code, await response.text())
        assert not [e for e in logs if e["event"] == "contract_violation"], (profile, code)
