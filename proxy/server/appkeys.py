"""The objects one app holds for all its requests, by key (``request.app[KEY]``)."""

from __future__ import annotations

from aiohttp import ClientSession, web

from proxy.config import UiConfig
from proxy.observe.capture import Recent
from proxy.observe.flow import Events
from proxy.observe.metrics import Metrics
from proxy.recovery.learned import LearnedRepairs
from proxy.recovery.retry import Suggestions
from proxy.relay.body import InflightBudget
from proxy.relay.offload import Offloader
from proxy.relay.owners import Relay
from proxy.relay.prefix import PrefixCache
from proxy.relay.routing import RuntimeHolder
from proxy.stash.hooks import ReasoningHooks

SESSION_KEY = web.AppKey("session", ClientSession)
RUNTIME_KEY = web.AppKey("runtime", RuntimeHolder)
METRICS_KEY = web.AppKey("metrics", Metrics)
REASONING_KEY = web.AppKey("reasoning", ReasoningHooks)
SUGGESTIONS_KEY = web.AppKey("recovery_suggestions", Suggestions)
OFFLOAD_KEY = web.AppKey("offload", Offloader)
INFLIGHT_KEY = web.AppKey("inflight", InflightBudget)
LEARNED_KEY = web.AppKey("learned_repairs", LearnedRepairs)
#: Verified-prefix reuse (proxy/relay/prefix.py): the sessions' last bodies, parsed.
PREFIX_KEY = web.AppKey("prefix_cache", PrefixCache)
#: Under ``--workers``: this worker and its relay to the others (proxy/relay/owners.py).
RELAY_KEY = web.AppKey("relay", Relay)
#: The page's recent requests and captured bodies (proxy/observe/capture.py): set only when ``ui``
#: is on.
RECENT_KEY = web.AppKey("recent", Recent)
#: The page's settings (proxy/server/page.py): set only when ``ui`` is on.
UI_KEY = web.AppKey("ui", UiConfig)
#: The OpenTelemetry tracer (proxy/observe/otel.py): set only when the OTEL_* variables ask for
#: traces.
TRACER_KEY = web.AppKey("tracer", object)
#: The flow's subscribers per event (proxy/observe/flow.py), fixed when the app starts.
EVENTS_KEY = web.AppKey("events", Events)
