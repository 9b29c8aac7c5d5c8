"""The before/after view of a captured body (the page's ``/chatmend/request/<id>``): its list
aligned item by item and rendered as HTML, in a worker process (``proxy.server.page.diff_view``).

``align`` pairs each item of the list before with at most one item of the list after, and says
what became of it (``Pair.kind``): ``same``, ``changed``, ``moved``, ``removed`` or ``added``.
Items are paired in this order of trust:

1. the common start and the common end of the two lists (equal items: the same canonical JSON);
2. anchors: an item whose canonical JSON occurs once in each list, then one whose identity does
   (``identity``: a tool-call turn by its first call's id, a tool result by the id it answers, a
   Responses item by its ``call_id`` or ``id``, a Messages turn by its first ``tool_use`` id or
   the ``tool_use_id`` it answers; an id a rule recorded renaming is read as the old one). The
   longest run of anchors in the same order on both sides is the backbone; an anchor out of
   that order was moved;
3. beside each backbone pair, equal neighbours on both sides (a run of copies);
4. between two backbone pairs, equal items in order (by whichever greedy pass pairs more: the
   one that walks the list before finds every item of it when items were only inserted, the
   one that walks the list after when items were only removed), then the rest by position
   among items of the same role or type (two user messages merged read as the first changed,
   the next removed).

Each step is linear in the items (the backbone: ``n log n``, by bisection, in C). ``Budget``
counts the work; past ``WORK_BUDGET`` the view says so and shows the two bodies as they are.
The pairing is explicit (``Pair``: before index, after index, kind, and what paired them), so a
view can show a move as a move and a renamed id beside its old one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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
    #: What paired them: ``equal`` (the same canonical JSON), ``id`` (the same identity),
    #: ``position`` (the same role or type in the same place); ``""`` for an unpaired item.
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
) -> list[Pair]:
    """The items before (their canonical JSON ``a``) paired with the items after (``b``), in the
    order the view shows them: each item of each side exactly once, the pairs that are not
    ``moved`` increasing on both sides (see the module's docstring). ``ids`` and ``roles``:
    each item's identity and role, per side (none, and one role, if not given)."""
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
    open_a = [i for i in middle_a if sides.to_b[i] < 0 and ids[0][i] is not None]
    open_b = [j for j in middle_b if sides.to_a[j] < 0 and ids[1][j] is not None]
    for i, j in _unique(ids[0], ids[1], open_a, open_b, budget):
        sides.pair(i, j, "id")
    anchored = [i for i in middle_a if sides.to_b[i] >= 0]
    budget.spend(len(anchored) * max(1, len(anchored).bit_length()))
    for i, kept in zip(anchored, _increasing([sides.to_b[i] for i in anchored]), strict=True):
        sides.moved[i] = not kept
    _extend(sides, budget)
    _fill_gaps(sides, roles, budget)
    return _rows(sides, budget)


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
) -> list[Pair]:
    """Two lists of items aligned (``align``), each item keyed by its canonical JSON, its
    identity (an id of the list after read through ``renames``, new -> old) and its role."""
    budget = budget or Budget()
    budget.spend(KEY_UNITS * (len(before) + len(after)))
    keys = [canonical(x) for x in before], [canonical(x) for x in after]
    ids = [identity(x, {}) for x in before], [identity(x, renames or {}) for x in after]
    kinds = [role(x) for x in before], [role(x) for x in after]
    return align(keys[0], keys[1], ids, kinds, budget)


# --- the view (in a worker process) ----------------------------------------------------------


def view(
    before: bytes,
    after: bytes,
    field: str,
    renames: tuple[tuple[str, str], ...],
    units: int = WORK_BUDGET,
) -> bytes:
    """The view's HTML for a body captured before and after: its ``field`` list aligned, item by
    item, or the two bodies as they are (with the reason) when they cannot be aligned within
    ``units`` of work."""
    sides = _parsed(before, field), _parsed(after, field)
    if sides[0] is None or sides[1] is None:
        return _raw(before, after, "they are not JSON objects").encode()
    (items_a, rest_a), (items_b, rest_b) = sides[0], sides[1]
    try:
        rows = pairs(items_a, items_b, dict(renames), Budget(units))
        return "".join(_aligned(field, rows, (items_a, items_b), (rest_a, rest_b))).encode()
    except OverBudget:
        reason = (
            f"aligning {len(items_a)} and {len(items_b)} items would take more than the work "
            f"budget ({units:,} units)"
        )
        return _raw(before, after, reason).encode()
    except orjson.JSONEncodeError:  # nested past orjson's 255 levels: it cannot write them
        return _raw(before, after, "they nest deeper than the alignment can read").encode()


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


def _aligned(
    field: str,
    rows: list[Pair],
    items: tuple[list[Any], list[Any]],
    rest: tuple[dict[str, Any], dict[str, Any]],
) -> Iterator[str]:
    counts = Counter(pair.kind for pair in rows)
    summary = ", ".join(f"{counts[kind]} {kind}" for kind in KINDS if counts[kind])
    yield f"<h3>Body before and after, by <code>{escape(field)}</code> item</h3>"
    yield f"<p id='summary'>{len(items[0])} items before, {len(items[1])} after: {summary}.</p>"
    yield "<table id='diff'><tr><th>before</th><th>after</th></tr>"
    kind = "same" if rest[0] == rest[1] else "changed"
    yield _row(kind, _cell("other keys", kind, rest[0]), _cell("other keys", kind, rest[1]))
    written = shown = 0
    for pair in rows[:MAX_ROWS]:
        if written > MAX_VIEW_CHARS:
            break
        row = _pair_row(field, pair, items)
        written += len(row)
        shown += 1
        yield row
    if shown < len(rows):
        cut = f"Only the first {shown} of {len(rows)} rows are shown."
        yield f"<tr><td colspan='2'>{cut}</td></tr>"
    yield "</table>"


def _pair_row(field: str, pair: Pair, items: tuple[list[Any], list[Any]]) -> str:
    i, j, kind = pair.before, pair.after, pair.kind
    left = right = ""
    if i is not None:
        where = f" (now {field}[{j}])" if kind == "moved" else ""
        left = _cell(f"{field}[{i}]", kind + where, items[0][i])
    if j is not None:
        where = f" (was {field}[{i}])" if kind == "moved" else ""
        right = _cell(f"{field}[{j}]", kind + where, items[1][j])
    return _row(kind, left, right)


def _row(kind: str, left: str, right: str) -> str:
    """A row: a changed item's two sides marked (red before, green after)."""
    before, after = ("", "") if kind == "same" else ("del", "ins")
    return (
        f"<tr class='{kind}'><td class='{before}'>{left}</td><td class='{after}'>{right}</td></tr>"
    )


def _cell(label: str, kind: str, item: Any) -> str:
    pretty = orjson.dumps(item, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    if len(pretty) > MAX_ITEM_CHARS:
        more = len(pretty) - MAX_ITEM_CHARS
        pretty = pretty[:MAX_ITEM_CHARS] + f"\n... ({more:,} more characters not shown)"
    head = f"<div class='{kind.split(maxsplit=1)[0]}'>{escape(label)} {escape(kind)}</div>"
    return f"{head}<pre>{escape(pretty)}</pre>"
