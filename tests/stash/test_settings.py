"""The ``reasoning:`` config section: defaults, validation messages that name the dotted key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.config import ConfigError, parse_config
from proxy.config.reasoning import DEFAULT_MAX_BYTES, DEFAULT_PREFIX
from proxy.stash import MemoryStore, RedisStore, build_stash


def test_defaults_are_a_bounded_memory_store() -> None:
    config = parse_config({})
    assert config.reasoning.store == "memory"
    assert config.reasoning.max_bytes == DEFAULT_MAX_BYTES
    assert config.reasoning.ttl_seconds == 24 * 3600
    stash = build_stash(config.reasoning)
    assert stash is not None and isinstance(stash.store, MemoryStore)


def test_redis_and_off() -> None:
    config = parse_config(
        {"reasoning": {"store": "redis", "redis": {"url": "redis://cache:6379/2"}}}
    )
    assert config.reasoning.redis.prefix == DEFAULT_PREFIX
    stash = build_stash(config.reasoning)
    assert stash is not None and isinstance(stash.store, RedisStore)
    assert build_stash(parse_config({"reasoning": {"store": "off"}}).reasoning) is None


def test_store_off_unquoted_in_yaml_means_off() -> None:
    """docs/reasoning.md writes `reasoning: {store: off}`; YAML reads that `off` as false."""
    data = yaml.safe_load("reasoning: {store: off}")
    assert data == {"reasoning": {"store": False}}
    assert parse_config(data).reasoning.store == "off"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"store": "disk"}, "reasoning.store: must be one of memory, redis, off"),
        ({"max_bytes": 0}, "reasoning.max_bytes: must be a positive integer"),
        ({"ttl_seconds": "1d"}, "reasoning.ttl_seconds: must be a positive number"),
        ({"size": 1}, "reasoning.size: unknown key"),
        ({"redis": {"url": "http://x"}}, "reasoning.redis.url: must be a redis://"),
        ({"redis": {"host": "x"}}, "reasoning.redis.host: unknown key"),
        ({"redis": {"timeout_seconds": 0}}, "reasoning.redis.timeout_seconds: must be"),
        ({"redis": {"prefix": 3}}, "reasoning.redis.prefix: must be a string"),
        ("memory", "reasoning: must be a mapping"),
    ],
)
def test_errors_name_the_dotted_key(section: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"reasoning": section})
    assert str(caught.value).startswith(message)


def test_a_bad_redis_url_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"reasoning": {"redis": {"url": "http://:hunter2@x"}}})
    assert "hunter2" not in str(caught.value)


def test_the_example_config_documents_the_section_with_its_defaults() -> None:
    text = (Path(__file__).resolve().parents[2] / "config.example.yaml").read_text()
    section = yaml.safe_load(text)["reasoning"]
    assert parse_config({"reasoning": section}).reasoning == parse_config({}).reasoning
    assert "--workers N each worker has its own memory store: use redis" in text
    assert "CHATMEND_REDIS_PASSWORD" in text
