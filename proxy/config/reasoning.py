"""The ``reasoning:`` section of the YAML config: which store keeps the reasoning, and how long."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from proxy.config.validate import ConfigError, mapping, no_unknown, positive_int, seconds

STORES = ("memory", "redis", "off")
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_TTL_SECONDS = 24 * 3600.0
DEFAULT_PREFIX = "chatmend:reasoning:"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_REDIS_TIMEOUT = 0.25


#: A ``reasoning.*`` value is invalid; the message starts with the dotted key.
ReasoningConfigError = ConfigError


@dataclass(frozen=True, slots=True)
class RedisConfig:
    url: str = DEFAULT_REDIS_URL
    prefix: str = DEFAULT_PREFIX
    #: Seconds for connecting and for each command; past it the lookup is a miss.
    timeout_seconds: float = DEFAULT_REDIS_TIMEOUT


@dataclass(frozen=True, slots=True)
class ReasoningConfig:
    #: ``memory`` (in-process, bounded, never persisted), ``redis`` (shared) or ``off``.
    store: str = "memory"
    #: The memory store's bound: reasoning texts plus a fixed overhead per entry.
    max_bytes: int = DEFAULT_MAX_BYTES
    ttl_seconds: float = DEFAULT_TTL_SECONDS
    redis: RedisConfig = field(default_factory=RedisConfig)


def parse_reasoning(data: Any) -> ReasoningConfig:
    """Validate the ``reasoning:`` mapping (``None`` or absent: the defaults)."""
    if data is None:
        return ReasoningConfig()
    raw = mapping(data, "reasoning")
    no_unknown(raw, ("store", "max_bytes", "ttl_seconds", "redis"), "reasoning")
    store = raw.get("store", "memory")
    if store is False:
        store = "off"  # YAML reads an unquoted `off` as false: `store: off` means what it says
    if store not in STORES:
        raise ReasoningConfigError(
            f"reasoning.store: must be one of {', '.join(STORES)}, got {store!r}"
        )
    max_bytes = positive_int(raw.get("max_bytes", DEFAULT_MAX_BYTES), "reasoning.max_bytes")
    ttl = seconds(raw.get("ttl_seconds", DEFAULT_TTL_SECONDS), "reasoning.ttl_seconds")
    given = mapping(raw.get("redis"), "reasoning.redis")
    no_unknown(given, ("url", "prefix", "timeout_seconds"), "reasoning.redis")
    url = given.get("url", DEFAULT_REDIS_URL)
    if not isinstance(url, str) or _scheme(url) not in ("redis", "rediss", "unix"):
        raise ReasoningConfigError(
            "reasoning.redis.url: must be a redis://, rediss:// or unix:// URL"
        )
    prefix = given.get("prefix", DEFAULT_PREFIX)
    if not isinstance(prefix, str):
        raise ReasoningConfigError(f"reasoning.redis.prefix: must be a string, got {prefix!r}")
    timeout = seconds(
        given.get("timeout_seconds", DEFAULT_REDIS_TIMEOUT), "reasoning.redis.timeout_seconds"
    )
    return ReasoningConfig(str(store), max_bytes, ttl, RedisConfig(url, prefix, timeout))


def _scheme(url: str) -> str:
    try:
        return URL(url).scheme
    except ValueError:
        return ""
