"""The collector set for serving (proxy/server/collector.py): start-up's objects frozen before
the first request, the young generation collected after 10,000 objects, and a reload giving the
frozen objects back. ``chatmend serve`` itself is checked by test_cli.py (its ``proxy_started``
line says how many objects it froze)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import orjson
import pytest

from proxy.config import ConfigError, parse_config
from proxy.server import collector
from proxy.server.app import create_app
from proxy.server.reload import reload_config
from rules.providers.planner import Planner
from rules.providers.sanitize import sanitize_body


@pytest.fixture
def restored() -> Iterator[None]:
    """The test process's collector as it was (frozen nothing, its thresholds)."""
    threshold = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored")
def test_settle_freezes_what_is_alive_and_collects_the_young_generation_later() -> None:
    older = gc.get_threshold()[1:]
    kept = [[n] for n in range(1000)]  # alive now: frozen with the rest
    frozen = collector.settle()
    assert frozen == gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, *older)
    # A repair's objects die with it: the young generation is not collected on its way.
    body = orjson.dumps(
        {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}] * 2000}
    )
    plan = Planner().plan("deepseek-chat")
    collections = gc.get_stats()[0]["collections"]
    for _ in range(5):
        sanitize_body(body, plan, "chat")
    assert gc.get_stats()[0]["collections"] == collections
    collector.thaw()
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("restored")
def test_settle_collects_start_ups_garbage_before_it_freezes() -> None:
    """A cycle that is garbage at start-up is collected, not frozen for ever."""

    class Node:
        pass

    gc.disable()  # no collection of its own between here and ``settle``
    try:
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        gone = weakref.ref(node)
        del node
        assert gone() is not None
        collector.settle()
        assert gone() is None
    finally:
        gc.enable()


@pytest.mark.usefixtures("restored")
def test_a_reload_gives_the_frozen_objects_back_and_a_failed_one_does_not() -> None:
    app = create_app(parse_config({"upstream": {"url": "http://127.0.0.1:9"}}))
    collector.settle()
    frozen = gc.get_freeze_count()

    def broken() -> object:
        raise ConfigError("mode: must be enforce or report, got 'bogus'")

    assert not reload_config(app, broken)  # type: ignore[arg-type]
    assert gc.get_freeze_count() == frozen  # the rules still serve: they stay frozen
    assert reload_config(app, lambda: parse_config({"upstream": {"url": "http://127.0.0.1:9"}}))
    assert gc.get_freeze_count() == 0  # the rules replaced may be garbage in a cycle
