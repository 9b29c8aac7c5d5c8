"""Configuration: embedded defaults < YAML < env < CLI flags, into frozen dataclasses.

The container convention: a flag beats the environment, which beats the file, which beats the
embedded defaults; ``Config.sources`` says which one set each top-level value (logged in
``proxy_started``). Every validation error is a ``ConfigError`` whose message starts with the
dotted key at fault.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml
from yarl import URL

from proxy.config.reasoning import ReasoningConfig, parse_reasoning
from proxy.config.renamed import renamed
from proxy.config.validate import ConfigError
from proxy.config.validate import boolean as _bool
from proxy.config.validate import mapping as _mapping
from proxy.config.validate import no_unknown as _no_unknown
from proxy.config.validate import positive_int as _positive_int
from proxy.config.validate import seconds as _seconds
from rules.chat import RULES_BY_NAME
from rules.engine.base import Rule
from rules.messages import MESSAGES_RULES_BY_NAME
from rules.providers.planner import Planner
from rules.providers.profiles import DEFAULT_PROFILE, HOST_PROFILES, PROFILES
from rules.replies import REPLY_RULES_BY_NAME
from rules.replies.base import ReplyRule
from rules.responses import RESPONSES_RULES_BY_NAME

#: ``ConfigError`` lives in proxy/config/validate.py (the stash settings raise it too); it is
#: re-exported here, where callers have always found it.
__all__ = ["Config", "ConfigError", "RouteConfig", "load_config", "parse_config"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_UPSTREAM = "https://api.deepseek.com"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
DEFAULT_CLIENT_BODY_TIMEOUT = 60.0
#: Bodies over this many bytes (decoded) are repaired in a worker process, off the event loop.
DEFAULT_OFFLOAD_BODY_BYTES = 1024 * 1024
DEFAULT_OFFLOAD_PROCESSES = 2
#: Seconds a request's repair may take; past it the body goes upstream as it came.
DEFAULT_SANITIZE_DEADLINE = 10.0
#: Request body bytes (as read and decoded) all requests in flight may hold together:
#: past it a new body over ``offload_body_bytes`` gets a 503 with ``Retry-After``.
DEFAULT_INFLIGHT_BODY_BYTES = 256 * 1024 * 1024
#: Under Kubernetes' default terminationGracePeriodSeconds (30), so a drain ends before SIGKILL.
DEFAULT_DRAIN_SECONDS = 25.0
ENV_UPSTREAM = "CHATMEND_UPSTREAM"
ENV_CONFIG = "CHATMEND_CONFIG"
#: The host of a direct OpenAI route: there ``context_management`` may reach eligible models.
OPENAI_HOST = "api.openai.com"

#: Every rule an operator may set, chat, Responses and Messages, and the reply rules (their
#: names never collide).
KNOWN_RULES: dict[str, Rule | ReplyRule] = {
    **RULES_BY_NAME,
    **RESPONSES_RULES_BY_NAME,
    **MESSAGES_RULES_BY_NAME,
    **REPLY_RULES_BY_NAME,
}


@dataclass(frozen=True, slots=True)
class ListenConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT


@dataclass(frozen=True, slots=True)
class Secret:
    """A credential read from an environment variable: its repr shows the variable, never the
    value, so a logged or printed config cannot leak it."""

    env: str
    value: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Secret(env={self.env!r})"


#: How chatmend sends a route's own upstream key: OpenAI-style ``Authorization: Bearer`` or
#: Azure's ``api-key`` header.
API_KEY_HEADERS = ("authorization", "api-key", "x-api-key")


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    url: str = DEFAULT_UPSTREAM
    #: Seconds to establish the TCP/TLS connection to the upstream.
    connect_timeout: float = 10.0
    #: Seconds the upstream may stay silent between two reads (a stream's idle timeout).
    #: There is deliberately no total timeout: a long stream may run for many minutes.
    read_timeout: float = 300.0
    #: The upstream key chatmend sends itself (from ``api_key_env``); ``None``: the client's
    #: ``Authorization`` passes through.
    api_key: Secret | None = None
    api_key_header: str = "authorization"


@dataclass(frozen=True, slots=True)
class RuleSetting:
    """An operator's setting for one rule, over the profile's: ``enabled`` ``None`` leaves the
    switch to the profile; ``options`` holds only the options the operator gave."""

    enabled: bool | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: ``report``: the rule's changes are logged and counted, not applied; ``None``: as ``mode``.
    mode: str | None = None


@dataclass(frozen=True, slots=True)
class RecoverConfig:
    """Recovery (proxy/recovery/retry.py, on by default): a 400 or 422 whose error text is a known
    class a rule repairs (or that names a message, escalated) is repaired and retried, at most
    ``max_attempts`` (0 or 1) times per request."""

    enabled: bool = True
    max_attempts: int = 1
    #: How long a repair that recovered a refusal is applied before sending to the same
    #: client, route, upstream and model (proxy/recovery/learned.py); 0: nothing is learned.
    learn_ttl: float = 3600.0
    #: The rules whose ``lossy`` changes (they drop something the client sent) a retry may
    #: make, for what the refusal names (``*``: every rule); empty, the default: none.
    lossy: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        return self.enabled and self.max_attempts > 0


@dataclass(frozen=True, slots=True)
class RouteConfig:
    """One upstream and how its requests are repaired: the default route (the top-level keys,
    for every path no route prefix matches) or a named one under ``routes:``."""

    name: str = "default"
    #: The path prefix chatmend strips before forwarding (``/kimi``); ``""`` for the default.
    prefix: str = ""
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    #: The profile of requests whose model matches no ``models`` pattern.
    profile: str = DEFAULT_PROFILE
    #: Why ``profile`` (set by the operator, or implied by the upstream's host).
    profile_reason: str = field(default="default", compare=False)
    #: (model glob, profile name), first match wins; matched case-insensitively.
    models: tuple[tuple[str, str], ...] = ()
    #: The operator's rule settings, over every profile's (only the rules named in the file).
    rules: Mapping[str, RuleSetting] = field(default_factory=dict)
    #: ``enforce`` applies the rewrites; ``report`` only logs them and forwards the original.
    mode: str = "enforce"
    #: Bearer tokens a client must present on this route (required when chatmend holds the
    #: upstream key); empty: no check.
    client_tokens: tuple[Secret, ...] = ()
    log_content: bool = False
    #: Check every rewritten body against the profile's contract at run time.
    verify: bool = False
    #: Repair and retry a refused request once (on by default; ``recover: {enabled: false}``).
    recover: RecoverConfig = field(default_factory=RecoverConfig)

    def report_rules(self) -> frozenset[str]:
        """The rules in report mode: every rule in global report mode, except those set to
        ``enforce``; else those set to ``report``."""
        if self.mode == "report":
            enforced = {n for n, s in self.rules.items() if s.mode == "enforce"}
            return frozenset(KNOWN_RULES) - enforced
        return frozenset(n for n, s in self.rules.items() if s.mode == "report")

    def rule_settings(self) -> dict[str, dict[str, Any]]:
        """The operator's rule overrides, in the shape ``rules.providers.planner`` takes."""
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
            verify=self.verify,
        )


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """``capture:``: keep the bodies of rewritten, recovered and refused requests in memory
    (proxy/observe/capture.py)."""

    enabled: bool = False
    max_requests: int = 50
    max_bytes: int = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PrefixConfig:
    """``prefix_cache:``: verified-prefix reuse (on by default; proxy/relay/prefix.py)."""

    enabled: bool = True
    #: Bytes the cache may charge in all: what its entries hold.
    max_bytes: int = 128 * 1024 * 1024
    #: Seconds an entry lives without being used.
    ttl: float = 600.0
    #: Repairs that resume (rules/engine/resume.py): a session's next request runs the rules
    #: over its new turn only, from what the previous request's rules decided. On by default:
    #: a stuck session (issue 39's split turn) runs 5 times faster, one broken every fourth
    #: turn 1.4 times; a clean one pays its record, a few µs a request
    #: (docs/performance.md#resume).
    resume: bool = True
    #: Under ``--workers N``: a session's requests are served by the worker holding its prefix
    #: (proxy/relay/owners.py), relayed there by the worker their connection landed on. Off by
    #: default: without it a session scattered over the workers still hits each one's cache
    #: (from the last request that worker saw), and the hop costs more than that saves on two
    #: workers; with it each session is held once (docs/performance.md#workers).
    route_sessions: bool = False


