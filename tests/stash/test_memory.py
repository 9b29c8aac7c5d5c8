"""The in-memory store: bounded in bytes, least recently used out first, a TTL, O(1) per key."""

from __future__ import annotations

from proxy.stash.memory import ENTRY_OVERHEAD, MemoryStore

KEY = "k" * 64


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cost(text: str, key: str = KEY) -> int:
    return len(text.encode()) + len(key) + ENTRY_OVERHEAD


def key(n: int) -> str:
    return f"{n:064d}"


def test_set_and_get_round_trip() -> None:
    store = MemoryStore(10_000, 60)
    assert store.set(KEY, "thought é")
    assert store.get(KEY) == "thought é"
    assert store.bytes == cost("thought é")
    assert store.get("other") is None


def test_the_bound_counts_utf8_bytes_and_evicts_least_recently_used_first() -> None:
    text = "x" * 100
    store = MemoryStore(3 * cost(text, key(0)), 60)
    for n in range(3):
        assert store.set(key(n), text)
    assert store.get(key(0)) == text  # 0 is now the most recently used
    store.set(key(3), text)  # evicts 1, the least recently used
    assert store.get(key(1)) is None
    assert [store.get(key(n)) is not None for n in (0, 2, 3)] == [True, True, True]
    assert store.bytes <= store.max_bytes
    # a multi-byte text costs its UTF-8 size
    store.set(key(4), "é" * 100)
    assert store.bytes <= store.max_bytes and len(store) == 2


def test_an_entry_larger_than_the_bound_is_refused_and_evicts_nothing() -> None:
    store = MemoryStore(cost("a" * 10), 60)
    assert store.set(KEY, "a" * 10)
    assert not store.set(key(1), "b" * 11)
    assert store.get(KEY) == "a" * 10


def test_replacing_a_key_keeps_the_byte_count_exact() -> None:
    store = MemoryStore(10_000, 60)
    store.set(KEY, "a" * 50)
    store.set(KEY, "b" * 10)
    assert store.bytes == cost("b" * 10) and len(store) == 1
    assert store.get(KEY) == "b" * 10


def test_entries_expire_after_the_ttl() -> None:
    clock = Clock()
    store = MemoryStore(10_000, 60, clock=clock)
    store.set(KEY, "thought")
    clock.now += 59.9
    assert store.get(KEY) == "thought"  # reading does not extend the TTL
    clock.now += 0.1
    assert store.get(KEY) is None
    assert store.bytes == 0 and len(store) == 0


def test_expired_entries_at_the_cold_end_go_before_live_ones() -> None:
    clock = Clock()
    text = "x" * 100
    store = MemoryStore(3 * cost(text, key(0)), 60, clock=clock)
    store.set(key(0), text)
    clock.now += 61
    store.set(key(1), text)
    store.set(key(2), text)  # 0 expired: dropped on the way, nothing live is evicted
    assert len(store) == 2
    store.set(key(3), text)
    assert all(store.get(key(n)) == text for n in (1, 2, 3))


async def test_get_many_returns_only_the_hits() -> None:
    store = MemoryStore(10_000, 60)
    await store.put(key(1), "one")
    await store.put(key(2), "two")
    assert await store.get_many([key(1), key(3), key(2)]) == {key(1): "one", key(2): "two"}
    assert await store.get_many([]) == {}
    await store.close()
    assert len(store) == 0
