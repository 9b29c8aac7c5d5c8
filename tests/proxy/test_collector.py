"""The collector set for serving (proxy/server/collector.py): start-up's objects frozen once the
app is built and before the server starts, start-up's garbage collected first, and a reload
giving the frozen objects back. ``chatmend serve``'s ``proxy_started`` line says how many it
froze (test_cli.py)."""

from __future__ import annotations

import asyncio
import gc
import socket
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from proxy import cli
from proxy.config import ConfigError, parse_config
from proxy.server import collector
from proxy.server.app import RUNTIME_KEY, create_app
from proxy.server.reload import reload_config

CONFIG = {"upstream": {"url": "http://127.0.0.1:9"}}


@pytest.fixture
def restored() -> Iterator[None]:
    """The test process's collector as it was: nothing frozen, on."""
    assert gc.get_freeze_count() == 0
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


def _walked(obj: object) -> bool:
    """Whether the collector walks ``obj`` (``gc.get_objects`` leaves the frozen ones out)."""
    return any(found is obj for found in gc.get_objects())


@pytest.mark.usefixtures("restored")
def test_chatmend_serve_freezes_the_app_it_built_before_the_server_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def run_app(app: web.Application, **options: Any) -> None:
        options["loop"].close()
        seen["frozen"] = gc.get_freeze_count()
        seen["app"], seen["runtime"] = app, app[RUNTIME_KEY].current
        seen["walked"] = _walked(app) or _walked(app[RUNTIME_KEY].current)

    monkeypatch.setattr(web, "run_app", run_app)
    config = parse_config(CONFIG)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        assert cli._serve_one(config, lambda: config, asyncio.new_event_loop, sock=sock) == 0
    assert seen["frozen"] > 0
    assert seen["walked"] is False
    collector.thaw()
    assert _walked(seen["app"]) and _walked(seen["runtime"])  # what froze them was the freeze


@pytest.mark.usefixtures("restored")
def test_settle_collects_start_ups_garbage_before_it_freezes() -> None:
    """A cycle that is garbage at start-up is collected, not frozen for ever."""

    class Node:
        pass

    gc.disable()  # no collection of its own between here and ``settle``
    node = Node()
    node.self = node  # type: ignore[attr-defined]
    gone = weakref.ref(node)
    del node
    assert gone() is not None
    kept = [[n] for n in range(100)]  # alive: frozen with the rest
    assert collector.settle() == gc.get_freeze_count() > len(kept)
    assert gone() is None
    assert not _walked(kept)


@pytest.mark.usefixtures("restored")
def test_a_reload_gives_the_frozen_objects_back_and_a_failed_one_does_not() -> None:
    app = create_app(parse_config(CONFIG))
    collector.settle()

    def broken() -> Any:
        raise ConfigError("mode: must be enforce or report, got 'bogus'")

    assert not reload_config(app, broken)
    assert not _walked(app[RUNTIME_KEY].current)  # the rules still serve: they stay frozen
    assert reload_config(app, lambda: parse_config(CONFIG))
    assert gc.get_freeze_count() == 0  # the rules replaced may be garbage in a cycle
