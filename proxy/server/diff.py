"""The before/after view of a captured body (the page's ``/chatmend/request/<id>``): what the
rules did, one line per rule, then its list aligned item by item and rendered as HTML, in a
worker process (``proxy.server.page.diff_view``); ``chatmend check`` reads the same places.

``align`` pairs each item of the list before with at most one item of the list after, and says
what became of it (``Pair.kind``): ``same``, ``changed``, ``moved``, ``removed`` or ``added``.
Items are paired in this order of trust:

1. the common start and the common end of the two lists (equal items: the same canonical JSON);
2. anchors: an item whose canonical JSON occurs once in each list, then one whose ``residue``
   does (the item without its movable blocks, a Messages ``tool_use``/``tool_result`` or a chat
   tool call: a user message a result moved into still pairs with itself), then one whose
   identity does (``identity``: a tool-call turn by its first call's id, a tool result by the
   id it answers, a Responses item by its ``call_id`` or ``id``, a Messages turn by its first
   ``tool_use`` id or the ``tool_use_id`` it answers; an id a rule recorded renaming is read as
   the old one), then an identity as many items share on each side, in order (an id reused,
   renamed in its later uses). The longest run of anchors in the same order on both sides is
   the backbone; an anchor out of that order was moved (of two items swapped, the one a rule
   said it moved: ``movers``);
3. beside each backbone pair, equal neighbours on both sides (a run of copies);
4. between two backbone pairs, equal items in order (by whichever greedy pass pairs more: the
   one that walks the list before finds every item of it when items were only inserted, the
   one that walks the list after when items were only removed), then the rest by position
   among items of the same role or type (two user messages merged read as the first changed,
   the next removed).

Then the blocks that moved from one item to another (``moved_blocks``), and where each change
is on both sides (``Places``: a rule's index counts on the list the rules before it left).

Each step is linear in the items (the backbone: ``n log n``, by bisection, in C). ``Budget``
counts the work; past ``WORK_BUDGET`` the view says so and shows the two bodies as they are.
The pairing is explicit (``Pair``: before index, after index, kind, and what paired them), so a
view can show a move as a move and a renamed id beside its old one.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as member
from difflib import SequenceMatcher
from html import escape
from typing import Any, Final

import orjson

#: Units of work an alignment may take (an item keyed, compared, placed or paired is one, a
#: bisection step one): some 110,000 items a side (54,000 when every item moved), about half a
#: second of the worker's time.
WORK_BUDGET: Final = 2_000_000
#: Units each item costs before its alignment starts (its canonical JSON, identity and role,
#: each kept in a list): spent first, so a list far past the budget is refused at once.
KEY_UNITS: Final = 4
#: What the view renders at most, so that what crosses back from the worker (and what the
#: event loop unpickles and writes) stays small: rows (each item pretty-printed) up to
#: ``MAX_ROWS`` or ``MAX_VIEW_CHARS`` of HTML, the rest counted; an item's text up to
#: ``MAX_ITEM_CHARS``; a body shown unaligned up to ``MAX_RAW_BYTES`` a side.
MAX_ROWS: Final = 2000
MAX_VIEW_CHARS: Final = 4 * 1024 * 1024
MAX_ITEM_CHARS: Final = 256 * 1024
MAX_RAW_BYTES: Final = 1024 * 1024

KINDS: Final = ("same", "changed", "moved", "removed", "added")


@dataclass(frozen=True, slots=True)
class Pair:
    """One row of the alignment: an item before, the item it became after, or both."""

    #: ``same``, ``changed``, ``moved`` (paired out of the order of the rest, perhaps changed),
    #: ``removed`` (before only), ``added`` (after only).
    kind: str
    before: int | None
    after: int | None
    #: What paired them: ``equal`` (the same canonical JSON), ``residue`` (the same item but
    #: for its movable blocks), ``id`` (the same identity), ``position`` (the same role or type
    #: in the same place); ``""`` for an unpaired item.
    by: str = ""


class OverBudget(Exception):
    """The alignment would take more than its work budget."""


class Budget:
    """Units of work left (``spend`` raises ``OverBudget`` past zero)."""

    __slots__ = ("left",)

    def __init__(self, units: int = WORK_BUDGET) -> None:
        self.left = units

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise OverBudget


# --- what identifies an item ---------------------------------------------------------------------


def canonical(item: Any) -> bytes:
    """An item's canonical JSON (keys sorted): equal items, equal bytes."""
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def identity(item: Any, renames: Mapping[str, str]) -> tuple[str, str] | None:
    """What identifies ``item`` whatever else changed: the id of its (first) tool call, or of
    the call it answers, or its Responses ``call_id`` or ``id``; ``None`` if it has none. An id
    in ``renames`` (new -> old, as the rules recorded) is read as the old one."""
    if not isinstance(item, dict):
        return None
    if item.get("role") == "tool":
        return _named("result", item.get("tool_call_id"), renames)
    calls = item.get("tool_calls")
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        return _named("call", calls[0].get("id"), renames)
    if "call_id" in item:
        return _named(f"{item.get('type')}", item["call_id"], renames)
    content = item.get("content")
    if isinstance(content, list):
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                return _named("call", block.get("id"), renames)
            if kind == "tool_result":
                return _named("result", block.get("tool_use_id"), renames)
    if "id" in item and "type" in item:
        return _named(f"{item.get('type')}", item["id"], renames)
    return None


def _named(kind: str, value: Any, renames: Mapping[str, str]) -> tuple[str, str] | None:
    if not isinstance(value, str) or not value:
        return None
    return kind, renames.get(value, value)


#: The blocks that may move from one item to another (their item's residue leaves them out):
#: a Messages ``tool_use`` or ``tool_result`` content block, a chat assistant's tool call.
_MOVABLE: Final = ("tool_use", "tool_result")


