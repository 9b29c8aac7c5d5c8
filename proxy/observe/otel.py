"""OpenTelemetry, optional: one span per request, when the SDK is installed (``pip install
'.[otel]'``) and the standard variables ask for traces (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or ``OTEL_TRACES_EXPORTER=otlp|console``; not ``none``).
Otherwise nothing is set up, and no request pays anything: ``Tracing`` subscribes to the flow's
``done`` (proxy/observe/flow.py) only when there is a tracer.

The span (``chatmend.request``) is written once the request is done, with its start time: the
route, the API, the model, the status, the rules that changed the body, the change count,
whether recovery sent it again, chatmend's overhead and the request id as attributes. Never
message text, never headers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from proxy.observe.capture import model_of
from proxy.observe.flow import Flow, Subscriber
from proxy.observe.log import get_logger

log = get_logger()

SPAN_NAME = "chatmend.request"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def wanted(env: Mapping[str, str]) -> str | None:
    """The exporter the environment asks for (``otlp`` or ``console``), or ``None``."""
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    chosen = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if chosen in ("otlp", "console"):
        return chosen
    if chosen == "" and any(env.get(name) for name in _ENDPOINTS):
        return "otlp"
    return None


def tracer_from_env(env: Mapping[str, str]) -> Any | None:
    """A tracer exporting as the ``OTEL_*`` variables say, or ``None`` (unset, or the SDK or
    exporter not installed: logged once, never fatal)."""
    exporter_name = wanted(env)
    if exporter_name is None:
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        exporter: Any
        if exporter_name == "console":
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter,
            )

            exporter = OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_* itself
    except ImportError as exc:
        log.warning("otel_unavailable", missing=exc.name, install="pip install '.[otel]'")
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": "chatmend"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    log.info("otel_enabled", exporter=exporter_name)
    return provider.get_tracer("chatmend")


def record(tracer: Any, start_ns: int, end_ns: int, attributes: Mapping[str, Any]) -> None:
    """One finished span (attributes that are ``None`` are left out)."""
    clean = {key: value for key, value in attributes.items() if value is not None}
    span = tracer.start_span(SPAN_NAME, start_time=start_ns, attributes=clean)
    span.end(end_time=end_ns)


class Tracing(Subscriber):
    """The request's span, written once it is done (a subscriber only when a tracer is set up:
    without one, a request pays nothing)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    def done(self, flow: Flow) -> None:
        end = time.time_ns()
        start = end - int((time.perf_counter() - flow.started) * 1e9)
        request = flow.request
        attributes = {
            "chatmend.request_id": flow.id,
            "chatmend.route": flow.route,
            "chatmend.api": flow.api,
            "chatmend.model": model_of(flow.original),
            "chatmend.profile": flow.profile,
            "chatmend.rules": list(flow.rules),
            "chatmend.changes": flow.changes,
            "chatmend.recovered": flow.recovered,
            "chatmend.overhead_ms": flow.overhead_ms,
            "chatmend.outcome": flow.outcome,
            "http.request.method": request.method,
            "http.response.status_code": flow.status,
            "url.path": request.path[:256],
        }
        record(self.tracer, start, end, attributes)
