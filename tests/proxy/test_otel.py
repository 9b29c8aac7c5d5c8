"""OpenTelemetry (proxy/observe/otel.py): one span per request when asked, nothing when not."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from proxy.config import parse_config
from proxy.observe import otel
from proxy.server.app import create_app
from proxy.server.appkeys import TRACER_KEY
from tests.transcripts import BROKEN, chat


def test_nothing_is_set_up_unless_the_variables_ask() -> None:
    assert otel.wanted({}) is None
    assert otel.tracer_from_env({"PATH": "/bin"}) is None
    assert otel.wanted({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}) is None
    assert otel.wanted({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}) is None
    assert otel.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == "otlp"
    assert otel.wanted({"OTEL_TRACES_EXPORTER": "console"}) == "console"
    assert otel.tracer_from_env({"OTEL_TRACES_EXPORTER": "console"}) is not None


async def test_one_span_per_request_with_what_chatmend_did(
    fake_server: Any, aiohttp_client: Any
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = parse_config({}, default_upstream=str(fake_server.make_url("")).rstrip("/"), env={})
    app = create_app(config)
    app[TRACER_KEY] = provider.get_tracer("test")
    proxy: TestClient[Any, Any] = await aiohttp_client(app)
    secret = "sk-SECRET-otel"
    response = await proxy.post(
        "/v1/chat/completions",
        data=chat(BROKEN["empty_tool_calls"]),
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status == 200
    await proxy.get("/v1/models")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["chatmend.request", "chatmend.request"]
    attrs = dict(spans[0].attributes or {})
    assert attrs["chatmend.request_id"] == response.headers["X-Chatmend-Request-Id"]
    assert attrs["chatmend.route"] == "default" and attrs["chatmend.api"] == "chat"
    assert attrs["chatmend.model"] == "deepseek-chat"
    assert attrs["chatmend.changes"] == 1 and attrs["chatmend.rules"] == ("empty-tool-calls",)
    assert attrs["chatmend.recovered"] is False and attrs["http.response.status_code"] == 200
    assert float(attrs["chatmend.overhead_ms"]) >= 0  # type: ignore[arg-type]
    assert spans[0].start_time is not None and spans[0].end_time is not None
    assert spans[0].start_time <= spans[0].end_time
    assert secret not in repr([dict(s.attributes or {}) for s in spans])


async def test_no_tracer_no_span(proxy: Any) -> None:
    assert TRACER_KEY not in proxy.server.app
    assert (await proxy.get("/v1/models")).status < 500