def blocks(item: Any, renames: Mapping[str, str]) -> list[tuple[str, tuple[str, str], str]]:
    """The blocks of ``item`` that carry an identity: each one's path in the item
    (``content[1]``, ``tool_calls[0]``), its identity (an id in ``renames`` read as the old
    one) and what to call it (``tool_result for toolu_1``)."""
    found: list[tuple[str, tuple[str, str], str]] = []
    if not isinstance(item, dict):
        return found
    calls = item.get("tool_calls")
    if isinstance(calls, list):
        for k, call in enumerate(calls):
            key = _named("call", call.get("id"), renames) if isinstance(call, dict) else None
            if key is not None:
                found.append((f"tool_calls[{k}]", key, f"tool call {call['id']}"))
    content = item.get("content")
    if isinstance(content, list):
        for k, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                key = _named("call", block.get("id"), renames)
                label = f"tool_use {block.get('id')}"
            elif kind == "tool_result":
                key = _named("result", block.get("tool_use_id"), renames)
                label = f"tool_result for {block.get('tool_use_id')}"
            else:
                continue
            if key is not None:
                found.append((f"content[{k}]", key, label))
    return found


def residue(item: Any) -> bytes | None:
    """``item``'s canonical JSON without its movable blocks (a tool call, a ``tool_use`` or
    ``tool_result`` block): what stays of a message whose results moved elsewhere. ``None``
    for an item with no such block (its canonical JSON says as much)."""
    if not isinstance(item, dict):
        return None
    calls, content = item.get("tool_calls"), item.get("content")
    movable = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in _MOVABLE for b in content
    )
    if not movable and not (isinstance(calls, list) and calls):
        return None
    kept = {k: v for k, v in item.items() if k != "tool_calls"}
    if movable and isinstance(content, list):
        kept["content"] = [
            b for b in content if not (isinstance(b, dict) and b.get("type") in _MOVABLE)
        ]
    return canonical(kept)


def role(item: Any) -> str:
    """What kind of item it is, for pairing by position: its role, or its type."""
    if isinstance(item, dict):
        for key in ("role", "type"):
            value = item.get(key)
            if isinstance(value, str):
                return value
    return type(item).__name__


# --- the alignment -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Sides:
    """The two lists' keys, and the pairing as it is built."""

    a: Sequence[bytes]
    b: Sequence[bytes]
    to_b: list[int]
    to_a: list[int]
    by: list[str]
    moved: list[bool]

    def pair(self, i: int, j: int, how: str) -> None:
        self.to_b[i], self.to_a[j], self.by[i] = j, i, how


def align(
    a: Sequence[bytes],
    b: Sequence[bytes],
    ids: tuple[Sequence[Hashable | None], Sequence[Hashable | None]] | None = None,
    roles: tuple[Sequence[str], Sequence[str]] | None = None,
    budget: Budget | None = None,
    *,
    residues: tuple[Sequence[bytes | None], Sequence[bytes | None]] | None = None,
    movers: frozenset[int] = frozenset(),
) -> list[Pair]:
    """The items before (their canonical JSON ``a``) paired with the items after (``b``), in the
    order the view shows them: each item of each side exactly once, the pairs that are not
    ``moved`` increasing on both sides (see the module's docstring). ``ids`` and ``roles``:
    each item's identity and role, per side (none, and one role, if not given); ``residues``:
    each item's canonical JSON without the blocks that may move between items (``residue``);
    ``movers``: the items before a rule said it moved, read as the moved ones of a reordering
    that could be told either way (two items swapped: either one moved)."""
    budget = budget or Budget()
    n, m = len(a), len(b)
    budget.spend(n + m)
    ids = ids or ([None] * n, [None] * m)
    roles = roles or ([""] * n, [""] * m)
    sides = _Sides(a, b, [-1] * n, [-1] * m, [""] * n, [False] * n)
    start = 0
    while start < n and start < m and a[start] == b[start]:
        sides.pair(start, start, "equal")
        start += 1
    end = 0
    while end < n - start and end < m - start and a[n - 1 - end] == b[m - 1 - end]:
        sides.pair(n - 1 - end, m - 1 - end, "equal")
        end += 1
    middle_a, middle_b = range(start, n - end), range(start, m - end)
    for i, j in _unique(a, b, middle_a, middle_b, budget):
        sides.pair(i, j, "equal")
    if residues is not None:
        rest_a = [i for i in middle_a if sides.to_b[i] < 0 and residues[0][i] is not None]
        rest_b = [j for j in middle_b if sides.to_a[j] < 0 and residues[1][j] is not None]
        for i, j in _unique(residues[0], residues[1], rest_a, rest_b, budget):
            sides.pair(i, j, "residue")
    open_a = [i for i in middle_a if sides.to_b[i] < 0 and ids[0][i] is not None]
    open_b = [j for j in middle_b if sides.to_a[j] < 0 and ids[1][j] is not None]
    for i, j in _unique(ids[0], ids[1], open_a, open_b, budget):
        sides.pair(i, j, "id")
    _ids_in_order(sides, ids, middle_a, middle_b, budget)
    anchored = [i for i in middle_a if sides.to_b[i] >= 0 and i not in movers]
    budget.spend(len(anchored) * max(1, len(anchored).bit_length()))
    for i, kept in zip(anchored, _increasing([sides.to_b[i] for i in anchored]), strict=True):
        sides.moved[i] = not kept
    if movers:
        _place_movers(sides, [i for i in middle_a if sides.to_b[i] >= 0], movers, budget)
    _extend(sides, budget)
    _fill_gaps(sides, roles, budget)
    return _rows(sides, budget)


