"""Configuration: embedded defaults < env < YAML < CLI flags, into frozen dataclasses.

Every validation error is a ``ConfigError`` whose message starts with the dotted key at fault.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from yarl import URL

from rules import RULES_BY_NAME
from rules.planner import Planner
from rules.profiles import DEFAULT_PROFILE, PROFILES
from rules.responses import RESPONSES_RULES_BY_NAME

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_UPSTREAM = "https://api.deepseek.com"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
DEFAULT_CLIENT_BODY_TIMEOUT = 60.0
ENV_UPSTREAM = "CHATMEND_UPSTREAM"
ENV_CONFIG = "CHATMEND_CONFIG"
#: The host of a direct OpenAI route: there ``context_management`` may reach eligible models.
OPENAI_HOST = "api.openai.com"

#: Every rule an operator may set, chat and Responses (their names never collide).
KNOWN_RULES = {**RULES_BY_NAME, **RESPONSES_RULES_BY_NAME}


class ConfigError(Exception):
    """A configuration value is missing, unknown or invalid; the message names the dotted key."""


@dataclass(frozen=True, slots=True)
class ListenConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    url: str = DEFAULT_UPSTREAM
    #: Seconds to establish the TCP/TLS connection to the upstream.
    connect_timeout: float = 10.0
    #: Seconds the upstream may stay silent between two reads (a stream's idle timeout).
    #: There is deliberately no total timeout: a long stream may run for many minutes.
    read_timeout: float = 300.0


@dataclass(frozen=True, slots=True)
class RuleSetting:
    """An operator's setting for one rule, over the profile's: ``enabled`` ``None`` leaves the
    switch to the profile; ``options`` holds only the options the operator gave."""

    enabled: bool | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: ``report``: the rule's changes are logged and counted, not applied; ``None``: as ``mode``.
    mode: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    listen: ListenConfig = field(default_factory=ListenConfig)
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: Seconds a client has to send its whole request body once the headers are in (slow
    #: clients and slow-loris bodies get a 408 rather than holding a connection forever).
    client_body_timeout: float = DEFAULT_CLIENT_BODY_TIMEOUT
    #: Opt-in: allow message-derived text (e.g. unrepairable arguments) into the logs.
    log_content: bool = False
    #: The profile of requests whose model matches no ``models`` pattern.
    profile: str = DEFAULT_PROFILE
    #: (model glob, profile name), first match wins; matched case-insensitively.
    models: tuple[tuple[str, str], ...] = ()
    #: The operator's rule settings, over every profile's (only the rules named in the file).
    rules: Mapping[str, RuleSetting] = field(default_factory=dict)
    #: ``enforce`` applies the rewrites; ``report`` only logs them and forwards the original.
    mode: str = "enforce"

    def report_rules(self) -> frozenset[str]:
        """The rules in report mode: every rule in global report mode, except those set to
        ``enforce``; else those set to ``report``."""
        if self.mode == "report":
            enforced = {n for n, s in self.rules.items() if s.mode == "enforce"}
            return frozenset(KNOWN_RULES) - enforced
        return frozenset(n for n, s in self.rules.items() if s.mode == "report")

    def rule_settings(self) -> dict[str, dict[str, Any]]:
        """The operator's rule overrides, in the shape ``rules.planner`` takes."""
        settings: dict[str, dict[str, Any]] = {}
        for name, setting in self.rules.items():
            settings[name] = dict(setting.options)
            if setting.enabled is not None:
                settings[name]["enabled"] = setting.enabled
        return settings

    def planner(self) -> Planner:
        """Every profile compiled with the operator's overrides; picks a plan per model."""
        return Planner(
            self.profile,
            self.models,
            self.rule_settings(),
            log_content=self.log_content,
            report=self.report_rules(),
            direct_openai=URL(self.upstream.url).host == OPENAI_HOST,
        )


_TOP_KEYS = (
    "listen",
    "upstream",
    "max_body_bytes",
    "client_body_timeout",
    "log_content",
    "profile",
    "models",
    "rules",
    "mode",
)
MODES = ("enforce", "report")


def load_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    upstream: str | None = None,
    host: str | None = None,
    port: int | None = None,
    profile: str | None = None,
) -> Config:
    """Build the effective config. ``path`` falls back to ``$CHATMEND_CONFIG``."""
    env = os.environ if env is None else env
    path = path or env.get(ENV_CONFIG) or None
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_yaml(Path(path))
    # env sits under the YAML: it only fills what the file leaves unset.
    env_upstream = env.get(ENV_UPSTREAM)
    config = parse_config(data, default_upstream=env_upstream or DEFAULT_UPSTREAM)
    # flags sit over everything.
    if upstream is not None:
        config = replace(
            config, upstream=replace(config.upstream, url=_url(upstream, "--upstream"))
        )
    if host is not None:
        config = replace(config, listen=replace(config.listen, host=_host(host, "--host")))
    if port is not None:
        config = replace(config, listen=replace(config.listen, port=_port(port, "--port")))
    if profile is not None:
        config = replace(config, profile=_profile(profile, "--profile"))
    return config


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path}: invalid YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping")
    return data


