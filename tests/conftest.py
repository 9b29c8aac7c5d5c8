"""Shared fixtures: a fake strict upstream and a chatmend proxy in front of it."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, settings

from proxy.config import Config, UpstreamConfig, parse_config
from proxy.server.app import create_app
from tests.fake_upstream import FakeUpstream, create_fake_upstream
from tests.redis_server import RedisServer

ProxyFactory = Callable[..., Awaitable[TestClient[Any, Any]]]

# Hypothesis budgets: one example count per run, chosen here, not per test (a test that needs
# more or fewer asks for a share of it: tests/budget.py). HYPOTHESIS_PROFILE picks the profile;
# without it, `ci` when the CI variable is set, else `dev`.
#   ci    today's counts (100 per property, scaled per test), the failing example printed as a
#         blob to reproduce it (@reproduce_failure), no example database on a throwaway runner.
#   dev   the same counts, with the local example database replaying past failures first.
#   deep  ten times the examples, no deadline: `make deep`, for a long run before a release.
settings.register_profile("ci", max_examples=100, print_blob=True, database=None)
settings.register_profile("dev", max_examples=100)
settings.register_profile(
    "deep", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


@pytest.fixture
def fake() -> FakeUpstream:
    return FakeUpstream()


@pytest.fixture
async def fake_server(
    fake: FakeUpstream, aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> TestServer:
    return await aiohttp_server(create_fake_upstream(fake))


def base_url(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


@pytest.fixture
async def make_proxy(
    fake_server: TestServer, aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]]
) -> ProxyFactory:
    """Start a proxy whose upstream is the fake; ``yaml`` is a config mapping to apply, ``env``
    the environment its ``*_env`` keys read."""

    async def start(
        yaml: dict[str, Any] | None = None, *, env: dict[str, str] | None = None, **upstream: Any
    ) -> TestClient[Any, Any]:
        config: Config = parse_config(
            yaml or {}, default_upstream=base_url(fake_server), env=env or {}
        )
        if upstream:
            default = replace(config.default, upstream=replace(config.default.upstream, **upstream))
            config = replace(config, default=default)
        return await aiohttp_client(create_app(config))

    return start


@pytest.fixture
async def proxy(make_proxy: ProxyFactory) -> TestClient[Any, Any]:
    return await make_proxy()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port, stopped after the test."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


__all__ = ["ProxyFactory", "UpstreamConfig", "base_url"]