def _ids_in_order(
    sides: _Sides,
    ids: tuple[Sequence[Hashable | None], Sequence[Hashable | None]],
    among_a: range,
    among_b: range,
    budget: Budget,
) -> None:
    """An identity as many items share on each side (an id reused, renamed in its later
    uses): its k-th item before paired with its k-th item after, when both are still free
    (the first use kept its name, the later ones were renamed in order)."""
    budget.spend(2 * len(among_a) + len(among_b))
    after: dict[Hashable, list[int]] = {}
    for j in among_b:
        if ids[1][j] is not None:
            after.setdefault(ids[1][j], []).append(j)
    before = Counter(ids[0][i] for i in among_a if ids[0][i] is not None)
    seen: Counter[Hashable] = Counter()
    for i in among_a:
        key = ids[0][i]
        if key is None or len(after.get(key, ())) != before[key]:
            continue
        j = after[key][seen[key]]
        seen[key] += 1
        if sides.to_b[i] < 0 and sides.to_a[j] < 0:
            sides.pair(i, j, "id")


def _place_movers(
    sides: _Sides, anchored: list[int], movers: frozenset[int], budget: Budget
) -> None:
    """Each anchored item of ``movers`` kept in order only if it fits between the kept anchors
    around it (the others were laid out without it); else moved."""
    budget.spend(2 * len(anchored))
    to_b, moved = sides.to_b, sides.moved
    upper: dict[int, int] = {}  # a mover -> the partner of the next kept non-mover
    bound = len(sides.to_a)
    for i in reversed(anchored):
        if i in movers:
            upper[i] = bound
        elif not moved[i]:
            bound = to_b[i]
    lower = -1
    for i in anchored:
        if i in movers:
            moved[i] = not lower < to_b[i] < upper[i]
        if not moved[i]:
            lower = to_b[i]


def _unique(
    a: Sequence[Hashable | None],
    b: Sequence[Hashable | None],
    among_a: Sequence[int],
    among_b: Sequence[int],
    budget: Budget,
) -> list[tuple[int, int]]:
    """The pairs ``(i, j)`` whose key occurs once among ``among_a`` and once among ``among_b``,
    in the order of ``i``."""
    budget.spend(2 * len(among_a) + len(among_b))
    seen: dict[Hashable, list[int]] = {}  # key -> [count before, count after, index after]
    for i in among_a:
        seen.setdefault(a[i], [0, 0, -1])[0] += 1
    for j in among_b:
        counts = seen.get(b[j])
        if counts is not None:
            counts[1] += 1
            counts[2] = j
    pairs = []
    for i in among_a:
        counts = seen[a[i]]
        if counts[0] == 1 and counts[1] == 1:
            pairs.append((i, counts[2]))
    return pairs


def _increasing(values: Sequence[int]) -> list[bool]:
    """Which of ``values`` (distinct) make a longest increasing run (patience sorting)."""
    tails: list[int] = []  # tails[k]: the least last value of an increasing run of k + 1
    tail_at: list[int] = []  # where that value is
    back = [-1] * len(values)
    for position, value in enumerate(values):
        k = bisect_left(tails, value)
        if k == len(tails):
            tails.append(value)
            tail_at.append(position)
        else:
            tails[k], tail_at[k] = value, position
        back[position] = tail_at[k - 1] if k else -1
    kept = [False] * len(values)
    at = tail_at[-1] if tail_at else -1
    while at >= 0:
        kept[at] = True
        at = back[at]
    return kept


def _extend(sides: _Sides, budget: Budget) -> None:
    """Pair equal neighbours of each pair in order, forward then backward (a run of copies
    beside an anchor)."""
    a, b, to_b, to_a, moved = sides.a, sides.b, sides.to_b, sides.to_a, sides.moved
    n, m = len(a), len(b)
    budget.spend(2 * n)
    for i in range(n - 1):
        j = to_b[i]
        free = 0 <= j < m - 1 and not moved[i] and to_b[i + 1] < 0 and to_a[j + 1] < 0
        if free and a[i + 1] == b[j + 1]:
            sides.pair(i + 1, j + 1, "equal")
    for i in range(n - 1, 0, -1):
        j = to_b[i]
        free = j > 0 and not moved[i] and to_b[i - 1] < 0 and to_a[j - 1] < 0
        if free and a[i - 1] == b[j - 1]:
            sides.pair(i - 1, j - 1, "equal")


def _fill_gaps(sides: _Sides, roles: tuple[Sequence[str], Sequence[str]], budget: Budget) -> None:
    """Between two pairs in order: equal items in order, then the rest by position and role."""
    to_b, to_a, moved = sides.to_b, sides.to_a, sides.moved
    n, m = len(to_b), len(to_a)
    chain = [(i, to_b[i]) for i in range(n) if to_b[i] >= 0 and not moved[i]]
    previous = (-1, -1)
    for i_next, j_next in [*chain, (n, m)]:
        i_prev, j_prev = previous
        previous = (i_next, j_next)
        budget.spend(2 * (i_next - i_prev + j_next - j_prev))
        befores = [i for i in range(i_prev + 1, i_next) if to_b[i] < 0]
        afters = [j for j in range(j_prev + 1, j_next) if to_a[j] < 0]
        if not befores or not afters:
            continue
        _equal_in_order(sides, befores, afters)
        # Between the equal pairs just made, what is left pairs by position and role.
        pending: list[int] = []
        cursor = j_prev + 1
        for i in [*befores, i_next]:
            j = to_b[i] if i < i_next else j_next
            if j < 0:
                pending.append(i)
                continue
            _by_position(sides, roles, pending, [y for y in range(cursor, j) if to_a[y] < 0])
            pending, cursor = [], j + 1


