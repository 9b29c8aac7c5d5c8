"""Routes compiled from a config, and the holder that lets SIGHUP swap them atomically.

A ``Runtime`` is everything a request needs from the config: the routes (each with its
planner, compiled once) and the request limits. The app keeps one ``RuntimeHolder``; a
request reads ``holder.current`` once when it starts and keeps that runtime to the end, so a
reload never changes the rules under a request in flight.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote, unquote_to_bytes

from aiohttp import ClientTimeout
from yarl import URL

from proxy.config import Config, RouteConfig
from rules.providers.planner import Planner


@dataclass(frozen=True, slots=True)
class Route:
    config: RouteConfig
    planner: Planner
    timeout: ClientTimeout
    #: The upstream URL ends in ``/v1`` (``https://api.moonshot.ai/v1``): a client path that
    #: starts with ``/v1`` too is sent without its own, not to ``/v1/v1/...``.
    v1_base: bool = False

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def prefix(self) -> str:
        return self.config.prefix

    @classmethod
    def compile(cls, config: RouteConfig) -> Route:
        upstream = config.upstream
        timeout = ClientTimeout(
            total=None,  # a stream may last many minutes
            connect=upstream.connect_timeout,
            sock_read=upstream.read_timeout,  # idle time between two reads
        )
        v1_base = ends_in_v1(upstream.url)
        return cls(config, config.planner(), timeout, v1_base)

    def matches(self, path: str) -> bool:
        """The path (decoded by ``route_path``) is the prefix or under it, in any case (segment
        by segment: ``/kimi`` does not take ``/kimi2``); the default route (empty prefix) takes
        everything."""
        prefix = self.config.prefix.lower()
        path = path.lower()
        return not prefix or path == prefix or path.startswith(prefix + "/")

    def upstream_path(self, raw_path_qs: str) -> str:
        """The path and query to send upstream: the request's, minus the route prefix's
        segments (the rest as the client encoded it), and minus the client's ``/v1`` when the
        upstream URL ends in its own."""
        path, mark, query = raw_path_qs.partition("?")
        depth = self.config.prefix.count("/")
        rest = "/" + "/".join(path.split("/")[depth + 1 :])
        if self.v1_base and rest[:3] == "/v1" and rest[3:4] in ("", "/"):
            rest = rest[3:] or "/"  # the client's /v1 is the upstream URL's own
        return rest + mark + query


def ends_in_v1(url: str) -> bool:
    """The upstream URL's path ends in ``/v1`` (clients add their own)."""
    return URL(url).path.rstrip("/").endswith("/v1")


@dataclass(frozen=True, slots=True)
class Runtime:
    config: Config
    #: Named routes, longest prefix first, then the default route.
    routes: tuple[Route, ...]
    #: Prefixes (lower case) of routes that held credentials (the upstream key, or client
    #: tokens) and that a reload removed: their paths get a 404 rather than another route, so
    #: the tokens their clients still send never reach an upstream they were not meant for.
    #: Kept until a route takes the prefix again or the process restarts.
    retired: tuple[str, ...] = ()

    @classmethod
    def compile(cls, config: Config, previous: Runtime | None = None) -> Runtime:
        """Compile every route's planner (raises nothing a validated config can cause);
        ``previous``, the runtime a reload replaces, passes on the prefixes it retires."""
        routes = tuple(Route.compile(route) for route in config.all_routes())
        retired: tuple[str, ...] = ()
        if previous is not None:
            live = {route.prefix.lower() for route in routes}
            gone = {
                route.prefix.lower()
                for route in previous.routes
                if route.prefix and (route.config.upstream.api_key or route.config.client_tokens)
            }
            retired = tuple(sorted((set(previous.retired) | gone) - live))
        return cls(config, routes, retired)

    def retired_prefix(self, path: str, route: Route) -> str | None:
        """The retired prefix ``path`` falls under, unless a route more specific than it took
        the path (``route``, the one ``route_for`` gave)."""
        lowered = path.lower()
        for prefix in self.retired:
            under = lowered == prefix or lowered.startswith(prefix + "/")
            if under and len(prefix) > len(route.prefix):
                return prefix
        return None

    @property
    def default(self) -> Route:
        return self.routes[-1]

    def route_for(self, path: str) -> Route:
        """The route of a path decoded by ``route_path``."""
        for route in self.routes:
            if route.matches(path):
                return route
        return self.routes[-1]  # unreachable: the default route matches every path


class RuntimeHolder:
    """The current runtime; ``swap`` replaces it in one assignment (requests already running
    keep the one they read)."""

    __slots__ = ("current", "generation")

    def __init__(self, runtime: Runtime) -> None:
        self.current = runtime
        #: How many times the config was swapped (0: the one the process started with).
        self.generation = 0

    def swap(self, runtime: Runtime) -> None:
        self.current = runtime
        self.generation += 1


class RefusedPath(ValueError):
    """A request path chatmend will not route or forward (the message says why)."""


#: Dot segments, as they look once decoded (and cut at ``;``: ``..;x`` is Tomcat's ``..``).
_DOTS = (".", "..")


@lru_cache(maxsize=256)  # a few paths, met on every request
def route_path(raw_path: str) -> str:
    """The path as an upstream reads it, percent-decoded, the one routes match on.

    Refused (``RefusedPath``): an encoded slash or backslash, a backslash, an empty segment
    (``//admin``; a trailing ``/`` is fine), a ``.`` or ``..`` segment however it is spelled
    (``%2e``, ``%252e`` decoded twice, ``..;x``), and percent-escapes that are not UTF-8
    (overlong dots, ``%c0%ae``). Each could reach a path on the upstream other than the one
    the route gate looked at.
    """
    path = raw_path
    if "%" in raw_path:
        try:
            path = unquote_to_bytes(raw_path).decode("utf-8")
        except UnicodeDecodeError:
            raise RefusedPath("percent-escapes that are not UTF-8") from None
        lowered = raw_path.lower()
        if "%2f" in lowered or "%5c" in lowered:
            raise RefusedPath("an encoded '/' or '\\'")
    if "\\" in path:
        raise RefusedPath("a '\\'")
    segments = path.split("/")
    for position, segment in enumerate(segments[1:], 1):
        if not segment and position < len(segments) - 1:
            raise RefusedPath("an empty segment ('//')")
        twice = unquote(segment) if "%" in segment else segment  # %252e: decoded twice
        if twice is not segment and ("/" in twice or "\\" in twice):
            raise RefusedPath("an encoded '/' or '\\'")
        if segment.split(";", 1)[0] in _DOTS or twice.split(";", 1)[0] in _DOTS:
            raise RefusedPath("a '.' or '..' segment")
    return path
