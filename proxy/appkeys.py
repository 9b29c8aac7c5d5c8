"""The objects one app holds for all its requests, by key (``request.app[KEY]``)."""

from __future__ import annotations

from aiohttp import ClientSession, web

from proxy.body import InflightBudget
from proxy.capture import Recent
from proxy.config import UiConfig
from proxy.learned import LearnedRepairs
from proxy.metrics import Metrics
from proxy.offload import Offloader
from proxy.prefix import PrefixCache
from proxy.recover import Suggestions
from proxy.routing import RuntimeHolder
from proxy.stash.hooks import ReasoningHooks

SESSION_KEY = web.AppKey("session", ClientSession)
RUNTIME_KEY = web.AppKey("runtime", RuntimeHolder)
METRICS_KEY = web.AppKey("metrics", Metrics)
REASONING_KEY = web.AppKey("reasoning", ReasoningHooks)
SUGGESTIONS_KEY = web.AppKey("recovery_suggestions", Suggestions)
OFFLOAD_KEY = web.AppKey("offload", Offloader)
INFLIGHT_KEY = web.AppKey("inflight", InflightBudget)
LEARNED_KEY = web.AppKey("learned_repairs", LearnedRepairs)
#: Verified-prefix reuse (proxy/prefix.py): the sessions' last bodies, parsed.
PREFIX_KEY = web.AppKey("prefix_cache", PrefixCache)
#: The page's recent requests and captured bodies (proxy/capture.py): set only when ``ui`` is on.
RECENT_KEY = web.AppKey("recent", Recent)
#: The page's settings (proxy/page.py): set only when ``ui`` is on.
UI_KEY = web.AppKey("ui", UiConfig)
#: The OpenTelemetry tracer (proxy/otel.py): set only when the OTEL_* variables ask for traces.
TRACER_KEY = web.AppKey("tracer", object)