def _equal_in_order(sides: _Sides, befores: list[int], afters: list[int]) -> None:
    """Equal items paired in order, by whichever greedy pass pairs more: each item before with
    the first equal one after (every item before is paired when the list before is a
    subsequence of the list after: items were only inserted), or each item after with the first
    equal one before (items were only removed)."""
    forward = _in_order(sides.a, sides.b, befores, afters)
    backward = _in_order(sides.b, sides.a, afters, befores)
    found = forward if len(forward) >= len(backward) else [(i, j) for j, i in backward]
    for i, j in found:
        sides.pair(i, j, "equal")


def _in_order(
    keys: Sequence[bytes], other: Sequence[bytes], order: list[int], among: list[int]
) -> list[tuple[int, int]]:
    """Each of ``order`` paired with the first equal item of ``among`` after the last one
    paired (linear: each position of ``among`` is queued and dropped once)."""
    where: dict[bytes, deque[int]] = {}
    for y in among:
        where.setdefault(other[y], deque()).append(y)
    found = []
    last = -1
    for x in order:
        queue = where.get(keys[x])
        while queue and queue[0] <= last:
            queue.popleft()
        if queue:
            last = queue.popleft()
            found.append((x, last))
    return found


def _by_position(
    sides: _Sides, roles: tuple[Sequence[str], Sequence[str]], befores: list[int], afters: list[int]
) -> None:
    """Items in order, paired when their roles agree; an item whose role comes later on the
    other side waits for it (the items passed over were added)."""
    if not befores or not afters:
        return
    left = Counter(roles[1][j] for j in afters)
    x = y = 0
    while x < len(befores) and y < len(afters):
        i, j = befores[x], afters[y]
        if roles[0][i] == roles[1][j]:
            sides.pair(i, j, "position")
            left[roles[1][j]] -= 1
            x, y = x + 1, y + 1
        elif left[roles[0][i]] > 0:
            left[roles[1][j]] -= 1
            y += 1
        else:
            x += 1


def _rows(sides: _Sides, budget: Budget) -> list[Pair]:
    """The pairs in the order the view shows them: by the list after, an item removed where it
    was, a moved one where it went."""
    a, b, to_b, to_a, by, moved = sides.a, sides.b, sides.to_b, sides.to_a, sides.by, sides.moved
    budget.spend(len(a) + len(b))
    rows: list[Pair] = []
    i = 0
    for j, k in enumerate(to_a):
        if k < 0:
            rows.append(Pair("added", None, j))
            continue
        if moved[k]:
            rows.append(Pair("moved", k, j, by[k]))
            continue
        while i < k:
            if to_b[i] < 0:
                rows.append(Pair("removed", i, None))
            i += 1
        rows.append(Pair("same" if a[k] == b[j] else "changed", k, j, by[k]))
        i = k + 1
    rows.extend(Pair("removed", x, None) for x in range(i, len(a)) if to_b[x] < 0)
    return rows


def pairs(
    before: Sequence[Any],
    after: Sequence[Any],
    renames: Mapping[str, str] | None = None,
    budget: Budget | None = None,
    movers: frozenset[int] = frozenset(),
) -> list[Pair]:
    """Two lists of items aligned (``align``), each item keyed by its canonical JSON, its
    identity (an id of the list after read through ``renames``, new -> old), its role and its
    residue; ``movers``: the items before that a rule said it moved."""
    budget = budget or Budget()
    budget.spend(KEY_UNITS * (len(before) + len(after)))
    keys = [canonical(x) for x in before], [canonical(x) for x in after]
    ids = [identity(x, {}) for x in before], [identity(x, renames or {}) for x in after]
    kinds = [role(x) for x in before], [role(x) for x in after]
    rests = (
        [residue(x) or key for x, key in zip(before, keys[0], strict=True)],
        [residue(x) or key for x, key in zip(after, keys[1], strict=True)],
    )
    return align(keys[0], keys[1], ids, kinds, budget, residues=rests, movers=movers)


@dataclass(frozen=True, slots=True)
class Moved:
    """A block that moved from one item to another (``blocks``): what it is, and where it
    was (item before, path) and went (item after, path)."""

    what: str
    before: tuple[int, str]
    after: tuple[int, str]


def moved_blocks(
    before: Sequence[Any],
    after: Sequence[Any],
    rows: Sequence[Pair],
    renames: Mapping[str, str],
    budget: Budget,
) -> list[Moved]:
    """The blocks (``blocks``) found in an item after that is not the partner of the item
    they were in before: blocks of one identity paired in order, side by side."""
    partner = {p.before: p.after for p in rows if p.before is not None}
    where: dict[tuple[str, str], deque[tuple[int, str]]] = {}
    for i, item in enumerate(before):
        found = blocks(item, {})
        budget.spend(1 + len(found))
        for path, key, _ in found:
            where.setdefault(key, deque()).append((i, path))
    moves = []
    for j, item in enumerate(after):
        found = blocks(item, renames)
        budget.spend(1 + len(found))
        for path, key, label in found:
            queue = where.get(key)
            if not queue:
                continue
            i, was = queue.popleft()
            if partner.get(i) != j:
                moves.append(Moved(label, (i, was), (j, path)))
    return moves


# --- what the rules did, and where -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Noted:
    """A change as the view tells it: the rule's ``Change`` with its rule's one-line reason
    and fix safety (read by the page from the rule's record)."""

    rule: str
    index: int
    action: str
    detail: Mapping[str, Any]
    safety: str = ""
    reason: str = ""