def parse_config(data: Mapping[str, Any], *, default_upstream: str = DEFAULT_UPSTREAM) -> Config:
    """Validate a YAML-shaped mapping into a ``Config``."""
    _no_unknown(data, _TOP_KEYS, "")
    listen = _mapping(data.get("listen", {}), "listen")
    _no_unknown(listen, ("host", "port"), "listen")
    up = _mapping(data.get("upstream", {}), "upstream")
    _no_unknown(up, ("url", "connect_timeout", "read_timeout"), "upstream")
    return Config(
        listen=ListenConfig(
            host=_host(listen.get("host", DEFAULT_HOST), "listen.host"),
            port=_port(listen.get("port", DEFAULT_PORT), "listen.port"),
        ),
        upstream=UpstreamConfig(
            url=_url(up.get("url", default_upstream), "upstream.url"),
            connect_timeout=_seconds(up.get("connect_timeout", 10.0), "upstream.connect_timeout"),
            read_timeout=_seconds(up.get("read_timeout", 300.0), "upstream.read_timeout"),
        ),
        max_body_bytes=_positive_int(
            data.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES), "max_body_bytes"
        ),
        client_body_timeout=_seconds(
            data.get("client_body_timeout", DEFAULT_CLIENT_BODY_TIMEOUT), "client_body_timeout"
        ),
        log_content=_bool(data.get("log_content", False), "log_content"),
        profile=_profile(data.get("profile", DEFAULT_PROFILE), "profile"),
        models=_models(_mapping(data.get("models", {}), "models")),
        rules=_rule_settings(_mapping(data.get("rules", {}), "rules")),
        mode=_mode(data.get("mode", "enforce"), "mode"),
    )


def _mode(value: Any, key: str) -> str:
    if value not in MODES:
        raise ConfigError(f"{key}: must be enforce or report, got {value!r}")
    return str(value)


def _profile(value: Any, key: str) -> str:
    if value not in PROFILES:
        raise ConfigError(
            f"{key}: unknown profile {value!r}; known profiles: {', '.join(PROFILES)}"
        )
    return str(value)


def _models(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    models: list[tuple[str, str]] = []
    for pattern, profile in raw.items():
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(
                f"models: a model pattern must be a non-empty string, got {pattern!r}"
            )
        models.append((pattern, _profile(profile, f"models.{pattern}")))
    return tuple(models)


def _rule_settings(raw: Mapping[str, Any]) -> dict[str, RuleSetting]:
    """The operator's settings, validated: ``true``/``false``, or a mapping with ``enabled``
    (optional: the profile decides) and declared options. ``null`` means "as the profile"."""
    settings: dict[str, RuleSetting] = {}
    for name, value in raw.items():
        if name not in KNOWN_RULES:
            known = ", ".join(KNOWN_RULES)
            raise ConfigError(f"rules.{name}: unknown rule; known rules: {known}")
        key = f"rules.{name}"
        if value is None:
            continue
        if isinstance(value, bool):
            settings[name] = RuleSetting(enabled=value)
            continue
        given = _mapping(value, key)
        declared = {o.name for o in KNOWN_RULES[name].options}
        _no_unknown(given, ("enabled", "mode", *sorted(declared)), key)
        enabled = _bool(given["enabled"], f"{key}.enabled") if "enabled" in given else None
        mode = _mode(given["mode"], f"{key}.mode") if "mode" in given else None
        options = {k: v for k, v in given.items() if k not in ("enabled", "mode")}
        settings[name] = RuleSetting(
            enabled=enabled, options=_rule_options(name, options), mode=mode
        )
    return settings


def _rule_options(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the given options (the others come from the profile, then the rule)."""
    for option in KNOWN_RULES[name].options:
        if option.name in given:
            error = option.validate(given[option.name])
            if error:
                raise ConfigError(f"rules.{name}.{option.name}: {error}")
    return dict(given)


def _no_unknown(data: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in known:
            dotted = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"{dotted}: unknown key; expected one of: {', '.join(known)}")


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{key}: must be a mapping, got {type(value).__name__}")
    return value


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: must be true or false, got {value!r}")
    return value


def _positive_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{key}: must be a positive integer, got {value!r}")
    return value


def _seconds(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{key}: must be a positive number of seconds, got {value!r}")
    return float(value)


def _port(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"{key}: must be a port number 0-65535, got {value!r}")
    return value


def _host(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: must be a non-empty host name or address, got {value!r}")
    return value.strip()


def _url(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key}: must be an http(s) URL, got {value!r}")
    try:
        url = URL(value.strip())
    except ValueError:
        raise ConfigError(f"{key}: not a valid URL: {value!r}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"{key}: must be an absolute http:// or https:// URL, got {value!r}")
    if url.user or url.password:
        raise ConfigError(f"{key}: must not carry credentials; clients send their own key")
    if url.query_string or url.fragment:
        raise ConfigError(f"{key}: must not carry a query or fragment, got {value!r}")
    return str(url).rstrip("/")
