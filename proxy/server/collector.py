"""The cyclic garbage collector, set for serving: what start-up made is frozen.

A serving process holds what start-up made (the modules, the compiled rules and plans, the
config, the app, aiohttp's and the libraries' own objects: some 70,000 objects the collector
tracks), which lives as long as the process, and each request's objects, freed when the request
ends (a parsed JSON body holds no cycle; an upstream error's frames are dropped,
``proxy.relay.upstream.untraced``). CPython's collector walks every tracked object, start-up's
included, in each full collection: about one every thousand requests, 20-30 ms each, some
20-25 µs of CPU a request on the small clean request (docs/performance.md#collector).

``settle`` collects what is garbage already, then moves everything alive to the permanent
generation (``gc.freeze``): never walked again, still freed by reference counting. It runs once
the app is built, before the server starts; what the server's start-up hooks make after it (the
upstream session, the stash's store, the offload worker's handles: a few thousand objects) is
walked as before. ``thaw`` undoes the freeze when a reload replaces the rules (the old ones may
hold a cycle a frozen generation would keep for ever): the process then walks start-up's objects
again, as before ``settle``, until it restarts. The collector's thresholds stay CPython's: a
higher one for the young generation saved some 10 µs more a request, but let the cycles that
aiohttp's and asyncio's objects still make (a reset connection's transports) and any cycle a
library makes on a path not seen here wait ten times longer.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Freeze what is alive now (the app built, before the server starts), after collecting
    what is garbage already: how many objects were frozen."""
    gc.collect()  # start-up's cycles that are garbage already: not frozen for ever
    gc.freeze()
    return gc.get_freeze_count()


def thaw() -> None:
    """What ``settle`` froze goes back to the collector (after a reload: the rules it replaced
    may be garbage in a cycle)."""
    gc.unfreeze()