#: Where the page links a rule's name: its section of docs/rules.md, which the page serves
#: from the same records (``/chatmend/rules#<rule>``).
RULES_PATH: Final = "/chatmend/rules"
#: Changes a rule's line in the summary names (the rest are counted).
SUMMARY_NAMED: Final = 3
_ID_KEYS: Final = ("tool_use_id", "call_id", "tool_call_id", "id")
#: The actions that rewrite an item where it stands (its fields, its blocks, its parts): a
#: rule whose changes are all such leaves every item at its index, so the next rule counts on
#: the same list. Any other action (an item dropped, merged, inserted or moved, or an action
#: not listed here) may shift what follows. tests/proxy/test_diff.py holds every fixture of
#: every rule to it.
IN_PLACE: Final = frozenset(
    {
        "added_name",
        "added_signature",
        "added_thinking",
        "aligned_name",
        "collapsed_parts",
        "dropped_block",
        "dropped_blocks",
        "dropped_cache_keys",
        "dropped_content",
        "dropped_empty_parts",
        "dropped_invalid_calls",
        "dropped_keys",
        "dropped_markers",
        "dropped_part",
        "dropped_redacted_thinking",
        "dropped_signed_thinking",
        "filled_empty",
        "filled_tool_content",
        "filled_type",
        "recovered_id",
        "renamed_blank_id",
        "renamed_block",
        "renamed_call_id",
        "renamed_functions",
        "renamed_id",
        "renamed_ids",
        "renamed_name",
        "renamed_part",
        "renamed_result_id",
        "rendered_block",
        "rendered_part",
        "repaired_arguments",
        "repaired_input",
        "replaced",
        "replaced_empty_parts",
        "replaced_images",
        "replaced_unrepairable",
        "restored_reasoning",
        "restored_thinking",
        "serialized_object",
        "set_call_id",
        "set_content",
        "set_prefix",
        "trimmed_arguments",
        "trimmed_input",
    }
)


def renames_of(changes: Sequence[Noted]) -> dict[str, str]:
    """The ids the rules recorded renaming, new -> old: the diff pairs an item by its old id."""
    found = {}
    for change in changes:
        old, new = change.detail.get("from"), change.detail.get("to")
        if change.action.endswith("_id") and isinstance(old, str) and isinstance(new, str):
            found[new] = old
    return found


@dataclass(slots=True)
class Places:
    """Where a change's index lands on each side: the alignment's pairs both ways, and which
    items carry each id (top level or in a block)."""

    field: str
    to_after: dict[int, int]
    to_before: dict[int, int]
    ids_after: dict[str, list[int]]
    ids_before: dict[str, list[int]]
    #: The rules whose indices count on the list before: each rule up to the first whose
    #: changes may shift items (an action not ``IN_PLACE``), that one included.
    on_before: frozenset[str]
    #: Per rule and new id, the indices of its renames to it, in order.
    renamed: dict[tuple[str, str], list[int]] = member(default_factory=dict)
    #: For an item before, the items after its blocks moved to (``moved_blocks``).
    moved_to: dict[int, list[int]] = member(default_factory=dict)

    @classmethod
    def of(
        cls,
        field: str,
        rows: Sequence[Pair],
        items: tuple[Sequence[Any], Sequence[Any]],
        changes: Sequence[Noted],
        budget: Budget,
    ) -> Places:
        both = [p for p in rows if p.before is not None and p.after is not None]
        return cls(
            field,
            {p.before: p.after for p in both if p.before is not None and p.after is not None},
            {p.after: p.before for p in both if p.before is not None and p.after is not None},
            _carriers(items[1], budget),
            _carriers(items[0], budget),
            _counting_on_before(changes),
            _renames_by_rule(changes),
        )

    def where(self, change: Noted) -> str:
        """Where ``change`` is, in the coordinates of each side (``before messages[4] ->
        after messages[3]``). A rule's index counts in the list as the rules before it left
        it: a rule after only rules that rewrote items in place (``IN_PLACE``) counts on the
        list before; a later one is found by the id it names, when one item after carries it
        as the change says; else its index is said to count on the list it received."""
        f = self.field
        if change.index < 0:
            return "the request's other keys"
        if change.action.startswith("inserted_"):  # its index: where it went, not an item
            return f"{f}[{change.index}] of the list as {change.rule} received it"
        if change.rule in self.on_before:
            return self._from_before(change.index)
        found = self._by_id(change)
        if found is not None:
            return found
        return f"{f}[{change.index}] of the list as {change.rule} received it"

    def _from_before(self, i: int) -> str:
        j = self.to_after.get(i)
        there = f"after {self.field}[{j}]"
        if j is None:
            went = self.moved_to.get(i)
            there = "not in the body after"
            if went:
                named = ", ".join(f"after {self.field}[{k}]" for k in sorted(set(went)))
                there = f"gone, its blocks moved to {named}"
        return f"before {self.field}[{i}] \u2192 {there}"

    def _from_after(self, j: int) -> str:
        i = self.to_before.get(j)
        was = "new" if i is None else f"before {self.field}[{i}]"
        return f"{was} \u2192 after {self.field}[{j}]"

    def _by_id(self, change: Noted) -> str | None:
        """Where a change is, by the id it names: a renamed id by the rank of the change
        among its rule's renames to that id (a rule renames in list order); another id when
        one item carries it (after; before, for an item the change dropped)."""
        detail = change.detail
        new = detail.get("to") if change.action.endswith("_id") else None
        if isinstance(new, str):
            ranks = self.renamed.get((change.rule, new), [])
            carriers = self.ids_after.get(new, [])
            if len(ranks) == len(carriers) and change.index in ranks:
                return self._from_after(carriers[ranks.index(change.index)])
            return None
        named = [v for k in _ID_KEYS if isinstance(v := detail.get(k), str)]
        gone = change.action.startswith(("dropped_", "removed_"))
        for value in named:
            found = (self.ids_before if gone else self.ids_after).get(value, [])
            if len(found) == 1:
                return self._from_before(found[0]) if gone else self._from_after(found[0])
        return None


