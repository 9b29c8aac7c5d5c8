"""A history stored twice: finding a block replayed right after itself, on meaning, within a
work budget. Shared by replayed-history (chat ``messages``) and responses-replayed-history
(Responses ``input``); each gives its own item key, anchors and carry."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from rules.engine.base import Change, Outcome, RuleContext, WorkBudgetExceeded

#: Fields an agent stamps on a message that say nothing about what was said.
SIDECAR_FIELDS = frozenset(
    {"api_content", "timestamp", "reasoning", "reasoning_content", "finish_reason"}
)


#: Per-turn counter ids (Kimi: ``functions.bash:0``) recur by design: they are no signal.
_COUNTER_ID = re.compile(r"(?:functions\.)?[\w.-]*:\d+")


#: The work budget per call: units (a pair of equal anchors tried, a key compared while
#: extending a run) per item, over a floor. A doubled history costs a few units per item; a
#: hostile one (one id reused by thousands of turns) would cost a quadratic walk without it.
WORK_PER_ITEM = 32


WORK_FLOOR = 65_536


#: Earlier twins (same anchor id, same key) an item is paired with, nearest first: a bound on
#: detection, not on the budget. A replayed block's twin is among the nearest unless one
#: identical call (same id, same arguments) recurs more often than this inside the block.
MAX_TWINS = 32


#: How the token estimate is computed, logged next to it.
ESTIMATE = "serialized characters / 4"


Key = Callable[[Any], bytes]


Anchors = Callable[[Any], Iterable[str]]


#: What a kept item takes from its removed twin: the kept item, updated or as it is.
Carry = Callable[[Any, Any], Any]


def canonical(value: Any) -> bytes:
    """Sorted-key JSON of ``value`` (its repr if it is not JSON-serializable)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # a lone surrogate, an int over 64 bits: compare by repr instead
        return repr(value).encode("utf-8", "surrogatepass")


def normalize_text(text: Any) -> Any:
    """A string with every run of whitespace made one space and the ends stripped."""
    return " ".join(text.split()) if isinstance(text, str) else text


