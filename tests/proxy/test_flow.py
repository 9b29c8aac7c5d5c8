"""A request flows one way (proxy/observe/flow.py, proxy/server/trip.py): one ``Flow`` from start
to end, named events in the order it meets them, subscribers that only hear what they override,
and a subscriber that raises is logged and skipped, never the request's failure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request

from proxy.config import parse_config
from proxy.observe.flow import EVENTS, Events, Flow, Subscriber
from proxy.server.app import create_app
from proxy.server.appkeys import EVENTS_KEY
from tests.logs import captured_logs
from tests.transcripts import BROKEN, CLEAN_BODY, chat


class Recorder(Subscriber):
    """Every event it hears, with what the flow knew then."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str]] = []

    def _note(self, event: str, flow: Flow) -> None:
        self.heard.append((event, flow.id))

    def request_read(self, flow: Flow) -> None:
        self._note("request_read", flow)

    def limited(self, flow: Flow, limit: str, fields: Mapping[str, object]) -> None:
        self._note(f"limited:{limit}", flow)

    def repaired(self, flow: Flow) -> None:
        assert flow.sanitized is not None and flow.sanitize_ms is not None
        self._note("repaired", flow)

    def response_started(self, flow: Flow) -> None:
        assert flow.upstream_ms is not None
        self._note("response_started", flow)

    def response_ended(self, flow: Flow) -> None:
        self._note("response_ended", flow)

    def upstream_failed(self, flow: Flow, error: str | None, fields: Mapping[str, object]) -> None:
        self._note(f"upstream_failed:{error}", flow)

    def answered(self, flow: Flow) -> None:
        assert flow.response is not None and flow.original is not None
        self._note("answered", flow)

    def done(self, flow: Flow) -> None:
        self._note(f"done:{flow.status}", flow)


class Broken(Subscriber):
    def repaired(self, flow: Flow) -> None:
        raise RuntimeError("a subscriber's own bug")


async def _with(
    aiohttp_client: Any, fake_server: Any, *subscribers: Subscriber
) -> TestClient[Any, Any]:
    """A proxy whose flows the ``subscribers`` hear too (after the app's own)."""
    upstream = str(fake_server.make_url("")).rstrip("/")
    app = create_app(parse_config({}, default_upstream=upstream, env={}))

    async def add(app: web.Application) -> None:
        app[EVENTS_KEY] = Events((*app[EVENTS_KEY].subscribers, *subscribers))

    app.on_startup.append(add)
    client: TestClient[Any, Any] = await aiohttp_client(app)
    return client


async def test_a_request_meets_the_events_in_order(aiohttp_client: Any, fake_server: Any) -> None:
    recorder = Recorder()
    proxy = await _with(aiohttp_client, fake_server, recorder)
    response = await proxy.post("/v1/chat/completions", data=chat(BROKEN["empty_tool_calls"]))
    assert response.status == 200
    own = response.headers["X-Chatmend-Request-Id"]
    assert recorder.heard == [
        (event, own)
        for event in (
            "request_read",
            "repaired",
            "response_started",
            "response_ended",
            "answered",
            "done:200",
        )
    ]
    recorder.heard.clear()
    refused = await proxy.request("TRACE", "/v1/models")
    assert refused.status == 405
    assert [event for event, _ in recorder.heard] == ["limited:method", "done:405"]


async def test_a_subscriber_that_raises_is_logged_and_skipped(
    aiohttp_client: Any, fake_server: Any
) -> None:
    recorder = Recorder()
    proxy = await _with(aiohttp_client, fake_server, Broken(), recorder)
    with captured_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=CLEAN_BODY)
    assert response.status == 200
    failed = [e for e in logs if e["event"] == "subscriber_failed"]
    assert [(e["subscriber"], e["on"], e["error"]) for e in failed] == [
        ("Broken", "repaired", "RuntimeError")
    ]
    assert failed[0]["request_id"] == response.headers["X-Chatmend-Request-Id"]
    assert ("repaired", response.headers["X-Chatmend-Request-Id"]) in recorder.heard  # the next


def test_an_event_no_subscriber_overrides_costs_an_empty_loop() -> None:
    class OnlyDone(Subscriber):
        def done(self, flow: Flow) -> None:
            pass

    events = Events([Subscriber(), OnlyDone()])
    hearing = {name: getattr(events, f"_{name}") for name in EVENTS}
    assert {name: len(calls) for name, calls in hearing.items() if calls} == {"done": 1}
    assert all(callable(getattr(events, name)) for name in EVENTS)


def test_a_flow_binds_its_request_id_once_and_unbinds_it() -> None:
    flow = Flow.start(make_mocked_request("GET", "/v1/models", headers={"X-Request-ID": "abc"}))
    with captured_logs() as logs:
        from proxy.observe.log import get_logger

        get_logger().info("anything")
        flow.end()
        get_logger().info("after")
    assert flow.client_request_id == "abc" and len(flow.id) == 32
    assert logs[0]["request_id"] == flow.id and "request_id" not in logs[1]