#: The actions whose change's index is the item the rule moved (a chat tool result moved to
#: its call, a Responses output moved after its call): the alignment reads that item as the
#: moved one (``align``'s ``movers``).
ITEM_MOVES: Final = frozenset({"moved_result", "moved_item"})


def movers_of(changes: Sequence[Noted]) -> frozenset[int]:
    """The items before that the rules said they moved (their index counting on that list)."""
    on_before = _counting_on_before(changes)
    return frozenset(
        c.index for c in changes if c.index >= 0 and c.rule in on_before and c.action in ITEM_MOVES
    )


def _renames_by_rule(changes: Sequence[Noted]) -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for c in changes:
        new = c.detail.get("to")
        if c.action.endswith("_id") and isinstance(new, str) and c.index >= 0:
            found.setdefault((c.rule, new), []).append(c.index)
    return {key: sorted(indices) for key, indices in found.items()}


def _counting_on_before(changes: Sequence[Noted]) -> frozenset[str]:
    """The rules whose changes' indices count on the list before (see ``Places``)."""
    found: set[str] = set()
    shifted: set[str] = set()  # rules whose changes may have shifted items
    for change in changes:
        if change.index < 0:
            continue
        if change.rule not in found and shifted - {change.rule}:
            break
        found.add(change.rule)
        if change.action not in IN_PLACE:
            shifted.add(change.rule)
    return frozenset(found)


def _carriers(items: Sequence[Any], budget: Budget) -> dict[str, list[int]]:
    """Each id, the items carrying it (their own ``id``/``call_id``/... or a block's)."""
    found: dict[str, list[int]] = {}
    for k, item in enumerate(items):
        ids: set[str] = set()
        if isinstance(item, dict):
            ids.update(v for key in _ID_KEYS if isinstance(v := item.get(key), str))
        for _, key, _ in blocks(item, {}):
            ids.add(key[1])
        budget.spend(1 + len(ids))
        for value in ids:
            found.setdefault(value, []).append(k)
    return found


def _told(change: Noted) -> str:
    """A change's action and the ids it names (``renamed_call_id c1 -> c1_d2``)."""
    old, new = change.detail.get("from"), change.detail.get("to")
    if isinstance(old, str) and isinstance(new, str):
        return f"{change.action} {old} \u2192 {new}"
    named = next((v for k in _ID_KEYS if isinstance(v := change.detail.get(k), str)), None)
    return change.action if named is None else f"{change.action} {named}"


def summary(changes: Sequence[Noted], where: Callable[[Noted], str]) -> Iterator[str]:
    """What changed, one line per rule: its changes (the first ``SUMMARY_NAMED``, where each
    is on both sides), the rule's one-line reason and the link to its section of the docs."""
    per_rule: dict[str, list[Noted]] = {}
    for change in changes:
        per_rule.setdefault(change.rule, []).append(change)
    yield "<ul id='what-changed'>"
    for rule, listed in per_rule.items():
        told = "; ".join(f"{_told(c)} at {where(c)}" for c in listed[:SUMMARY_NAMED])
        if len(listed) > SUMMARY_NAMED:
            told += f"; and {len(listed) - SUMMARY_NAMED} more"
        reason = listed[0].reason
        link = f"{RULES_PATH}#{rule}"
        yield (
            f"<li class='rule'><a href='{escape(link)}'><code>{escape(rule)}</code></a> "
            f"({len(listed)}): {escape(told)}"
            + (f" <span class='why'>Why: {escape(reason)}</span>" if reason else "")
            + "</li>"
        )
    yield "</ul>"


def changes_table(changes: Sequence[Noted], where: Callable[[Noted], str]) -> Iterator[str]:
    """Every change listed: its rule, where it is on each side, its action, safety, detail."""
    yield (
        "<h3>Changes</h3><table id='changes'><tr><th>rule</th><th>where (before \u2192 after)"
        "</th><th>action</th><th>safety</th><th>detail</th></tr>"
    )
    for change in changes:
        detail = orjson.dumps(dict(change.detail), default=str).decode()
        yield (
            f"<tr><td><a href='{RULES_PATH}#{escape(change.rule)}'>{escape(change.rule)}</a>"
            f"</td><td>{escape(where(change))}</td><td>{escape(change.action)}</td>"
            f"<td>{escape(change.safety)}</td><td><code>{escape(detail)}</code></td></tr>"
        )


def received(change: Noted) -> str:
    """Where a change is when the bodies were not captured: its index, on the list its rule
    received (the list after the rules before it)."""
    if change.index < 0:
        return "the request's other keys"
    return f"index {change.index} of the list as {change.rule} received it"


# --- the view (in a worker process) ----------------------------------------------------------


def view(
    before: bytes,
    after: bytes,
    field: str,
    changes: Sequence[Noted] = (),
    units: int = WORK_BUDGET,
) -> bytes:
    """The view's HTML for a body captured before and after: what changed (one line per rule,
    each index said on both sides), its ``field`` list aligned item by item, and the changes
    listed; or the two bodies as they are (with the reason) when they cannot be aligned
    within ``units`` of work."""
    sides = _parsed(before, field), _parsed(after, field)
    if sides[0] is None or sides[1] is None:
        return _unaligned(before, after, "they are not JSON objects", changes)
    (items_a, rest_a), (items_b, rest_b) = sides[0], sides[1]
    renames = renames_of(changes)
    try:
        budget = Budget(units)
        rows = pairs(items_a, items_b, renames, budget, movers_of(changes))
        moves = moved_blocks(items_a, items_b, rows, renames, budget)
        places = Places.of(field, rows, (items_a, items_b), changes, budget)
        for move in moves:
            places.moved_to.setdefault(move.before[0], []).append(move.after[0])
        parts = [
            *summary(changes, places.where),
            *_aligned(
                field,
                rows,
                (items_a, items_b),
                (rest_a, rest_b),
                moves=moves,
                renames=renames,
                budget=budget,
            ),
            *changes_table(changes, places.where),
            "</table>",
        ]
        return "".join(parts).encode()
    except OverBudget:
        reason = (
            f"aligning {len(items_a)} and {len(items_b)} items would take more than the work "
            f"budget ({units:,} units)"
        )
        return _unaligned(before, after, reason, changes)
    except orjson.JSONEncodeError:  # nested past orjson's 255 levels: it cannot write them
        return _unaligned(before, after, "they nest deeper than the alignment can read", changes)


