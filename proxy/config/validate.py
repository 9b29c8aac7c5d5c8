"""The configuration's validators, shared by every section (``proxy/config/__init__.py`` and the
stash's ``reasoning:`` section, ``proxy/config/reasoning.py``): each checks one value and raises
``ConfigError`` with a message that starts with the value's dotted key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ConfigError(Exception):
    """A configuration value is missing, unknown or invalid; the message names the dotted key."""


def no_unknown(data: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in known:
            dotted = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"{dotted}: unknown key; expected one of: {', '.join(known)}")


def mapping(value: Any, key: str) -> Mapping[str, Any]:
    """A mapping (``None``: an empty one)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{key}: must be a mapping, got {type(value).__name__}")
    return value


def boolean(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: must be true or false, got {value!r}")
    return value


def positive_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{key}: must be a positive integer, got {value!r}")
    return value


def seconds(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{key}: must be a positive number of seconds, got {value!r}")
    return float(value)
