"""The cyclic garbage collector, set for serving: what start-up made is frozen, and the young
generation is collected less often.

A serving process holds two kinds of objects. What start-up made (the modules, the compiled
rules and plans, the config, aiohttp's and the libraries' own: some 70,000 tracked objects)
lives as long as the process. A request's objects (its body parsed, its flow, its answer) die
with it, freed by their reference counts as soon as the request ends; a JSON document holds no
cycle. CPython's collector, left as it is, does not know either: it collects the young
generation each time 700 more tracked objects are alive than at the last collection, which the
parse of one body crosses mid-request, and about every thousand requests it walks every tracked
object, start-up's included: on the small clean request, some 30-35 µs of CPU a request, about a
tenth of chatmend's (docs/performance.md#collector).

``settle`` moves what start-up made to the permanent generation (``gc.freeze``: never walked
again, still freed by reference counting) and collects the young generation after 10,000 more
objects, which the parse of an agent's usual body does not reach: cycles are still collected,
as before, only later. ``thaw`` undoes the freeze when a reload replaces the rules (the old
ones may hold a cycle a frozen generation would keep for ever): the process then walks
start-up's objects again, as before ``settle``, until it restarts.
"""

from __future__ import annotations

import gc
from typing import Final

#: Tracked objects allocated (net) between two collections of the young generation; CPython's
#: default is 700. The older generations keep theirs (10 and 10 collections of the one before).
YOUNG_THRESHOLD: Final = 10_000


def settle() -> int:
    """Freeze what is alive now, once start-up is done and before the first request, and
    collect the young generation less often; how many objects were frozen."""
    gc.collect()  # start-up's cycles that are garbage already: not frozen for ever
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    return gc.get_freeze_count()


def thaw() -> None:
    """What ``settle`` froze goes back to the collector (after a reload: the rules it replaced
    may be garbage in a cycle)."""
    gc.unfreeze()
