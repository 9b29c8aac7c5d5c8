"""Big request bodies repaired in worker processes, so the event loop keeps answering.

A body over ``offload_body_bytes`` (decoded) is parsed and repaired in a small process pool
(``offload_processes``): no client waits on another's CPU, orjson's parse included (it holds
the GIL, so a thread would stall the loop as much). Small bodies stay inline: the round trip
(the body pickled both ways) would cost more than their repair. The caller bounds each job
with a deadline; a job past it is abandoned (it runs to its end in the worker, bounded by the
rules' own work budgets) and the request goes on without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import pickle
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any
from weakref import WeakKeyDictionary

from proxy.sanitize import Sanitized, sanitize_body
from rules.engine.base import Given
from rules.providers.planner import Planner

#: Planners a worker has unpickled, by digest (one per route and config generation).
_PLANNERS: dict[bytes, Planner] = {}
_MAX_PLANNERS = 32


class Offloader:
    """The app's pool, started on the first big body (most apps never see one)."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._pool: ProcessPoolExecutor | None = None
        self._pickled: WeakKeyDictionary[Planner, tuple[bytes, bytes]] = WeakKeyDictionary()

    @property
    def enabled(self) -> bool:
        return self.processes > 0

    def _planner(self, planner: Planner) -> tuple[bytes, bytes]:
        found = self._pickled.get(planner)
        if found is None:
            blob = pickle.dumps(planner)
            found = (hashlib.sha256(blob).digest(), blob)
            self._pickled[planner] = found
        return found

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a fork of a process running an event loop and threads is not safe.
            self._pool = ProcessPoolExecutor(self.processes, mp_context=get_context("spawn"))
        return self._pool

    async def sanitize(
        self,
        body: bytes,
        planner: Planner,
        api: str,
        *,
        given: Given | None = None,
    ) -> Sanitized:
        """``sanitize_body`` in a worker process."""
        result: Sanitized = await self.call(_sanitize, body, planner, api, given)
        return result

    async def call(self, function: Any, body: bytes, planner: Planner, *args: Any) -> Any:
        """``function(body, planner, *args)`` in a worker process (a module-level function)."""
        key, blob = self._planner(planner)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor(), _call, function, key, blob, body, args
            )
        except BrokenProcessPool:
            self.close()  # a worker died (killed, out of memory): the next body gets a new pool
            raise

    def start(self) -> None:
        """Start the workers now (``chatmend serve``), not on the first big body: its request
        would wait for a process to import chatmend."""
        if self.enabled:
            self._executor().submit(_warm)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _warm() -> None:
    """Nothing: the worker imported this module (and the rules) to run it."""


def _unpickled(key: bytes, blob: bytes) -> Planner:
    planner = _PLANNERS.get(key)
    if planner is None:
        if len(_PLANNERS) >= _MAX_PLANNERS:
            _PLANNERS.clear()  # old config generations
        planner = _PLANNERS[key] = pickle.loads(blob)
    return planner


def _sanitize(body: bytes, planner: Planner, api: str, given: Given | None) -> Sanitized:
    return sanitize_body(body, planner, api, given=given)


def _call(function: Any, key: bytes, blob: bytes, body: bytes, args: tuple[Any, ...]) -> Any:
    return function(body, _unpickled(key, blob), *args)
