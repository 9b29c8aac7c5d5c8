"""A request the upstream fails leaves no cycle behind: its body, its flow and its frames are
freed when it ends, as a request that succeeds is, not at the collector's next pass.

aiohttp keeps the exception of a failed connection (the connector's last error) or of a broken
stream (its reader's) where the exception's traceback reaches it back, through the frames that
hold the request's body: a cycle only the collector frees. During an upstream's outage that was
dozens of dead requests' bodies per process between two collections (8 MB bodies, 4 at a time:
354 MB of peak memory, 155 MB without the cycles). chatmend drops the tracebacks of the upstream
errors it handles (``proxy.relay.upstream.untraced``): it logs an error's type, never its frames.

Each test sends one failing request (what is made once is made), turns the collector off, sends
the same request ``TIMES`` times more, and reads what one collection then finds unreachable: no
body, no flow, no frame (each request left about a hundred objects, those among them; asyncio's
transports of a connection reset may still leave a socket in a cycle, which holds no request).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator
from types import FrameType
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient

from proxy.observe.flow import Flow
from tests.conftest import ProxyFactory
from tests.faulty_upstream import FaultyUpstream, reset_mid_body, sse

TIMES = 4
BODY = orjson.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "x" * 100_000}], "stream": True}
)


@pytest.fixture
async def faulty() -> AsyncIterator[FaultyUpstream]:
    upstream = await FaultyUpstream().start()
    yield upstream
    await upstream.close()


async def _garbage_after(proxy: TestClient[Any, Any], status: int) -> list[Any]:
    """What one collection finds unreachable after ``TIMES`` failing requests (one sent before,
    with the collector on)."""

    async def send() -> None:
        async with proxy.post("/v1/chat/completions", data=BODY) as response:
            assert response.status == status
            with contextlib.suppress(aiohttp.ClientPayloadError):  # a stream broken: as sent
                await response.read()

    await send()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what it finds is kept in ``gc.garbage``, to be read
    try:
        for _ in range(TIMES):
            await send()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def held(garbage: list[Any]) -> list[str]:
    """What of a request the garbage holds: its body (any text of 50 KB or more), its flow, a
    frame of chatmend's or aiohttp's."""
    found = []
    for obj in garbage:
        if isinstance(obj, bytes | bytearray | str) and len(obj) >= 50_000:
            found.append(f"{type(obj).__name__} of {len(obj)}")
        elif isinstance(obj, Flow):
            found.append("Flow")
        elif isinstance(obj, FrameType):
            found.append(f"frame {obj.f_code.co_name}")
    return found


async def test_an_unreachable_upstream_leaves_no_cycle(make_proxy: ProxyFactory) -> None:
    proxy = await make_proxy(url="http://127.0.0.1:9")  # nothing listens: connection refused
    assert held(await _garbage_after(proxy, 502)) == []


@pytest.mark.parametrize("ending", ["reset", "eof"])
async def test_a_stream_broken_midway_leaves_no_cycle(
    ending: str, make_proxy: ProxyFactory, faulty: FaultyUpstream
) -> None:
    faulty.default = sse(2, then=ending)
    proxy = await make_proxy(url=faulty.url)
    assert held(await _garbage_after(proxy, 200)) == []


async def test_a_stream_stalled_past_the_read_timeout_leaves_no_cycle(
    make_proxy: ProxyFactory, faulty: FaultyUpstream
) -> None:
    faulty.default = sse(2, then="stall")
    proxy = await make_proxy(url=faulty.url, read_timeout=0.05)
    assert held(await _garbage_after(proxy, 200)) == []


async def test_a_small_answer_cut_short_leaves_no_cycle(
    make_proxy: ProxyFactory, faulty: FaultyUpstream
) -> None:
    """An answer read whole (small and sized) that breaks off: chatmend's own 502."""
    faulty.default = reset_mid_body(announced=1000, sent=30)
    proxy = await make_proxy(url=faulty.url)
    assert held(await _garbage_after(proxy, 502)) == []
