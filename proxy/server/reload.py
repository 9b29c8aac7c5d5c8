"""Hot reload: a new config is validated and compiled, then swapped in one assignment.

An invalid config is rejected with a logged ``config_reload_failed`` (the dotted key at fault)
and the running one keeps serving. Requests already in flight keep the runtime they read when
they started (``proxy.relay.routing.RuntimeHolder``). ``listen``, ``max_body_bytes``,
``drain_seconds`` and ``reasoning`` (the stash) are bound when the server starts: a change to
them is logged as ``restart_needed`` and the running values stay; the rest applies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from aiohttp import web

from proxy.config import Config, ConfigError
from proxy.observe.log import get_logger
from proxy.relay.routing import Runtime
from proxy.server import collector
from proxy.server.app import LEARNED_KEY, METRICS_KEY, PREFIX_KEY, RUNTIME_KEY

#: Config fields bound at start-up (the listening socket, the parser's body size limit, the
#: drain deadline given to the server, the reasoning stash and its store connection).
RESTART_ONLY = ("listen", "max_body_bytes", "drain_seconds", "reasoning")

log = get_logger()


def reload_config(app: web.Application, load: Callable[[], Config]) -> bool:
    """Load, validate and compile a config, then swap it in; ``False`` if it was rejected."""
    holder = app[RUNTIME_KEY]
    meter = app[METRICS_KEY]
    old = holder.current.config
    try:
        loaded = load()
        # What is bound at start-up stays as it is running, so the runtime says what is in effect.
        config = replace(loaded, **{key: getattr(old, key) for key in RESTART_ONLY})
        runtime = Runtime.compile(config, previous=holder.current)
    except ConfigError as exc:
        meter.reloads.labels("failed").inc()
        log.error("config_reload_failed", error=str(exc), generation=holder.generation)
        return False
    except Exception as exc:  # a reload must never take the serving process down
        meter.reloads.labels("failed").inc()
        log.error("config_reload_failed", error=type(exc).__name__, generation=holder.generation)
        return False
    holder.swap(runtime)
    collector.thaw()  # the rules it replaced go back to the collector (proxy/server/collector.py)
    app[LEARNED_KEY].forget_all()  # learned against the old routes, profiles and rules
    app[PREFIX_KEY].configure(config.prefix_cache)
    meter.reloads.labels("ok").inc()
    log.info(
        "config_reloaded",
        generation=holder.generation,
        routes={route.name: route.config.profile for route in runtime.routes},
        retired=list(runtime.retired),
        mode=config.default.mode,
        restart_needed=[key for key in RESTART_ONLY if getattr(loaded, key) != getattr(old, key)],
    )
    return True