def _unaligned(before: bytes, after: bytes, reason: str, changes: Sequence[Noted]) -> bytes:
    parts = [*summary(changes, received), _raw(before, after, reason)]
    return "".join([*parts, *changes_table(changes, received), "</table>"]).encode()


def _parsed(body: bytes, field: str) -> tuple[list[Any], dict[str, Any]] | None:
    """A body's list (``messages``, ``input``) and its other keys, or ``None`` if not JSON."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    items = parsed.get(field)
    rest = {k: v for k, v in parsed.items() if k != field}
    return (items if isinstance(items, list) else []), rest


def _raw(before: bytes, after: bytes, reason: str) -> str:
    return (
        f"<h3>Bodies</h3><p id='unaligned'>Shown as they are, not aligned: {escape(reason)}.</p>"
        "<table id='diff'><tr><th>before</th><th>after</th></tr>"
        f"<tr><td><pre>{_text(before)}</pre></td><td><pre>{_text(after)}</pre></td></tr></table>"
    )


def _text(body: bytes) -> str:
    """A body as text, escaped, its first ``MAX_RAW_BYTES`` only."""
    shown = escape(body[:MAX_RAW_BYTES].decode("utf-8", "replace"))
    if len(body) > MAX_RAW_BYTES:
        shown += f"\n... ({len(body) - MAX_RAW_BYTES:,} more bytes not shown)"
    return shown


@dataclass(frozen=True, slots=True)
class _Notes:
    """What a row says beside its items: the blocks that moved out of an item before or into
    an item after, and the ids renamed (new -> old)."""

    out_of: Mapping[int, list[str]]
    into: Mapping[int, list[str]]
    renames: Mapping[str, str]


def _notes(field: str, moves: Sequence[Moved], renames: Mapping[str, str]) -> _Notes:
    out_of: dict[int, list[str]] = {}
    into: dict[int, list[str]] = {}
    for move in moves:
        (i, was), (j, now) = move.before, move.after
        out_of.setdefault(i, []).append(f"{was} ({move.what}) moved to after {field}[{j}].{now}")
        into.setdefault(j, []).append(
            f"{now} ({move.what}) moved here from before {field}[{i}].{was}"
        )
    return _Notes(out_of, into, renames)


def _aligned(
    field: str,
    rows: list[Pair],
    items: tuple[list[Any], list[Any]],
    rest: tuple[dict[str, Any], dict[str, Any]],
    *,
    moves: Sequence[Moved],
    renames: Mapping[str, str],
    budget: Budget,
) -> Iterator[str]:
    counts = Counter(pair.kind for pair in rows)
    told = [f"{counts[kind]} {kind}" for kind in KINDS if counts[kind]]
    if moves:
        told.append(f"{len(moves)} block{'s' if len(moves) > 1 else ''} moved between items")
    yield f"<h3>Body before and after, by <code>{escape(field)}</code> item</h3>"
    yield (
        f"<p id='summary'>{len(items[0])} items before, {len(items[1])} after: "
        f"{escape(', '.join(told))}. Indices count on the side they name.</p>"
    )
    yield "<table id='diff'><tr><th>before</th><th>after</th></tr>"
    kind = "same" if rest[0] == rest[1] else "changed"
    yield _row(kind, *_cells(("other keys", "other keys"), kind, rest[0], rest[1], budget=budget))
    notes = _notes(field, moves, renames)
    written = shown = 0
    for pair in rows[:MAX_ROWS]:
        if written > MAX_VIEW_CHARS:
            break
        row = _pair_row(field, pair, items, notes, budget)
        written += len(row)
        shown += 1
        yield row
    if shown < len(rows):
        cut = f"Only the first {shown} of {len(rows)} rows are shown."
        yield f"<tr><td colspan='2'>{cut}</td></tr>"
    yield "</table>"


def _pair_row(
    field: str, pair: Pair, items: tuple[list[Any], list[Any]], notes: _Notes, budget: Budget
) -> str:
    i, j, kind = pair.before, pair.after, pair.kind
    left = right = ""
    if i is not None and j is not None:
        labels = (f"before {field}[{i}]", f"after {field}[{j}]")
        heads = (kind, kind)
        if kind == "moved":
            heads = (f"moved: now after {field}[{j}]", f"moved: was before {field}[{i}]")
        renamed = _renamed(items[0][i], items[1][j], notes.renames)
        left, right = _cells(
            labels, heads, items[0][i], items[1][j], renamed=renamed, budget=budget
        )
        left += _said(notes.out_of.get(i))
        right += _said(notes.into.get(j))
    elif i is not None:
        left = _cell(f"before {field}[{i}]", kind, _pretty(items[0][i]))
        left += _said(notes.out_of.get(i))
    elif j is not None:
        right = _cell(f"after {field}[{j}]", kind, _pretty(items[1][j]))
        right += _said(notes.into.get(j))
    return _row(kind, left, right)


def _said(lines: list[str] | None) -> str:
    if not lines:
        return ""
    return "".join(f"<div class='note moved-block'>{escape(line)}</div>" for line in lines)


def _renamed(a: Any, b: Any, renames: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The renames (old, new) an item after carries whose old id its partner before holds."""
    if not renames:
        return ()
    new_ids = {key[1] for _, key, _ in blocks(b, {})}
    if isinstance(b, dict):
        new_ids.update(v for k in _ID_KEYS if isinstance(v := b.get(k), str))
    old_ids = {key[1] for _, key, _ in blocks(a, {})}
    if isinstance(a, dict):
        old_ids.update(v for k in _ID_KEYS if isinstance(v := a.get(k), str))
    return tuple((renames[new], new) for new in sorted(new_ids) if renames.get(new) in old_ids)


