"""The embedded reasoning store: an in-process LRU bounded in bytes, with a TTL; never persisted."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

#: What one entry costs besides its text: the key (64 hex digits), the tuple, the dict slot.
ENTRY_OVERHEAD = 200


class MemoryStore:
    """Least recently used entries go first once ``max_bytes`` (UTF-8 text plus a fixed overhead
    per entry) would be exceeded; an entry older than ``ttl_seconds`` is a miss. Every operation
    is O(1) per key. ``clock`` is injectable for tests (monotonic seconds)."""

    name = "memory"

    def __init__(
        self,
        max_bytes: int,
        ttl_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes = max_bytes
        self.ttl = ttl_seconds
        self.clock = clock
        self.bytes = 0
        #: key -> (text, expiry, size), least recently used first.
        self._entries: OrderedDict[str, tuple[str, float, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def set(self, key: str, text: str) -> bool:
        """Store ``text`` under ``key`` (synchronously); ``False`` if it alone exceeds the
        bound."""
        size = len(text.encode("utf-8", "surrogatepass")) + len(key) + ENTRY_OVERHEAD
        if size > self.max_bytes:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[2]
        now = self.clock()
        entries = self._entries
        # Expired entries at the cold end go first, then the least recently used.
        while entries:
            first = next(iter(entries.values()))
            if first[1] > now:
                break
            _, (_, _, dropped) = entries.popitem(last=False)
            self.bytes -= dropped
        while entries and self.bytes + size > self.max_bytes:
            _, (_, _, dropped) = entries.popitem(last=False)
            self.bytes -= dropped
        entries[key] = (text, now + self.ttl, size)
        self.bytes += size
        return True

    def get(self, key: str) -> str | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self.clock():
            del self._entries[key]
            self.bytes -= entry[2]
            return None
        self._entries.move_to_end(key)
        return entry[0]

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for key in keys:
            text = self.get(key)
            if text is not None:
                found[key] = text
        return found

    async def put(self, key: str, text: str) -> None:
        self.set(key, text)

    async def close(self) -> None:
        self._entries.clear()
        self.bytes = 0
