"""The page's before/after alignment (proxy/server/diff.py), issue 36 item 1: linear, aligned by
what identifies an item, within a work budget.

The oracle is written here, never read from the module: every item of each side is shown once;
an item called ``same`` equals its partner (compared as Python values); the pairs not called
``moved`` keep their order on both sides; a pair made by identity shares an id (read here from
the item's own fields, through the renames the rules recorded); a pair made by position shares
its role or type. On edits whose best alignment is known (items only removed, only inserted,
only reordered) the alignment is that one. Histories are the generated agent histories of
tests/rules/test_nothing_lost.py, for every API and profile, repaired by the real rules.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.server.diff import (
    MAX_ITEM_CHARS,
    MAX_RAW_BYTES,
    MAX_ROWS,
    MAX_VIEW_CHARS,
    Budget,
    OverBudget,
    Pair,
    pairs,
    view,
)
from rules.providers.apis import APIS
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import sanitize_body
from tests.budget import examples
from tests.rules.test_nothing_lost import FATES_ALL, RENDER, conversations, plan_of
from tests.work import assert_linear

SETTINGS = settings(
    max_examples=examples(0.5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def ids_of(item: Any, renames: dict[str, str]) -> set[str]:
    """Every id an item carries or answers, as the client's protocols write them (a renamed
    one read as its old name)."""
    found: set[str] = set()
    if not isinstance(item, dict):
        return found
    for key in ("tool_call_id", "call_id", "id", "tool_use_id"):
        if isinstance(item.get(key), str):
            found.add(item[key])
    for part in (item.get("tool_calls"), item.get("content")):
        if isinstance(part, list):
            for block in part:
                if isinstance(block, dict):
                    found |= ids_of(block, {})
    return {renames.get(value, value) for value in found}


def without_blocks(item: Any) -> Any:
    """What stays of an item without the blocks that may move to another item: a chat turn's
    tool calls, a Messages turn's ``tool_use`` and ``tool_result`` blocks."""
    if not isinstance(item, dict):
        return item
    kept = {k: v for k, v in item.items() if k != "tool_calls"}
    if isinstance(kept.get("content"), list):
        kept["content"] = [
            b
            for b in kept["content"]
            if not (isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result"))
        ]
    return kept


def kind_of(item: Any) -> Any:
    if isinstance(item, dict):
        return item.get("role", item.get("type"))
    return type(item)


def judged(
    before: Sequence[Any], after: Sequence[Any], renames: dict[str, str] | None = None
) -> list[Pair]:
    """``pairs(before, after)``, held to the oracle above."""
    renames = renames or {}
    rows = pairs(before, after, renames)
    assert sorted(p.before for p in rows if p.before is not None) == list(range(len(before)))
    assert sorted(p.after for p in rows if p.after is not None) == list(range(len(after)))
    kept = []
    for pair in rows:
        i, j = pair.before, pair.after
        if pair.kind == "removed":
            assert j is None and i is not None
            continue
        if pair.kind == "added":
            assert i is None and j is not None
            continue
        assert i is not None and j is not None
        assert (before[i] == after[j]) == (pair.kind == "same" or pair.by == "equal"), pair
        if pair.kind in ("same", "changed"):
            kept.append((i, j))
        if pair.by == "id":
            assert ids_of(before[i], {}) & ids_of(after[j], renames), pair
        if pair.by == "position":
            assert kind_of(before[i]) == kind_of(after[j]), pair
        if pair.by == "residue":
            assert without_blocks(before[i]) == without_blocks(after[j]), pair
    assert kept == sorted(kept) and [j for _, j in kept] == sorted(j for _, j in kept)
    # Shown in the order of the list after, an item removed where it stood before.
    shown = [p.after for p in rows if p.after is not None]
    assert shown == sorted(shown)
    return rows


def kinds(rows: list[Pair]) -> Counter[str]:
    return Counter(pair.kind for pair in rows)


# --- agent histories through the real rules -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("api", sorted(APIS))
@pytest.mark.parametrize("name", sorted(PROFILES))
@SETTINGS
@given(data=st.data())
def test_a_repaired_history_aligns_by_the_oracle(api: str, name: str, data: st.DataObject) -> None:
    items = RENDER[api](data.draw(conversations(FATES_ALL)))
    field = APIS[api].field
    body = orjson.dumps({"model": "deepseek-chat", field: items})
    result = sanitize_body(body, plan_of(api, name), api)
    after = orjson.loads(result.body)[field] if result.body is not None else items
    renames = {
        c.detail["to"]: c.detail["from"]
        for c in result.changes
        if c.action.endswith("_id") and isinstance(c.detail.get("to"), str)
    }
    rows = judged(items, after, renames)
    if after == items:
        assert kinds(rows) == Counter(same=len(items))


# --- edits whose best alignment is known --------------------------------------------------------

#: Few distinct messages: most items equal many others (the shape that made the old diff
#: quadratic), with a tool call and its result among them.
MESSAGES = [
    {"role": "user", "content": "a"},
    {"role": "user", "content": "b"},
    {"role": "assistant", "content": ""},
    {"role": "assistant", "tool_calls": [{"id": "call_1", "function": {"name": "ls"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
]
lists = st.lists(st.sampled_from(MESSAGES), max_size=40)


@SETTINGS
@given(items=lists, drop=st.lists(st.booleans(), max_size=40))
def test_items_only_removed_read_as_removed(items: list[Any], drop: list[bool]) -> None:
    after = [x for k, x in enumerate(items) if not (k < len(drop) and drop[k])]
    rows = judged(items, after)
    assert kinds(rows) == Counter(same=len(after), removed=len(items) - len(after)) - Counter()


@SETTINGS
@given(items=lists, added=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(MESSAGES))))
def test_items_only_inserted_read_as_added(items: list[Any], added: list[Any]) -> None:
    after = list(items)
    for at, item in added:
        after.insert(min(at, len(after)), item)
    rows = judged(items, after)
    assert kinds(rows) == Counter(same=len(items), added=len(added)) - Counter()


def _longest_increasing(values: list[int]) -> int:
    """The oracle's own longest increasing run (quadratic: small inputs only)."""
    best = [1] * len(values)
    for k in range(len(values)):
        for m in range(k):
            if values[m] < values[k]:
                best[k] = max(best[k], best[m] + 1)
    return max(best, default=0)


@SETTINGS
@given(order=st.permutations(list(range(12))))
def test_distinct_items_reordered_read_as_moved(order: list[int]) -> None:
    before = [{"role": "user", "content": f"m{k}"} for k in range(12)]
    after = [before[k] for k in order]
    rows = judged(before, after)
    assert kinds(rows) == Counter(same=_longest_increasing(order), moved=12 - kinds(rows)["same"])


def test_a_result_moved_after_its_call_reads_as_moved() -> None:
    call = {"role": "assistant", "tool_calls": [{"id": "call_7", "function": {"name": "ls"}}]}
    result = {"role": "tool", "tool_call_id": "call_7", "content": "ok"}
    user = {"role": "user", "content": "go"}
    rows = judged([user, result, call, user], [user, call, result, user])
    assert kinds(rows) == Counter(same=3, moved=1)


def test_a_renamed_id_pairs_by_its_old_name() -> None:
    """duplicate-tool-call-ids renames the second call_1 (and its result): the renamed call and
    result pair with their originals by id, through the rename the rule recorded."""

    def turn(call_id: str, args: str) -> list[Any]:
        call = {"id": call_id, "function": {"name": "ls", "arguments": args}}
        return [
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": args},
        ]

    before = [{"role": "user", "content": "go"}, *turn("x1", "{}"), *turn("x2", "{}")]
    after = [{"role": "user", "content": "go"}, *turn("x1", "{}"), *turn("y2", '{"a":1}')]
    rows = judged(before, after, {"y2": "x2"})
    # The call turn pairs by what stays of it without its calls (one such turn in the gap on
    # each side), the result by its id, read through the rename.
    assert [(p.kind, p.by) for p in rows[3:]] == [("changed", "residue"), ("changed", "id")]


def test_a_merge_reads_as_the_first_changed_and_the_next_removed() -> None:
    before = [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]
    rows = judged(before, [{"role": "user", "content": "x\n\ny"}])
    assert [(p.kind, p.by) for p in rows] == [("changed", "position"), ("removed", "")]


def test_roles_do_not_pair_by_position() -> None:
    before = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    after = [{"role": "assistant", "content": "z"}]
    rows = judged(before, after)
    assert kinds(rows) == Counter(removed=1, changed=1)
    assert next(p for p in rows if p.kind == "changed").before == 1


# --- the issue's body: linear work, within the budget --------------------------------------------


def issue_history(count: int) -> tuple[list[Any], list[Any]]:
    """The issue's body: ``count`` user messages ``"a"``, every other one followed by an empty
    assistant message the default profile removes; and what the rules sent."""
    before: list[Any] = []
    for k in range(count):
        before.append({"role": "user", "content": "a"})
        if k % 2 == 0:
            before.append({"role": "assistant", "content": ""})
    return before, [m for m in before if m["role"] == "user"]


def test_the_issues_body_aligns_every_message() -> None:
    """Was: 700 such messages stalled the event loop 6.1 s, 2,000 took 46.7 s (difflib over
    equal items). Now every user message is ``same`` and every removed one ``removed``."""
    for count in (700, 2000):
        before, after = issue_history(count)
        rows = judged(before, after)
        assert kinds(rows) == Counter(same=count, removed=count // 2)


def test_the_alignment_is_linear() -> None:
    """Counted in lines executed (tests/work.py): four times the items, at most about four times
    the work, for the issue's shape, for distinct items reversed (all moved but one) and for
    renamed ids (paired by identity)."""

    def reversed_distinct(n: int) -> tuple[list[Any], list[Any]]:
        before = [{"role": "user", "content": str(k)} for k in range(n)]
        return before, before[::-1]

    def renamed(n: int) -> tuple[list[Any], list[Any]]:
        before = [{"role": "tool", "tool_call_id": f"c{k}", "content": "a"} for k in range(n)]
        return before, [{**m, "content": "b"} for m in before]

    for build in (issue_history, reversed_distinct, renamed):
        assert_linear(build, lambda sides: pairs(*sides), 500)


def test_past_the_budget_the_bodies_are_shown_as_they_are() -> None:
    before, after = issue_history(3000)
    with pytest.raises(OverBudget):
        pairs(before, after, budget=Budget(1000))
    raw = orjson.dumps({"messages": before}), orjson.dumps({"messages": after})
    aligned = view(raw[0], raw[1], "messages", ())
    assert b"id='unaligned'" not in aligned and b"3000 same, 1500 removed" in aligned  # control
    shown = view(raw[0], raw[1], "messages", (), units=1000)
    assert b"Shown as they are, not aligned: aligning 4500 and 3000 items" in shown
    assert b"work budget (1,000 units)" in shown and shown.count(b"<pre>") == 2
    assert shown.count(b"{&quot;role&quot;:&quot;user&quot;") == 6000  # both bodies, whole


def test_the_view_escapes_what_clients_wrote_and_caps_its_rows() -> None:
    hostile = "</script><img src=x onerror=alert(1)>"
    before = [{"role": "user", "content": hostile}] + [
        {"role": "user", "content": str(k)} for k in range(MAX_ROWS + 5)
    ]
    html = view(
        orjson.dumps({"messages": before, "x": 1}),
        orjson.dumps({"messages": before[1:], "x": 2}),
        "messages",
        (),
    ).decode()
    assert hostile not in html and "&lt;/script&gt;&lt;img" in html
    assert f"Only the first {MAX_ROWS} of {MAX_ROWS + 6} rows are shown." in html
    assert "other keys changed" in html and "1 removed" in html
    not_json = view(b"{", b"[1]", "messages", ())
    assert b"not aligned: they are not JSON objects" in not_json


def test_what_the_view_renders_is_bounded() -> None:
    """What crosses back from the worker stays small: an item's text, the rows, a body shown
    unaligned are cut (and say so), whatever the bodies hold."""
    huge = {"role": "user", "content": "x" * (MAX_ITEM_CHARS + 10)}
    before = orjson.dumps({"messages": [huge, {"role": "user", "content": "y"}]})
    html = view(before, orjson.dumps({"messages": [huge]}), "messages", ()).decode()
    more = len(json.dumps(huge, indent=2, sort_keys=True)) - MAX_ITEM_CHARS
    assert html.count(f"({more:,} more characters not shown)") == 2
    assert len(html) < 2 * MAX_ITEM_CHARS + 10_000
    rows = [{"role": "user", "content": f"{k}" + "z" * 50_000} for k in range(200)]
    many = orjson.dumps({"messages": rows})
    html = view(many, orjson.dumps({"messages": rows[1:]}), "messages", ()).decode()
    assert "rows are shown." in html and len(html) < MAX_VIEW_CHARS + 2 * 120_000
    body = orjson.dumps({"messages": [{"role": "user", "content": "w" * (2 * MAX_RAW_BYTES)}]})
    raw = view(body, b"{", "messages", ()).decode()
    assert raw.count("more bytes not shown)") == 1 and len(raw) < MAX_RAW_BYTES + 10_000


# --- what the rules did, said on both sides ------------------------------------------------------


def test_every_in_place_action_leaves_every_item_where_it_stood() -> None:
    """``IN_PLACE`` (the actions after which the next rule counts on the same list) is held to
    every fixture case of every rule: a case whose actions are all in place keeps its length
    and each item's role and type at its index."""
    from proxy.server.diff import IN_PLACE
    from tests.rules.fixtures import (
        FIXTURE_DIR,
        MESSAGES_FIXTURE_DIR,
        RESPONSES_FIXTURE_DIR,
        load_cases,
    )

    def shape(item: Any) -> Any:
        return item.get("type") if isinstance(item, dict) else type(item).__name__

    checked = 0
    for folder in (FIXTURE_DIR, MESSAGES_FIXTURE_DIR, RESPONSES_FIXTURE_DIR):
        for case in load_cases(folder):
            actions = {change.get("action") for change in case.changes}
            if case.expected is None or not actions or not actions <= IN_PLACE:
                continue
            checked += 1
            assert len(case.expected) == len(case.input), case.id
            assert [shape(x) for x in case.expected] == [shape(x) for x in case.input], case.id
    assert checked > 100


def test_a_result_moved_into_another_message_reads_as_a_block_moved() -> None:
    """The Messages case of the issue: the result sent after "never mind" and "ok" moves home
    into "never mind", its own message dropped. "never mind" pairs with itself (what stays of
    it without the moved block), the emptied message reads as removed, the block as moved."""
    from proxy.server.diff import Budget, moved_blocks

    def text(role: str, words: str) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "text", "text": words}]}

    use = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.txt"}
    asked = {"role": "assistant", "content": [{"type": "text", "text": "Listing."}, use]}
    before = [
        text("user", "list"),
        asked,
        text("user", "never mind"),
        text("assistant", "ok"),
        {"role": "user", "content": [result]},
    ]
    home = {"role": "user", "content": [result, *before[2]["content"]]}
    after = [before[0], asked, home, before[3]]
    rows = judged(before, after)
    assert [(p.kind, p.before, p.after, p.by) for p in rows] == [
        ("same", 0, 0, "equal"),
        ("same", 1, 1, "equal"),
        ("changed", 2, 2, "residue"),
        ("same", 3, 3, "equal"),
        ("removed", 4, None, ""),
    ]
    (move,) = moved_blocks(before, after, rows, {}, Budget())
    assert (move.before, move.after) == ((4, "content[0]"), (2, "content[0]"))


def test_an_index_is_said_on_the_side_it_counts_on() -> None:
    """duplicate-tool-call-ids after a merge: its index 3 counts on the list the merge left
    (before messages[4], after messages[3]); the merge's own index counts on the list before.
    The view says so, side by side, and names the rename's two ids."""
    from proxy.server.diff import Noted

    def turn(call_id: str, arg: str) -> list[Any]:
        call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": arg}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": arg},
        ]

    before = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        *turn("call_1", "1"),
        *turn("call_1", "2"),
    ]
    after = [{"role": "user", "content": "a\n\nb"}, *turn("call_1", "1"), *turn("call_1_d2", "2")]
    after[4] = {**after[4], "content": "2"}
    changes = (
        Noted("consecutive-users", 0, "merged", {"count": 2}),
        Noted("duplicate-tool-call-ids", 3, "renamed_id", {"from": "call_1", "to": "call_1_d2"}),
        Noted("duplicate-tool-call-ids", 4, "renamed_id", {"from": "call_1", "to": "call_1_d2"}),
    )
    html = view(
        orjson.dumps({"messages": before}), orjson.dumps({"messages": after}), "messages", changes
    ).decode()
    assert "merged at before messages[0] \u2192 after messages[0]" in html
    rename = "renamed_id call_1 \u2192 call_1_d2 at "
    assert rename + "before messages[4] \u2192 after messages[3]" in html
    assert rename + "before messages[5] \u2192 after messages[4]" in html
    assert "messages[3] of the list as" not in html
    assert "<mark class='del'>&quot;call_1&quot;</mark>" in html
    assert "<mark class='ins'>&quot;call_1_d2&quot;</mark>" in html