def _row(kind: str, left: str, right: str) -> str:
    """A row: a changed item's two sides marked (red before, green after)."""
    before, after = ("", "") if kind == "same" else ("del", "ins")
    return (
        f"<tr class='{kind}'><td class='{before}'>{left}</td><td class='{after}'>{right}</td></tr>"
    )


def _pretty(item: Any) -> str:
    """An item pretty-printed, its keys in the client's order, cut at ``MAX_ITEM_CHARS``."""
    pretty = orjson.dumps(item, option=orjson.OPT_INDENT_2).decode()
    if len(pretty) > MAX_ITEM_CHARS:
        more = len(pretty) - MAX_ITEM_CHARS
        pretty = pretty[:MAX_ITEM_CHARS] + f"\n... ({more:,} more characters not shown)"
    return pretty


def _cell(label: str, kind: str, pretty: str, marked: str | None = None) -> str:
    """An item's cell: its label and kind, and its text; an item that stayed the same folded
    (``<details>``, open on a click, no script), so that what changed comes first."""
    css = kind.split(maxsplit=1)[0].rstrip(":")
    text = escape(pretty) if marked is None else marked
    if kind == "same":
        lines = pretty.count("\n") + 1
        return (
            f"<details><summary class='same'>{escape(label)} same ({lines} lines)</summary>"
            f"<pre>{text}</pre></details>"
        )
    return f"<div class='{css}'>{escape(label)} {escape(kind)}</div><pre>{text}</pre>"


def _cells(
    labels: tuple[str, str],
    heads: str | tuple[str, str],
    a: Any,
    b: Any,
    *,
    renamed: Sequence[tuple[str, str]] = (),
    budget: Budget,
) -> tuple[str, str]:
    """The two cells of a pair: equal items as they are; for items that differ, the lines
    that differ marked, and within a line that changed its value, the value (both names of
    a renamed id)."""
    if isinstance(heads, str):
        heads = (heads, heads)
    left, right = _pretty(a), _pretty(b)
    if left == right:
        return _cell(labels[0], heads[0], left), _cell(labels[1], heads[1], right)
    marked = _marked(left.split("\n"), right.split("\n"), budget)
    said = "".join(
        f"<div class='note renamed'>id renamed: <mark class='del'>{escape(old)}</mark> \u2192 "
        f"<mark class='ins'>{escape(new)}</mark></div>"
        for old, new in renamed
    )
    return (
        _cell(labels[0], heads[0], left, marked[0]),
        said + _cell(labels[1], heads[1], right, marked[1]),
    )


#: Line pairs a changed item's line diff may compare (``difflib``, quadratic at worst); past
#: it, the lines between the common start and end are marked whole.
MAX_LINE_PAIRS: Final = 10_000
_KEYED = re.compile(r'^(\s*"(?:[^"\\]|\\.)*": )(.*?)(,?)$')


def _marked(a: list[str], b: list[str], budget: Budget) -> tuple[str, str]:
    """Two items' lines as HTML, the lines that differ marked (``mark.del``, ``mark.ins``)."""
    budget.spend(len(a) + len(b))
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    mid_a, mid_b = a[start : len(a) - end], b[start : len(b) - end]
    ops: Sequence[tuple[str, int, int, int, int]]
    if len(mid_a) * len(mid_b) <= MAX_LINE_PAIRS:
        budget.spend(len(mid_a) * len(mid_b) // 4)
        ops = SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
    else:
        ops = [("replace", 0, len(mid_a), 0, len(mid_b))]
    out_a = [escape(line) for line in a[:start]]
    out_b = [escape(line) for line in b[:start]]
    for op, a0, a1, b0, b1 in ops:
        if op == "equal":
            out_a += [escape(line) for line in mid_a[a0:a1]]
            out_b += [escape(line) for line in mid_b[b0:b1]]
        elif op == "replace" and a1 - a0 == b1 - b0:
            for x, y in zip(mid_a[a0:a1], mid_b[b0:b1], strict=True):
                marked = _value_marked(x, y)
                out_a.append(marked[0])
                out_b.append(marked[1])
        else:
            out_a += [_whole(line, "del") for line in mid_a[a0:a1]]
            out_b += [_whole(line, "ins") for line in mid_b[b0:b1]]
    out_a += [escape(line) for line in a[len(a) - end :]]
    out_b += [escape(line) for line in b[len(b) - end :]]
    return "\n".join(out_a), "\n".join(out_b)


def _whole(line: str, side: str) -> str:
    return f"<mark class='{side}'>{escape(line)}</mark>"


def _value_marked(x: str, y: str) -> tuple[str, str]:
    """Two lines that differ: when they hold the same key, only the values marked (a renamed
    id reads ``"id": <old>`` beside ``"id": <new>``); else both lines whole."""
    mx, my = _KEYED.match(x), _KEYED.match(y)
    if mx is None or my is None or mx.group(1) != my.group(1):
        return _whole(x, "del"), _whole(y, "ins")
    return (
        f"{escape(mx.group(1))}<mark class='del'>{escape(mx.group(2))}</mark>{mx.group(3)}",
        f"{escape(my.group(1))}<mark class='ins'>{escape(my.group(2))}</mark>{my.group(3)}",
    )