def normalize_content(content: Any) -> Any:
    """Content with whitespace normalized in a string, or in each part's ``text``."""
    if isinstance(content, list):
        return [
            {**part, "text": normalize_text(part["text"])}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    return normalize_text(content)


def canonical_arguments(arguments: Any) -> Any:
    """Arguments as parsed JSON when they are a JSON string (so key order and spacing do not
    matter), else as they are."""
    if isinstance(arguments, str):
        try:
            return orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return normalize_text(arguments)
    return arguments


def meaning_key(
    item: Any, ignored: frozenset[str], normalize: Mapping[str, Callable[[Any], Any]]
) -> bytes:
    """``item`` as bytes, without its ``ignored`` fields, each field through its ``normalize``
    function: two items with the same key say the same."""
    if not isinstance(item, dict):
        return canonical(item)
    meaning = {
        field: normalize[field](value) if field in normalize else value
        for field, value in item.items()
        if field not in ignored
    }
    return canonical(meaning)


def is_signal(call_id: Any) -> bool:
    """A usable id that is not a per-turn counter."""
    return isinstance(call_id, str) and bool(call_id) and not _COUNTER_ID.fullmatch(call_id)


def collapse_replays(
    items: list[Any],
    name: str,
    key: Key,
    anchors: Anchors,
    ctx: RuleContext,
    *,
    carry: Carry | None = None,
) -> Outcome:
    """Remove every block of ``items`` that is replayed right after itself, keeping the replay.

    A block [s, s+d) is a replay candidate only around two positions with equal keys that share
    an anchor id (``anchors``), d apart; it is collapsed when every item of [s, s+d) has the key
    of the item d later. A run of k copies of one block goes down to its last copy at once (one
    Change per removed copy, its index in ``items`` as the rule received them), and the scan
    resumes where the kept copy starts, never from index 0: the items before it are unchanged,
    so their index entries still hold. ``carry(kept, removed)`` gives each kept item what its
    removed twin had and it lacks (a new item, or ``kept`` itself).

    The work (pairs tried, keys compared) is bounded by ``work_budget(len(items))``; past it
    the rule raises ``WorkBudgetExceeded`` and is skipped (the body goes as it came).
    """
    if not _repeats(items, anchors):
        return Outcome(items)  # no anchor id occurs twice: nothing can be a replay
    scan = _Scan([key(item) for item in items], anchors, work_budget(len(items)))
    return _collapse(items, name, anchors, scan, carry=carry)


def _collapse(
    items: list[Any],
    name: str,
    anchors: Anchors,
    scan: _Scan,
    *,
    carry: Carry | None,
    offset: int = 0,
) -> Outcome:
    """``collapse_replays`` with its scan; ``offset``: how many items came before ``items``
    (counted in the changes' ``kept_from``)."""
    current = list(items)
    origin = list(range(len(items)))  # current position -> position in ``items``
    changes: list[Change] = []
    later = 0
    while later < len(current):
        found = scan.square_at(current, later)
        if found is None:
            later += 1
            continue
        start, length, copies = found
        for copy in range(copies - 1):
            first = start + copy * length
            detail = _collapsed(current, first, length, origin=origin, anchors=anchors, carry=carry)
            detail["kept_from"] += offset
            changes.append(Change(name, origin[first], "collapsed_replay", detail))
        gone = (copies - 1) * length
        del current[start : start + gone], origin[start : start + gone]
        scan.remove(start, gone)
        later = start
    if not changes:
        return Outcome(items)
    return Outcome(current, tuple(changes))


#: What a replay scan carries past a list (``resume_replays``): how many items it read, the
#: anchor ids they hold, the work spent, and whether a block was still open at their end.
ReplayState = tuple[int, frozenset[str], int, bool]


def resume_replays(
    items: list[Any],
    name: str,
    key: Key,
    anchors: Anchors,
    ctx: RuleContext,
    *,
    before: ReplayState | None,
    carry: Carry | None = None,
) -> tuple[Outcome, ReplayState] | None:
    """``collapse_replays`` over ``items`` that follow others ``before`` describes (``None``: the
    list's start), and the same after them. A replayed block is decided when it ends: ``None``
    when a block was still open at the end of those (it may go on here), when an item here
    shares an anchor id with one of them (it may pair with it), or when a block found here may
    begin before (its start reached the first item here). The work budget is the whole list's,
    less what was spent before."""
    offset, seen, spent, was_open = (0, frozenset(), 0, False) if before is None else before
    if was_open and items:
        return None
    own = frozenset(a for item in items for a in anchors(item))
    if before is not None and not own.isdisjoint(seen):
        return None
    after_seen = seen | own if own else seen
    if not _repeats(items, anchors):
        return Outcome(items), (offset + len(items), after_seen, spent, False)
    scan = _Scan([key(item) for item in items], anchors, work_budget(offset + len(items)))
    scan.spent = spent
    outcome = _collapse(items, name, anchors, scan, carry=carry, offset=offset)
    if before is not None and scan.reached:
        return None
    return outcome, (offset + len(items), after_seen, scan.spent, scan.open)


def _repeats(items: list[Any], anchors: Anchors) -> bool:
    """Some anchor id occurs twice in ``items``."""
    seen: set[str] = set()
    for item in items:
        for anchor in anchors(item):
            if anchor in seen:
                return True
            seen.add(anchor)
    return False


def _collapsed(
    current: list[Any],
    first: int,
    length: int,
    *,
    origin: list[int],
    anchors: Anchors,
    carry: Carry | None,
) -> dict[str, Any]:
    """The Change detail of the copy ``current[first : first + length]``, removed for the one
    right after it; ``carry`` gives each kept item what its removed twin had (in ``current``)."""
    removed = current[first : first + length]
    chars = sum(len(canonical(item)) for item in removed)
    ids = sorted({a for item in removed for a in anchors(item)})
    detail: dict[str, Any] = {
        "count": length,
        "kept_from": origin[first + length],
        "ids": ids,
        "est_tokens_saved": chars // 4,
        "estimate": ESTIMATE,
    }
    carried = 0
    for offset, twin in enumerate(removed):
        kept = current[first + length + offset]
        updated = kept if carry is None else carry(kept, twin)
        if updated is not kept:
            current[first + length + offset] = updated
            carried += 1
    if carried:
        detail["carried_reasoning"] = carried
    return detail


def work_budget(count: int) -> int:
    """The work units (pairs tried, keys compared) a list of ``count`` items may cost: far
    above any real history's (a few per item), far below a quadratic walk's."""
    return WORK_FLOOR + WORK_PER_ITEM * count


class _Scan:
    """The keys, and an index of the positions scanned so far by (anchor id, key)."""

    __slots__ = ("anchors", "budget", "index", "journal", "keys", "open", "reached", "spent")

    def __init__(self, keys: list[bytes], anchors: Anchors, budget: int) -> None:
        self.keys = keys
        self.anchors = anchors
        self.budget = budget
        self.spent = 0
        #: A pair tried ran to the end of the keys (the block may go on past them), and one ran
        #: back to their start (it may begin before them): ``resume_replays``.
        self.open = False
        self.reached = False
        self.index: dict[tuple[str, bytes], list[int]] = {}
        #: The index lists in the order positions were appended to them (to forget a tail).
        self.journal: list[list[int]] = []

    def spend(self, units: int) -> None:
        self.spent += units
        if self.spent > self.budget:
            raise WorkBudgetExceeded(self.spent)

    def square_at(self, items: list[Any], later: int) -> tuple[int, int, int] | None:
        """(start, length, copies) of the run of a block repeated right after itself that
        ``later`` completes, paired with the earlier positions sharing an anchor id and its key,
        nearest first; ``None`` if none (``later`` is then indexed)."""
        keys = self.keys
        count = len(keys)
        own = keys[later]
        tried: set[int] = set()
        lists: list[list[int]] = []
        for anchor in dict.fromkeys(self.anchors(items[later])):  # one id twice: one anchor
            earlier_list = self.index.setdefault((anchor, own), [])
            lists.append(earlier_list)
            for earlier in earlier_list[: -MAX_TWINS - 1 : -1]:
                if earlier in tried:
                    continue
                tried.add(earlier)
                distance = later - earlier
                start = earlier
                while start > 0 and keys[start - 1] == keys[start - 1 + distance]:
                    start -= 1
                end = earlier + 1
                while end + distance < count and keys[end] == keys[end + distance]:
                    end += 1
                self.open = self.open or end + distance >= count
                self.reached = self.reached or start == 0
                self.spend(end - start)
                if end - start >= distance:
                    return start, distance, (end + distance - start) // distance
        for earlier_list in lists:
            earlier_list.append(later)
            self.journal.append(earlier_list)
        return None

    def remove(self, start: int, gone: int) -> None:
        """Forget the positions from ``start`` on (the scan resumes there) and drop the keys
        of the ``gone`` items removed at ``start``."""
        journal = self.journal
        while journal and journal[-1][-1] >= start:
            journal.pop().pop()
        del self.keys[start : start + gone]