def test_keys_read_in_the_clients_order_and_a_changed_value_is_marked() -> None:
    """Issue 40: keys were shown sorted. An item reads as the client wrote it (here ``role``
    after ``content``, ``zeta`` before ``alpha``), and in a changed item only the value that
    changed is marked, on both sides."""
    before = [{"content": "x", "role": "user", "zeta": 1, "alpha": "old"}]
    after = [{"content": "x", "role": "user", "zeta": 1, "alpha": "new"}]
    html = view(
        orjson.dumps({"messages": before, "model": "m"}),
        orjson.dumps({"messages": after, "model": "m"}),
        "messages",
    ).decode()
    cell = html[html.index("before messages[0]") :]
    assert cell.index("&quot;content&quot;") < cell.index("&quot;role&quot;")
    assert cell.index("&quot;zeta&quot;") < cell.index("&quot;alpha&quot;")
    assert "&quot;alpha&quot;: <mark class='del'>&quot;old&quot;</mark>" in html
    assert "&quot;alpha&quot;: <mark class='ins'>&quot;new&quot;</mark>" in html
    assert html.count("<mark") == 2


def test_an_insertion_is_said_where_it_went_never_as_the_item_it_pushed_on() -> None:
    """An ``inserted_*`` change's index is where the new item went in the list its rule
    received, not an item of the list before: it is said so, never read as the item that
    stood there."""
    from proxy.server.diff import Noted

    before = [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]
    after = [before[0], {"role": "user", "content": "."}, before[1]]
    change = Noted("alternation", 1, "inserted_message", {"role": "user"})
    html = view(
        orjson.dumps({"messages": before}), orjson.dumps({"messages": after}), "messages", (change,)
    ).decode()
    assert "messages[1] of the list as alternation received it" in html
    assert "before messages[1] \u2192" not in html
