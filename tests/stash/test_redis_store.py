"""The Redis store against a real redis-server: MGET/SET EX under the prefix, the password from
the environment, the URL redacted for the logs."""

from __future__ import annotations

import pytest

from proxy.stash import Stash
from proxy.stash.redis_store import ENV_PASSWORD, RedisStore, redact
from tests.redis_server import RedisServer


@pytest.mark.slow
async def test_put_then_get_many_under_the_prefix_with_a_ttl(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, prefix="t:", ttl_seconds=60, timeout_seconds=1)
    try:
        await store.put("a" * 64, "thought «one»")
        found = await store.get_many(["a" * 64, "b" * 64])
        assert found == {"a" * 64: "thought «one»"}
        assert await store.get_many([]) == {}
        assert 0 < await store.client.ttl("t:" + "a" * 64) <= 60
    finally:
        await store.close()


@pytest.mark.slow
async def test_a_dead_redis_is_a_miss_then_skipped_for_retry_seconds(tmp_path: object) -> None:
    from tests.redis_server import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    stash = Stash(
        RedisStore(url, prefix="t:", ttl_seconds=60, timeout_seconds=0.2),
        timeout_seconds=0.5,
        retry_seconds=60,
    )
    assert await stash.recall(["a" * 64]) == {}
    assert stash.record("a" * 64, "x") is None  # skipped while down: no task, no wait
    await stash.close()


def test_the_url_is_redacted_for_the_logs() -> None:
    assert redact("redis://:hunter2@cache:6379/0") == "redis://:***@cache:6379/0"
    assert redact("redis://user:hunter2@cache/1") == "redis://user:***@cache/1"
    assert redact("redis://cache:6379/0") == "redis://cache:6379/0"


def test_the_password_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PASSWORD, "from-env")
    store = RedisStore("redis://cache/0", prefix="", ttl_seconds=1, timeout_seconds=1)
    assert store.client.connection_pool.connection_kwargs["password"] == "from-env"
    assert "from-env" not in store.url
