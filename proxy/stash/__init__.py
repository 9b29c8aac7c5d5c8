"""The reasoning stash: remember each thinking-mode tool-call turn's reasoning from the responses,
give it back to the requests that dropped it (a rule that declares ``Rule.recall`` does the
writing: ``reasoning-content`` for chat, ``messages-missing-thinking`` for Anthropic Messages,
whose thinking blocks are kept with their signatures).

``Stash`` wraps a ``Store`` (``MemoryStore`` or ``RedisStore``) with what the proxy needs: one
``recall`` round trip per request before the rules run, ``observer_for`` a response, and the
degradation policy: any store failure is a miss (the rule then inserts its placeholder), logged
once per change of state as ``reasoning_store_unavailable`` / ``reasoning_store_recovered``,
counted, never an error to the client. Reasoning text is never logged; keys are hashes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Protocol

from redis.exceptions import RedisError

from proxy.config.reasoning import ReasoningConfig
from proxy.observe.log import get_logger
from proxy.observe.metrics import Metrics
from proxy.stash.memory import MemoryStore
from proxy.stash.observer import READABLE_ENCODINGS, BodyObserver, OnLimit, ResponseObserver
from proxy.stash.redis_store import RedisStore

log = get_logger()

#: What a store may raise that means "unavailable" (a miss), never a client error.
STORE_ERRORS = (RedisError, OSError, TimeoutError, asyncio.TimeoutError)


class Store(Protocol):
    name: str

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]: ...

    async def put(self, key: str, text: str) -> None: ...

    async def close(self) -> None: ...


class Stash:
    """A store, its failure policy and its counters."""

    def __init__(
        self,
        store: Store,
        metrics: Metrics | None = None,
        *,
        timeout_seconds: float = 1.0,
        retry_seconds: float = 1.0,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.timeout = timeout_seconds
        #: After a failure the store is skipped (every lookup a miss) for this long, so a dead
        #: Redis costs each request nothing rather than a timeout; then it is tried again.
        self.retry_seconds = retry_seconds
        self._down_until = 0.0
        self._down = False
        self._pending: set[asyncio.Task[None]] = set()

    # --- request side -----------------------------------------------------------------------

    async def recall(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored texts for ``keys`` (missing ones absent); ``{}`` if the store failed."""
        if not keys or self._skipping():
            return {}
        try:
            async with asyncio.timeout(self.timeout):
                found = await self.store.get_many(keys)
        except STORE_ERRORS as exc:
            self._failed("get", exc)
            return {}
        self._recovered()
        return found

    # --- response side ----------------------------------------------------------------------

    def observer_for(
        self,
        scope: str,
        content_type: str,
        encoding: str,
        kind: type[BodyObserver] = ResponseObserver,
        on_limit: OnLimit | None = None,
    ) -> BodyObserver | None:
        """An observer of ``kind`` (the request's API's, ``proxy.relay.served``) for a 200 response,
        or ``None`` for a body it cannot read (a compression other than
        gzip or deflate). ``on_limit`` hears of a response past the observer's bounds."""
        if encoding not in READABLE_ENCODINGS:
            return None
        stream = content_type == "text/event-stream"
        return kind(self.record, scope, stream=stream, encoding=encoding, on_limit=on_limit)

    def record(self, key: str, text: str) -> asyncio.Task[None] | None:
        """Store one turn's reasoning now: the memory store synchronously; Redis in a task the
        proxy awaits (``settle``) before it ends the response, so the client cannot send its next
        turn before the write."""
        if isinstance(self.store, MemoryStore):
            if self.store.set(key, text):
                self._count("stored")
            return None
        if self._skipping():
            return None
        task = asyncio.get_running_loop().create_task(self._put(key, text))
        self._pending.add(task)  # a reference, or the loop may drop the task
        task.add_done_callback(self._pending.discard)
        return task

    async def _put(self, key: str, text: str) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                await self.store.put(key, text)
        except STORE_ERRORS as exc:
            self._failed("put", exc)
            return
        self._recovered()
        self._count("stored")

    async def settle(self, tasks: Sequence[asyncio.Task[None]] | None = None) -> None:
        """Wait for ``tasks`` (default: every write in flight), each bounded by the timeout."""
        waiting = list(self._pending if tasks is None else tasks)
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)

    async def close(self) -> None:
        await self.settle()
        await self.store.close()

    # --- failure policy ---------------------------------------------------------------------

    def _skipping(self) -> bool:
        return self._down and time.monotonic() < self._down_until

    def _failed(self, operation: str, exc: BaseException) -> None:
        self._down_until = time.monotonic() + self.retry_seconds
        if self.metrics is not None:
            self.metrics.reasoning_store_errors.labels(self.store.name, operation).inc()
        if not self._down:
            self._down = True
            log.warning(
                "reasoning_store_unavailable",
                store=self.store.name,
                url=getattr(self.store, "url", None),
                operation=operation,
                error=type(exc).__name__,
            )

    def _recovered(self) -> None:
        if self._down:
            self._down = False
            log.info("reasoning_store_recovered", store=self.store.name)

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.reasoning.labels(outcome).inc()


def build_stash(config: ReasoningConfig, metrics: Metrics | None = None) -> Stash | None:
    """The stash the config asks for, or ``None`` for ``store: off``."""
    store: Any
    if config.store == "off":
        return None
    if config.store == "redis":
        redis_config = config.redis
        store = RedisStore(
            redis_config.url,
            prefix=redis_config.prefix,
            ttl_seconds=config.ttl_seconds,
            timeout_seconds=redis_config.timeout_seconds,
        )
        return Stash(store, metrics, timeout_seconds=redis_config.timeout_seconds * 2)
    store = MemoryStore(config.max_bytes, config.ttl_seconds)
    return Stash(store, metrics)


__all__ = ["STORE_ERRORS", "MemoryStore", "RedisStore", "Stash", "Store", "build_stash"]
