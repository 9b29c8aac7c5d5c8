"""The shared reasoning store: Redis (``redis.asyncio``), for replicas behind one agent fleet.

Keys are ``prefix`` + the turn's hex key; values the UTF-8 reasoning text, written with
``SET ... EX ttl`` and read with one ``MGET``. Socket timeouts are short and nothing is retried
here: the caller (``proxy.stash.Stash``) treats any failure as a miss, and the client reconnects
on the next command once Redis is back.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import redis.asyncio as redis
from redis.asyncio.retry import Retry  # the asyncio client's own (redis-py 8 warns on the sync one)
from redis.backoff import NoBackoff
from yarl import URL

#: The environment variable a Redis password may come from (never the YAML, never the logs).
ENV_PASSWORD = "CHATMEND_REDIS_PASSWORD"


class RedisStore:
    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str,
        ttl_seconds: float,
        timeout_seconds: float,
        password: str | None = None,
    ) -> None:
        self.prefix = prefix
        self.ttl = max(1, int(ttl_seconds))
        self.url = redact(url)
        password = password if password is not None else os.environ.get(ENV_PASSWORD) or None
        self.client: redis.Redis = redis.Redis.from_url(
            url,
            socket_timeout=timeout_seconds,
            socket_connect_timeout=timeout_seconds,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        if password:  # over a password in the URL: the environment is the operator's choice
            self.client.connection_pool.connection_kwargs["password"] = password

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        if not keys:
            return {}
        values = await self.client.mget([self.prefix + key for key in keys])
        found: dict[str, str] = {}
        for key, value in zip(keys, values, strict=True):
            if isinstance(value, bytes):
                found[key] = value.decode("utf-8", "replace")
        return found

    async def put(self, key: str, text: str) -> None:
        await self.client.set(self.prefix + key, text.encode("utf-8", "replace"), ex=self.ttl)

    async def close(self) -> None:
        await self.client.aclose()


def redact(url: str) -> str:
    """The URL without its password (in the userinfo or the query), for the logs."""
    try:
        parsed = URL(url)
    except ValueError:
        return "<invalid url>"
    if parsed.password is not None:
        parsed = parsed.with_password("***")
    if "password" in parsed.query:  # redis-py reads ?password= too
        parsed = parsed.update_query(password="***")
    return str(parsed)