@dataclass(frozen=True, slots=True)
class UiConfig:
    """``ui:``: the page at ``/chatmend/``: off by default; loopback clients only unless
    ``admin_token_env`` names a variable holding a token (then ``Authorization: Bearer`` it,
    from anywhere). Only to a request whose ``Host`` names the address it reached, or one of
    ``allowed_hosts`` (a DNS-rebinding page in the operator's browser names its own host)."""

    enabled: bool = False
    admin_token: Secret | None = None
    #: ``(name, port)``: names the page (and ``/metrics``, ``/readyz``) also answers to, as
    #: ``split_host`` reads them; a ``None`` port matches any port, or none.
    allowed_hosts: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True, slots=True)
class Config:
    listen: ListenConfig = field(default_factory=ListenConfig)
    #: The default route: the top-level keys (``upstream``, ``profile``, ``models``, ``rules``,
    #: ``mode``, ``client_tokens_env``, ``log_content``, ``verify``, ``recover``), for every
    #: path no named route's prefix matches. Named routes inherit from it.
    default: RouteConfig = field(default_factory=RouteConfig)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: Seconds a client has to send its whole request body once the headers are in (slow
    #: clients and slow-loris bodies get a 408 rather than holding a connection forever).
    client_body_timeout: float = DEFAULT_CLIENT_BODY_TIMEOUT
    #: Bodies over this many bytes (decoded) are parsed and repaired in a worker process
    #: (``offload_processes`` of them per instance; 0: every body inline, on the event loop).
    offload_body_bytes: int = DEFAULT_OFFLOAD_BODY_BYTES
    offload_processes: int = DEFAULT_OFFLOAD_PROCESSES
    #: Seconds a request's repair may take (stash lookup included); past it the body goes
    #: upstream as it came (fail-open), counted and logged as ``limit_exceeded``.
    sanitize_deadline: float = DEFAULT_SANITIZE_DEADLINE
    #: Bytes of request bodies (as read, and decoded) the requests in flight may hold together;
    #: past it a new body bigger than ``offload_body_bytes`` gets a 503 with ``Retry-After``.
    inflight_body_bytes: int = DEFAULT_INFLIGHT_BODY_BYTES
    #: The named routes, by path prefix; every other path takes the default route.
    routes: tuple[RouteConfig, ...] = ()
    #: Seconds a SIGTERM leaves in-flight requests (streams included) to finish before exit.
    drain_seconds: float = DEFAULT_DRAIN_SECONDS
    #: The reasoning stash (proxy/stash): which store, how big, how long (all routes).
    reasoning: ReasoningConfig = field(default_factory=ReasoningConfig)
    #: The page at ``/chatmend/`` (proxy/server/page.py) and the bodies it may show
    #: (proxy/observe/capture.py); both off by default, read at start (a reload does not change
    #: them).
    ui: UiConfig = field(default_factory=UiConfig)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    #: Verified-prefix reuse (proxy/relay/prefix.py): a request that re-sends the last one of its
    #: session plus a turn is parsed and walked for that turn only.
    prefix_cache: PrefixConfig = field(default_factory=PrefixConfig)
    #: Which source set each top-level value (and each value a flag or the environment set):
    #: ``default``, ``file``, ``env CHATMEND_UPSTREAM``, ``flag --port``, ...
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: What the operator should change, though it works: a renamed rule set under its old name
    #: (proxy/config/renamed.py). ``load_config`` prints them.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def all_routes(self) -> tuple[RouteConfig, ...]:
        """The named routes, then the default one."""
        return (*self.routes, self.default)

    def rule_settings(self) -> dict[str, dict[str, Any]]:
        return self.default.rule_settings()

    def planner(self) -> Planner:
        """The default route's planner (what ``chatmend check`` uses)."""
        return self.default.planner()


_TOP_KEYS = (
    "listen",
    "upstream",
    "max_body_bytes",
    "client_body_timeout",
    "offload_body_bytes",
    "offload_processes",
    "sanitize_deadline",
    "inflight_body_bytes",
    "log_content",
    "verify",
    "profile",
    "models",
    "rules",
    "mode",
    "client_tokens_env",
    "routes",
    "drain_seconds",
    "reasoning",
    "recover",
    "ui",
    "capture",
    "prefix_cache",
)
_UPSTREAM_KEYS = ("url", "connect_timeout", "read_timeout", "api_key_env", "api_key_header")
#: What a named route may set; the others come from the top level.
_ROUTE_KEYS = (
    "prefix",
    "upstream",
    "profile",
    "models",
    "rules",
    "mode",
    "client_tokens_env",
    "recover",
)
#: Paths chatmend answers itself: no route prefix may shadow them.
RESERVED_PATHS = ("/healthz", "/readyz", "/metrics")
_ROUTE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PREFIX = re.compile(r"(?:/[A-Za-z0-9._~-]+)+")
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
    """Build the effective config: flags > environment > file > embedded defaults. ``path``
    falls back to ``$CHATMEND_CONFIG``."""
    env = os.environ if env is None else env
    path = path or env.get(ENV_CONFIG) or None
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_yaml(Path(path))
    warn_unknown_env(env, data)
    sources = {key: "file" if key in data else "default" for key in _TOP_KEYS}
    # Each layer is validated under its own name, then set into the data the file gave.
    overrides: list[tuple[str, str, Any]] = []
    env_upstream = env.get(ENV_UPSTREAM, "").strip()
    if env_upstream:
        overrides.append(("upstream.url", f"env {ENV_UPSTREAM}", _url(env_upstream, ENV_UPSTREAM)))
    if upstream is not None:
        overrides.append(("upstream.url", "flag --upstream", _url(upstream, "--upstream")))
    if host is not None:
        overrides.append(("listen.host", "flag --host", _host(host, "--host")))
    if port is not None:
        overrides.append(("listen.port", "flag --port", _port(port, "--port")))
    if profile is not None:
        overrides.append(("profile", "flag --profile", _profile(profile, "--profile")))
    for dotted, source, value in overrides:
        data = _set(data, dotted, value)
        sources[dotted] = source
    config = parse_config(data, env=env, sources=sources)
    for line in config.warnings:
        print(f"chatmend: warning: {line}", file=sys.stderr)
    return config


#: The ``CHATMEND_*`` variables chatmend reads (the others are likely typos: warned about).
KNOWN_ENV = (ENV_UPSTREAM, ENV_CONFIG, "CHATMEND_REDIS_PASSWORD", "CHATMEND_CLAUDE_BIN")


def _named_env(data: Any) -> set[str]:
    """The variables the config names (``api_key_env``, ``client_tokens_env``, ...)."""
    if isinstance(data, dict):
        named: set[str] = set()
        for key, value in data.items():
            if str(key).endswith("_env"):
                values = value if isinstance(value, list) else [value]
                named |= {v for v in values if isinstance(v, str)}
            named |= _named_env(value)
        return named
    return set()


def unknown_env(env: Mapping[str, str], data: Mapping[str, Any] | None = None) -> list[str]:
    """One line per ``CHATMEND_*`` variable neither chatmend nor the config reads, with the
    close match."""
    known = set(KNOWN_ENV) | _named_env(data or {})
    lines = []
    for name in sorted(n for n in env if n.startswith("CHATMEND_") and n not in known):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        lines.append(
            f"{name} is not a chatmend variable{hint} (chatmend reads {ENV_UPSTREAM} and "
            f"{ENV_CONFIG}; the rest "
            "is set in the config file or by flags: --port, --profile, ...)"
        )
    return lines


def warn_unknown_env(env: Mapping[str, str], data: Mapping[str, Any]) -> None:
    for line in unknown_env(env, data):
        print(f"chatmend: warning: {line}", file=sys.stderr)


def _set(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """``data`` with ``dotted`` (``key`` or ``section.key``) set to ``value``; a section the
    file gave as something else than a mapping is left for ``parse_config`` to report."""
    key, _, sub = dotted.partition(".")
    if not sub:
        return {**data, key: value}
    section = data.get(key)
    if section is None:
        section = {}
    if not isinstance(section, dict):
        return data
    return {**data, key: {**section, sub: value}}


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
        raise ConfigError(f"config file {path}: invalid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping")
    return data


def parse_config(
    data: Mapping[str, Any],
    *,
    default_upstream: str = DEFAULT_UPSTREAM,
    env: Mapping[str, str] | None = None,
    sources: Mapping[str, str] | None = None,
) -> Config:
    """Validate a YAML-shaped mapping into a ``Config``. ``env`` holds the variables that
    ``api_key_env`` and ``client_tokens_env`` name (default: the process environment);
    ``sources`` says where each value came from (``load_config``'s layers; default: the file).

    Without a ``profile``, the profile follows the upstream's host (``proxy.config.hosts``),
    route by route."""
    env = os.environ if env is None else env
    sources = dict(sources or {key: "file" if key in data else "default" for key in _TOP_KEYS})
    data, warnings = renamed(data)
    _no_unknown(data, _TOP_KEYS, "")
    given_upstream = _mapping(data.get("upstream", {}), "upstream")
    upstream = _upstream(given_upstream, "upstream", env, UpstreamConfig(default_upstream))
    client_tokens = _tokens(data.get("client_tokens_env"), "client_tokens_env", env)
    _needs_tokens(upstream, client_tokens, "client_tokens_env")
    if "profile" in data:
        profile = _profile(data["profile"], "profile")
        reason = f"profile set by {sources.get('profile', 'file')}"
    else:
        profile, reason = profile_for_upstream(upstream.url)
        sources["profile"] = "upstream host"
    default = RouteConfig(
        upstream=upstream,
        profile=profile,
        profile_reason=reason,
        models=_models(_mapping(data.get("models", {}), "models")),
        rules=_rule_settings(_mapping(data.get("rules", {}), "rules")),
        mode=_mode(data.get("mode", "enforce"), "mode"),
        client_tokens=client_tokens,
        log_content=_bool(data.get("log_content", False), "log_content"),
        verify=_bool(data.get("verify", False), "verify"),
        recover=_recover(data.get("recover"), "recover", RecoverConfig()),
    )
    config = Config(
        listen=_listen(data.get("listen", {})),
        default=default,
        **_limits(data),
        reasoning=_reasoning(data.get("reasoning")),
        ui=_ui(data.get("ui"), env),
        capture=_capture(data.get("capture")),
        prefix_cache=_prefix_cache(data.get("prefix_cache")),
        sources=sources,
        warnings=warnings,
    )
    routes = _routes(
        _mapping(data.get("routes", {}), "routes"),
        config.default,
        env,
        inherit_profile="profile" in data,
    )
    _not_under_the_page(routes, config.ui)
    return replace(config, routes=routes)


def _not_under_the_page(routes: tuple[RouteConfig, ...], ui: UiConfig) -> None:
    """With the page on, every path under ``/chatmend`` is its own
    (``proxy.server.page.claims``)."""
    for route in routes:
        if ui.enabled and route.prefix.split("/", 2)[1].lower() == "chatmend":
            raise ConfigError(
                f"routes.{route.name}.prefix: {route.prefix} is under the page's /chatmend/, "
                "which is the page's own while ui.enabled is true: give the route another prefix"
            )


def _listen(value: Any) -> ListenConfig:
    listen = _mapping(value, "listen")
    _no_unknown(listen, ("host", "port"), "listen")
    return ListenConfig(
        host=_host(listen.get("host", DEFAULT_HOST), "listen.host"),
        port=_port(listen.get("port", DEFAULT_PORT), "listen.port"),
    )


def _limits(data: Mapping[str, Any]) -> dict[str, Any]:
    """The server-wide limits, each validated under its own key, in this order."""
    limits: tuple[tuple[str, Any, Callable[[Any, str], Any]], ...] = (
        ("max_body_bytes", DEFAULT_MAX_BODY_BYTES, _positive_int),
        ("client_body_timeout", DEFAULT_CLIENT_BODY_TIMEOUT, _seconds),
        ("offload_body_bytes", DEFAULT_OFFLOAD_BODY_BYTES, _positive_int),
        ("offload_processes", DEFAULT_OFFLOAD_PROCESSES, _count),
        ("sanitize_deadline", DEFAULT_SANITIZE_DEADLINE, _seconds),
        ("inflight_body_bytes", DEFAULT_INFLIGHT_BODY_BYTES, _positive_int),
        ("drain_seconds", DEFAULT_DRAIN_SECONDS, _seconds),
    )
    return {key: check(data.get(key, default), key) for key, default, check in limits}


def _upstream(
    up: Mapping[str, Any], key: str, env: Mapping[str, str], base: UpstreamConfig
) -> UpstreamConfig:
    """An ``upstream`` mapping over ``base`` (a route's timeouts default to the top level's)."""
    _no_unknown(up, _UPSTREAM_KEYS, key)
    header = up.get("api_key_header", "authorization")
    if not isinstance(header, str) or header.lower() not in API_KEY_HEADERS:
        raise ConfigError(
            f"{key}.api_key_header: must be one of {', '.join(API_KEY_HEADERS)}, got {header!r}"
        )
    key_env = up.get("api_key_env")
    return UpstreamConfig(
        url=_url(up.get("url", base.url), f"{key}.url"),
        connect_timeout=_seconds(
            up.get("connect_timeout", base.connect_timeout), f"{key}.connect_timeout"
        ),
        read_timeout=_seconds(up.get("read_timeout", base.read_timeout), f"{key}.read_timeout"),
        api_key=None if key_env is None else _secret(key_env, f"{key}.api_key_env", env),
        api_key_header=header.lower(),
    )


def _secret(name: Any, key: str, env: Mapping[str, str]) -> Secret:
    """The value of the environment variable ``name`` (the YAML holds the name, never the key)."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{key}: must name an environment variable, got {name!r}")
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"{key}: environment variable {name} is not set or empty")
    return Secret(name, value)


def _tokens(name: Any, key: str, env: Mapping[str, str]) -> tuple[Secret, ...]:
    """The comma-separated bearer tokens in the variable ``name`` (several, to rotate them)."""
    if name is None:
        return ()
    joined = _secret(name, key, env)
    tokens = [token.strip() for token in joined.value.split(",") if token.strip()]
    if any(len(token) < 16 for token in tokens):
        raise ConfigError(f"{key}: every token in {joined.env} must be at least 16 characters")
    return tuple(Secret(joined.env, token) for token in tokens)


def _needs_tokens(upstream: UpstreamConfig, tokens: tuple[Secret, ...], key: str) -> None:
    if upstream.api_key is not None and not tokens:
        raise ConfigError(
            f"{key}: required when upstream.api_key_env is set (chatmend then holds the "
            "upstream key, and must not lend it to anyone who can reach it)"
        )


def _route_prefix(prefix: Any, name: str, key: str) -> str:
    """A route's path prefix, without its trailing slash: a path of safe segments that does
    not shadow chatmend's own paths."""
    if (
        not isinstance(prefix, str)
        or not _PREFIX.fullmatch(prefix.rstrip("/") or "/")
        or any(segment in (".", "..") for segment in prefix.split("/"))
    ):
        raise ConfigError(
            f"{key}.prefix: must be a path such as /{name} (letters, digits, '.', '_', '~', "
            f"'-' between slashes), got {prefix!r}"
        )
    stripped: str = prefix.rstrip("/")
    if any(p == stripped or p.startswith(stripped + "/") for p in RESERVED_PATHS):
        raise ConfigError(f"{key}.prefix: {stripped} would shadow chatmend's own {stripped} path")
    return stripped


def _routes(
    raw: Mapping[str, Any], top: RouteConfig, env: Mapping[str, str], *, inherit_profile: bool
) -> tuple[RouteConfig, ...]:
    """The named routes, longest prefix first. Each inherits the top level's models, mode and
    upstream timeouts; its ``rules`` apply over the top level's, rule by rule. Its profile: its
    own, else the top level's if the operator set one, else its upstream host's."""
    routes: list[RouteConfig] = []
    prefixes: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not _ROUTE_NAME.fullmatch(name) or name == "default":
            raise ConfigError(
                f"routes: a route name must be letters, digits, '-' or '_' (and not 'default'), "
                f"got {name!r}"
            )
        key = f"routes.{name}"
        given = _mapping(value, key)
        _no_unknown(given, _ROUTE_KEYS, key)
        prefix = _route_prefix(given.get("prefix", f"/{name}"), name, key)
        if prefix in prefixes:
            raise ConfigError(f"{key}.prefix: {prefix} is already routes.{prefixes[prefix]}'s")
        prefixes[prefix] = name
        if "upstream" not in given or "url" not in _mapping(given["upstream"], f"{key}.upstream"):
            raise ConfigError(f"{key}.upstream.url: required for a route")
        base = replace(top.upstream, api_key=None)
        upstream = _upstream(
            _mapping(given["upstream"], f"{key}.upstream"), f"{key}.upstream", env, base
        )
        tokens = _tokens(given.get("client_tokens_env"), f"{key}.client_tokens_env", env)
        _needs_tokens(upstream, tokens, f"{key}.client_tokens_env")
        own_rules = _rule_settings(_mapping(given.get("rules", {}), f"{key}.rules"), f"{key}.rules")
        if "profile" in given:
            profile, reason = _profile(given["profile"], f"{key}.profile"), f"{key}.profile"
        elif inherit_profile:
            profile, reason = top.profile, top.profile_reason
        else:
            profile, reason = profile_for_upstream(upstream.url)
        routes.append(
            RouteConfig(
                name=name,
                prefix=prefix,
                upstream=upstream,
                profile=profile,
                profile_reason=reason,
                models=(
                    _models(_mapping(given["models"], f"{key}.models"), f"{key}.models")
                    if "models" in given
                    else top.models
                ),
                rules={**top.rules, **own_rules},
                mode=_mode(given.get("mode", top.mode), f"{key}.mode"),
                client_tokens=tokens,
                log_content=top.log_content,
                verify=top.verify,
                recover=_recover(given.get("recover"), f"{key}.recover", top.recover),
            )
        )
    return tuple(sorted(routes, key=lambda route: -len(route.prefix)))


def _recover(value: Any, key: str, base: RecoverConfig) -> RecoverConfig:
    """A ``recover`` mapping over ``base`` (a route's defaults to the top level's)."""
    given = _mapping(value, key)
    _no_unknown(given, ("enabled", "max_attempts", "learn_ttl", "lossy"), key)
    attempts = given.get("max_attempts", base.max_attempts)
    if isinstance(attempts, bool) or attempts not in (0, 1):
        raise ConfigError(
            f"{key}.max_attempts: must be 0 or 1 (chatmend retries a request at most once), "
            f"got {attempts!r}"
        )
    enabled = _bool(given["enabled"], f"{key}.enabled") if "enabled" in given else base.enabled
    ttl = given.get("learn_ttl", base.learn_ttl)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 <= ttl <= 7 * 86400:
        raise ConfigError(f"{key}.learn_ttl: must be seconds from 0 to 604800, got {ttl!r}")
    lossy = _lossy(given["lossy"], f"{key}.lossy") if "lossy" in given else base.lossy
    return RecoverConfig(enabled=enabled, max_attempts=attempts, learn_ttl=float(ttl), lossy=lossy)


def _lossy(value: Any, key: str) -> frozenset[str]:
    """``recover.lossy``: ``true`` (every rule, ``*``), ``false`` (none) or a list of the
    rules whose lossy changes a retry may make (each must be a rule that has some)."""
    if value is True:
        return frozenset({"*"})
    if value is False:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ConfigError(f"{key}: must be true, false or a list of rule names, got {value!r}")
    lossy = {name for name, rule in KNOWN_RULES.items() if "lossy" in rule.classes}
    for name in value:
        if name not in KNOWN_RULES:
            raise ConfigError(f"{key}: unknown rule {name!r}")
        if name not in lossy:
            raise ConfigError(f"{key}: {name} makes no lossy change (see docs/rules.md)")
    return frozenset(value)


def _ui(value: Any, env: Mapping[str, str]) -> UiConfig:
    ui = _mapping(value, "ui")
    _no_unknown(ui, ("enabled", "admin_token_env", "allowed_hosts"), "ui")
    token = None
    if ui.get("admin_token_env") is not None:
        token = _secret(ui["admin_token_env"], "ui.admin_token_env", env)
    return UiConfig(
        enabled=_bool(ui.get("enabled", False), "ui.enabled"),
        admin_token=token,
        allowed_hosts=_allowed_hosts(ui.get("allowed_hosts", [])),
    )


def _allowed_hosts(value: Any) -> tuple[tuple[str, int | None], ...]:
    if not isinstance(value, list):
        raise ConfigError(f"ui.allowed_hosts: must be a list of host names, got {value!r}")
    hosts = []
    for index, entry in enumerate(value):
        parsed = split_host(entry) if isinstance(entry, str) else None
        if parsed is None:
            raise ConfigError(
                f"ui.allowed_hosts[{index}]: must be a host name or address as a Host header "
                "names it (chatmend.internal, chatmend.internal:8787, 10.0.0.5, [fd00::5]:8787),"
                f" with no scheme, path or wildcard; got {entry!r}"
            )
        hosts.append(parsed)
    return tuple(hosts)


#: A host name's labels (letters, digits, '-', and '_' as container names use them).
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def split_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` header's name (lower case, without a trailing dot; an IPv6 address without
    its brackets) and port (``None`` when it names none), or ``None`` if it is not a host."""
    text = value.strip().lower()
    port_text: str | None
    if text.startswith("["):
        address, bracket, rest = text[1:].partition("]")
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return None
        if not bracket or (rest and not rest.startswith(":")):
            return None
        name, port_text = address, (rest[1:] if rest else None)
    else:
        name, colon, after = text.partition(":")
        name, port_text = name.removesuffix("."), (after if colon else None)
        if len(name) > 253 or not _HOST_NAME.fullmatch(name):
            return None
    if port_text is None:
        return name, None
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text[:6]) < 65536:
        return None
    return name, int(port_text)


def _capture(value: Any) -> CaptureConfig:
    capture = _mapping(value, "capture")
    _no_unknown(capture, ("enabled", "max_requests", "max_bytes"), "capture")
    base = CaptureConfig()
    return CaptureConfig(
        enabled=_bool(capture.get("enabled", False), "capture.enabled"),
        max_requests=_positive_int(
            capture.get("max_requests", base.max_requests), "capture.max_requests"
        ),
        max_bytes=_positive_int(capture.get("max_bytes", base.max_bytes), "capture.max_bytes"),
    )


def _prefix_cache(value: Any) -> PrefixConfig:
    given = _mapping(value, "prefix_cache")
    _no_unknown(given, ("enabled", "max_bytes", "ttl", "resume", "route_sessions"), "prefix_cache")
    base = PrefixConfig()
    return PrefixConfig(
        enabled=_bool(given.get("enabled", base.enabled), "prefix_cache.enabled"),
        max_bytes=_positive_int(given.get("max_bytes", base.max_bytes), "prefix_cache.max_bytes"),
        ttl=_seconds(given.get("ttl", base.ttl), "prefix_cache.ttl"),
        resume=_bool(given.get("resume", base.resume), "prefix_cache.resume"),
        route_sessions=_bool(
            given.get("route_sessions", base.route_sessions), "prefix_cache.route_sessions"
        ),
    )


def _reasoning(value: Any) -> ReasoningConfig:
    return parse_reasoning(value)  # its errors are ConfigError (proxy/config/validate.py)


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


def _models(raw: Mapping[str, Any], where: str = "models") -> tuple[tuple[str, str], ...]:
    models: list[tuple[str, str]] = []
    for pattern, profile in raw.items():
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(
                f"{where}: a model pattern must be a non-empty string, got {pattern!r}"
            )
        models.append((pattern, _profile(profile, f"{where}.{pattern}")))
    return tuple(models)


def _rule_settings(raw: Mapping[str, Any], where: str = "rules") -> dict[str, RuleSetting]:
    """The operator's settings, validated: ``true``/``false``, or a mapping with ``enabled``
    (optional: the profile decides) and declared options. ``null`` means "as the profile"."""
    settings: dict[str, RuleSetting] = {}
    for name, value in raw.items():
        if name not in KNOWN_RULES:
            close = difflib.get_close_matches(str(name), list(KNOWN_RULES), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ConfigError(f"{where}.{name}: unknown rule{hint} (docs/rules.md lists them)")
        key = f"{where}.{name}"
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
            enabled=enabled, options=_rule_options(name, options, key), mode=mode
        )
    return settings


def _rule_options(name: str, given: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Validate the given options (the others come from the profile, then the rule)."""
    for option in KNOWN_RULES[name].options:
        if option.name in given:
            error = option.validate(given[option.name])
            if error:
                raise ConfigError(f"{key}.{option.name}: {error}")
    return dict(given)


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 64:
        raise ConfigError(f"{key}: must be an integer from 0 to 64, got {value!r}")
    return value


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


def profile_for_upstream(url: str) -> tuple[str, str]:
    """The profile an upstream URL implies for a config that names none, and why (for the
    ``proxy_started`` line). ``profile:`` (top level, a route's, or ``--profile``) always wins.
    Without one, the upstream's host picks the profile whose record lists it (``Profile.hosts``,
    rendered in docs/profiles.md), so ``--upstream https://api.moonshot.ai`` runs under ``kimi``
    rather than the default; a host no profile lists gets ``DEFAULT_PROFILE`` (``deepseek``,
    chatmend's first target)."""
    host = (URL(url).host or "").lower()
    for pattern, profile in HOST_PROFILES:
        if fnmatchcase(host, pattern):
            return profile, f"upstream host {host} matches {pattern}"
    return DEFAULT_PROFILE, f"upstream host {host} is not a known provider: the default profile"
