"""Verified-prefix reuse (proxy/relay/prefix.py): what a session's requests become through the cache
is what a full run gives them, byte for byte and change for change.

The oracle is the full run itself (``sanitize_body`` over the body alone, parsed whole) and
orjson's parse of the whole body, never anything the cache computes: every property below
replays a growing session (each request its predecessor's list plus a turn, as agents send
them; sometimes the same request again, sometimes a fork from an earlier turn) through one
cache and compares each request with a run that never saw the cache.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.config import PrefixConfig
from proxy.relay.prefix import ENTRY_BYTES, SKIP, PrefixCache, Reading
from proxy.stash.hooks import ReasoningHooks, RequestReasoning
from rules.chat import reasoning_content
from rules.chat.scan import bad_arguments_at, primed, scan, walk
from rules.engine import memo, resume
from rules.engine.base import RequestFacts, per_message
from rules.messages import missing_thinking
from rules.providers import planner as planning
from rules.providers import sanitize, writing
from rules.providers.apis import APIS, CHAT_API, MESSAGES_API, RESPONSES_API, Api
from rules.providers.planner import Plan, Planner
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import Sanitized, sanitize_body
from tests.budget import examples
from tests.rules.test_nothing_lost import FATES_ALL, RENDER, conversations, plan_of
from tests.sessions import api_session
from tests.sessions import session as bench_session
from tests.strategies import broken_transcripts, clean_transcripts, request_fields
from tests.writings import WRITINGS, go, same_json

SETTINGS = settings(
    max_examples=examples(0.5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NAMES = sorted(PROFILES)


# ---------------------------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------------------------


@st.composite
def cuts(draw: st.DrawFn, length: int) -> list[int]:
    """The list lengths of a session's requests: growing, with a repeat or a fork now and then
    (a retry sends the same body again; a regenerate goes back to an earlier turn)."""
    points = sorted(set(draw(st.lists(st.integers(1, length), min_size=1, max_size=8))))
    if length not in points:
        points.append(length)
    out: list[int] = []
    for point in points:
        out.append(point)
        twist = draw(st.sampled_from(("", "", "", "repeat", "fork")))
        if twist == "repeat":
            out.append(point)
        elif twist == "fork" and len(out) > 1:
            out.append(draw(st.sampled_from(out[:-1])))
    return out


def bodies(
    items: list[Any],
    points: Sequence[int],
    fields: dict[str, Any],
    field: str,
    *,
    marked: bool = False,
    writing: str = "orjson",
) -> list[bytes]:
    """One body per cut, the list first or after ``model`` (the OpenAI SDK writes ``messages``
    first; the Node SDKs and Claude Code write ``model`` first). ``marked``: the last message
    of each body carries a marker the next body moves on, as Claude Code moves its
    ``cache_control`` to the newest turn. ``writing``: how the client writes it
    (tests/writings.py: orjson's compact bytes, ``json.dumps``', Go's, .NET's, ...)."""
    out = []
    for point in points:
        head = {key: value for key, value in fields.items() if key == "model"}
        rest = {key: value for key, value in fields.items() if key != "model"}
        listed = items[:point]
        if marked and listed:
            listed = [*listed[:-1], with_cache_marker(listed[-1])]
        payload = {**head, field: listed, **rest}
        out.append(WRITINGS[writing](payload))
    return out


def with_cache_marker(message: Any) -> Any:
    """``message`` with Claude Code's cache marker: on its last block, or on itself."""
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = {**content[-1], "cache_control": {"type": "ephemeral"}}
        return {**message, "content": [*content[:-1], last]}
    return {**message, "cache_control": {"type": "ephemeral"}}


def replay(api: Api, plan: Plan, session: list[bytes], space: str = "s") -> PrefixCache:
    """Every request of ``session`` through two caches, one whose rules resume from the
    previous request's run (rules/engine/resume.py) and one whose rules run over the whole
    list, each request compared with a full run; the resuming cache (``resumed`` counts the
    requests whose rules resumed)."""
    resuming, whole = PrefixCache(), PrefixCache(PrefixConfig(resume=False))
    resuming.resumed = 0  # type: ignore[attr-defined]
    for number, body in enumerate(session):
        full = sanitize_body(body, plan, api.name)
        for cache in (resuming, whole):
            reading = cache.read(space, api, body)
            assert same_json(reading.payload, orjson.loads(body)), number
            on = cache is resuming
            through = cache.repair(reading, body, plan, api.name, parsed=reading.payload)
            resuming.resumed += through.resumed  # type: ignore[attr-defined]
            where = (number, reading.outcome, on, through.resumed)
            assert through.body == full.body, where
            assert through.changes == full.changes, where
            assert through.failures == full.failures, where
            assert through.skipped == full.skipped, where
    return resuming


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(data=st.data())
def test_chat_sessions_forward_what_a_full_run_forwards(name: str, data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(("clean", "broken", "conversation")))
    if shape == "clean":
        items = data.draw(clean_transcripts(max_turns=4))
    elif shape == "broken":
        items = data.draw(broken_transcripts(max_turns=4)).messages
    else:
        items = RENDER["chat"](data.draw(conversations(FATES_ALL)))
    fields = data.draw(request_fields())
    marked, writing = data.draw(st.booleans()), data.draw(st.sampled_from(sorted(WRITINGS)))
    points = data.draw(cuts(len(items)))
    session = bodies(items, points, fields, "messages", marked=marked, writing=writing)
    replay(CHAT_API, plan_of("chat", name), session)


@pytest.mark.parametrize("api", ["responses", "messages"])
@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(data=st.data())
def test_responses_and_messages_sessions_forward_what_a_full_run_forwards(
    api: str, name: str, data: st.DataObject
) -> None:
    items = RENDER[api](data.draw(conversations(FATES_ALL)))
    model = data.draw(st.sampled_from(("deepseek-chat", "claude-sonnet-4-5", "kimi-k2")))
    marked, writing = data.draw(st.booleans()), data.draw(st.sampled_from(sorted(WRITINGS)))
    field = APIS[api].field
    points = data.draw(cuts(len(items)))
    session = bodies(items, points, {"model": model}, field, marked=marked, writing=writing)
    replay(APIS[api], plan_of(api, name), session)


@pytest.mark.parametrize("workload", ["clean", "clean-kimi", "stuck", "broken"])
def test_the_benchmark_sessions_hit_and_forward_what_a_full_run_forwards(workload: str) -> None:
    """The benchmark's own sessions (tests/sessions.py): every request after the first is a
    hit, so the property above cannot pass by never reusing anything."""
    session = bench_session(120, workload, seed=3)
    cache = replay(CHAT_API, plan_of("chat", "deepseek"), session)
    assert cache.counts == {"hit": len(session) - 1, "miss": 1, "skip": 0}
    assert cache.entries == 1
    # Every request after the first resumes but where a rule first wakes (its state is not
    # known yet: that request runs whole), so the comparison above is of resumed runs.
    assert cache.resumed >= len(session) - 3  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("workload", "writing"),
    [("clean", "json.dumps"), ("stuck", "go"), ("broken", "indented"), ("stuck-split", "dotnet")],
)
@pytest.mark.parametrize("name", NAMES)
def test_agent_sessions_resume_under_every_profile(name: str, workload: str, writing: str) -> None:
    """Agent-shaped sessions (each request the last plus a turn) under every profile, resumed
    and not, against full runs; and how many requests resumed: every one but the first, and
    where a rule first wakes (its state is not known yet) or the list it follows ends on its
    repair (``stuck-split``: the split turn that repeats a call, issue 39's stuck session, which
    ran whole on every request while the id and pairing rules could not say their horizon).
    The same sessions written another way (tests/writings.py) are reused and resume too."""
    session = bench_session(60, workload, seed=11)
    cache = replay(CHAT_API, plan_of("chat", name), session)
    other = [WRITINGS[writing](orjson.loads(body)) for body in session]
    assert other != session
    other_cache = replay(CHAT_API, plan_of("chat", name), other)
    assert other_cache.counts["hit"] == len(session) - 1  # the client's own writing reused
    assert other_cache.resumed >= len(session) - 4  # type: ignore[attr-defined]
    assert cache.resumed >= len(session) - 4, cache.resumed  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("api", "workload"),
    [
        *(
            (api, workload)
            for api in ("messages", "responses")
            for workload in ("clean", "stuck", "broken")
        ),
        ("messages", "stuck-split"),  # a reused tool_use id: the id and pairing rules resume
    ],
)
@pytest.mark.parametrize("name", NAMES)
def test_messages_and_responses_agent_sessions_resume_under_every_profile(
    name: str, api: str, workload: str
) -> None:
    """Claude Code's (Messages) and Codex's (Responses) sessions, each request the last plus a
    turn, under every profile, resumed and not, against full runs; and every request after the
    first resumes, but where a rule first wakes (its state is not known yet) and, in a broken
    session, where a defect turns up (the rule it wakes reads it whole) and the request after."""
    session = api_session(api, 60, workload, seed=11)
    cache = replay(APIS[api], plan_of(api, name), session)
    assert cache.counts["hit"] == len(session) - 1
    # (the split turn wakes its rules over two requests, as in chat: the test above)
    least = {"broken": len(session) // 2, "stuck-split": len(session) - 4}.get(
        workload, len(session) - 3
    )
    assert cache.resumed >= least, cache.resumed  # type: ignore[attr-defined]


def test_a_wrong_horizon_is_caught_by_the_replay() -> None:
    """The replay is no tautology: ``reasoning-content`` declared to decide each message alone
    (under DeepSeek's ``plain_turns`` a plain turn gets its placeholder once a tool call joins
    its span, so it does not) forwards another body once the session resumes."""
    steps = plan_of("chat", "deepseek-reasoner").steps
    wrong = [
        (replace(rule, horizon=per_message(rule.apply)), ctx)
        if rule.name == "reasoning-content"
        else (rule, ctx)
        for rule, ctx in steps
    ]
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    items = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "let me look", "reasoning_content": ""},
        {"role": "system", "content": "note"},  # no merge: no rule without a horizon wakes
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "r"},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    session = bodies(items, [3, 5], {"model": "deepseek-reasoner"}, "messages")
    assert replay(CHAT_API, Plan("right", steps), session).resumed == 0  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match="'hit', True, True"):  # resumed, and it differs
        replay(CHAT_API, Plan("wrong", wrong), session)


# ---------------------------------------------------------------------------------------------
# Bytes the cache must not trust
# ---------------------------------------------------------------------------------------------

TURN = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
NEXT = [{"role": "user", "content": "and now?"}]


def two(first: bytes, second: bytes) -> tuple[PrefixCache, Any]:
    cache = PrefixCache()
    cache.read("s", CHAT_API, first)
    return cache, cache.read("s", CHAT_API, second)


def test_a_growing_body_is_parsed_from_its_prefix_on() -> None:
    first = orjson.dumps({"messages": TURN, "model": "m"})
    second = orjson.dumps({"messages": TURN + NEXT, "model": "m"})
    _, reading = two(first, second)
    assert reading.outcome == "hit"
    assert reading.reused == first.index(b"]")
    assert same_json(reading.payload, orjson.loads(second))
    assert list(reading.payload) == ["messages", "model"]  # the body's key order


@pytest.mark.parametrize(
    "second",
    [
        # the list's key twice: the last one counts, in a full parse
        b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},'
        b'{"role":"user","content":"x"}],"messages":[]}',
        # a key only the sentinel's spelling can write
        b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},'
        b'{"role":"user","content":"x"}],"\\u0001":1}',
        # not JSON after the prefix
        b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},'
        b"{oops}]}",
        # a comma and no item (a review's case: read as an empty tail, the rules rewrote it)
        b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},]}',
        b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}'
        b" , \n ]}",
        # a lone surrogate: orjson refuses it, the rules read it their own way
        b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},'
        b'{"role":"user","content":"\\ud800"}]}',
    ],
)
def test_what_cannot_be_trusted_is_read_whole(second: bytes) -> None:
    first = orjson.dumps({"messages": TURN})
    _, reading = two(first, second)
    assert reading.outcome != "hit"
    try:
        expected = orjson.loads(second)
    except orjson.JSONDecodeError:
        assert reading is SKIP
    else:
        assert same_json(reading.payload, expected)


@pytest.mark.parametrize("writing", sorted(WRITINGS))
def test_a_body_in_any_writing_is_reused(writing: str) -> None:
    """Whatever the client's spacing or escaping (tests/writings.py), its own bytes are a
    verified prefix: read from there on, and the next body's too (its entry is the client's
    writing, not orjson's, except for orjson's own)."""
    turn = [
        *TURN,
        {"role": "assistant", "content": "caf\u00e9 \U0001f600 <b>&amp;</b> it's a/b \u2028"},
    ]
    more = [*NEXT, {"role": "assistant", "content": '[1, {"x": "\\"}"}] \u00e9'}]
    first, second, third = (
        WRITINGS[writing]({"model": "m", "messages": listed, "n": 1.5e-7})
        for listed in (turn, turn + NEXT, turn + more)
    )
    cache = PrefixCache()
    for body, outcome in ((first, "miss"), (second, "hit"), (third, "hit")):
        reading = cache.read("s", CHAT_API, body)
        assert reading.outcome == outcome
        assert same_json(reading.payload, orjson.loads(body))
        assert reading.layout is not None
        assert reading.layout.entry.own is (writing == "orjson")
    assert cache.entries == 1


def test_a_session_whose_bytes_stop_being_orjsons_goes_on_in_its_own_writing() -> None:
    """A Go client writes orjson's bytes until a message holds ``->`` (``-\\u003e``): its entry
    is orjson's writing (copied) until then and its own after, every request a hit, forwarded
    as a full run forwards it, and resumed."""
    session = [go(orjson.loads(body)) for body in bench_session(40, "stuck", seed=5)]
    assert session[1] == bench_session(40, "stuck", seed=5)[1] and b"\\u003e" in session[2]
    plan, cache = plan_of("chat", "deepseek"), PrefixCache()
    owns = []
    for body in session:
        reading = cache.read("s", CHAT_API, body)
        assert same_json(reading.payload, orjson.loads(body))
        through = cache.repair(reading, body, plan, "chat", parsed=reading.payload)
        assert through.body == sanitize_body(body, plan, "chat").body
        owns.append(None if reading.layout is None else reading.layout.entry.own)
    assert owns[:2] == [True, True] and set(owns[2:]) == {False}, owns
    assert cache.counts == {"hit": len(session) - 1, "miss": 1, "skip": 0}
    assert replay(CHAT_API, plan, session).resumed >= len(session) - 4  # type: ignore[attr-defined]


def test_whitespace_around_an_items_comma_is_read() -> None:
    """A body that goes on from the prefix with whitespace before its comma: the same list."""
    first = orjson.dumps({"messages": TURN})
    second = first[:-2] + b' \n, {"role":"user","content":"x"} ]}'
    cache, reading = two(first, second)
    assert reading.outcome == "hit"
    assert same_json(reading.payload, orjson.loads(second))
    third = second[:-3] + b' ,{"role":"assistant","content":"y"}]}'
    assert same_json(cache.read("s", CHAT_API, third).payload, orjson.loads(third))
    assert cache.counts["hit"] == 2


@pytest.mark.parametrize(
    ("kept", "last"),
    [(b"1", b"true"), (b"1", b"1.0"), (b"0", b"false"), (b'"a"', b'"\\u0061"'), (b"1", b"1")],
)
def test_a_body_holding_its_list_twice_is_read_for_the_list_it_keeps(
    kept: bytes, last: bytes
) -> None:
    """A body whose list's key comes twice keeps the last list (orjson's parse, a full run's):
    the first one, even of the same values to Python's ``==`` (``1``, ``1.0``, ``true``), is
    not the list cached, so a later body that goes on from it is not read as holding the
    last one's values (a hostile review's case; ``replay`` compares every body forwarded with
    a full run's)."""
    plan = plan_of("chat", "deepseek")
    first = (
        b'{"model":"m","messages":[{"role":"user","content":"hi","n":' + kept + b"}],"
        b'"messages":[{"role":"user","content":"hi","n":' + last + b"}]}"
    )
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"a":1,}'}}
    second = b"".join(
        (
            b'{"model":"m","messages":[{"role":"user","content":"hi","n":' + kept + b"},",
            orjson.dumps({"role": "assistant", "content": None, "tool_calls": [call]}),
            b',{"role":"tool","tool_call_id":"c1","content":"ok"}]}',
        )
    )
    cache = replay(CHAT_API, plan, [first, second, second])
    # Reused only where the two lists are the same JSON (then either one is the list parsed).
    assert cache.counts["hit"] == (2 if same_json(orjson.loads(kept), orjson.loads(last)) else 0)


def test_a_client_whose_list_is_not_found_is_not_searched_on_every_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body whose first ``"messages"`` list is a nested one (of another length): after its
    first body, the cache looks for the list only every 32nd miss."""
    from proxy.relay import prefix

    tried = []
    original = prefix._listed

    def counted(body: bytes, field: str, *args: Any) -> Any:
        tried.append(field)
        return original(body, field, *args)

    monkeypatch.setattr(prefix, "_listed", counted)
    cache = PrefixCache()
    history = TURN + NEXT
    for n in range(40):
        body = orjson.dumps({"metadata": {"messages": []}, "messages": history * (n + 1)})
        assert same_json(cache.read("s", CHAT_API, body).payload, orjson.loads(body))
    assert cache.entries == 0
    assert cache.counts["miss"] == 40
    assert len(tried) == 2


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each reading of a list in another writing (``first``: a miss's, else a hit's)."""
    from proxy.relay import prefix

    reads: list[bool] = []
    original = writing.read_items  # the cache's, through its module

    def counted(body: bytes, at: int, written: bytes, *, first: bool) -> Any:
        reads.append(first)
        return original(body, at, written, first=first)

    monkeypatch.setattr(prefix, "read_items", counted)
    return reads


def _one_shot(n: int) -> bytes:
    return go({"model": "m", "messages": [{"role": "user", "content": f"<q{n}> " + "x" * 200}]})


def test_one_shot_requests_in_another_writing_read_their_list_rarely(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requests of one space that are each a conversation of their own, in a writing that is
    not orjson's (a Go client's one-shot calls): reading such a list costs about ten times the
    comparison with orjson's writing, so the space's first two misses read it, then one in 32,
    drawn, until a hit, which starts over."""
    reads = _counting_reads(monkeypatch)
    cache = PrefixCache()
    shots = [_one_shot(n) for n in range(320)]
    for body in shots:
        assert same_json(cache.read("s", CHAT_API, body).payload, orjson.loads(body))
    assert reads[:2] == [True, True]
    assert 3 <= len(reads) <= 2 + 30, len(reads)  # about 10 in 318
    assert cache.entries == len(reads)
    read = next(n for n in range(2, 320) if cache._spaces["s"].find(shots[n])[0] is not None)
    follow = go({"model": "m", "messages": [*orjson.loads(shots[read])["messages"], *NEXT]})
    assert cache.read("s", CHAT_API, follow).outcome == "hit"  # a session after all
    before = len(reads)
    for n in range(3):
        cache.read("s", CHAT_API, _one_shot(1000 + n))
    assert reads[before - 1 :] == [False, True, True]  # the hit's new message, then two misses


def test_a_session_among_one_shot_requests_gets_its_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review's case: a session written as json.dumps writes it, its requests alternating
    with one-shot calls of its space after three of them. Counted, every 32nd miss fell on a
    one-shot call for ever and the session never got an entry; drawn, it gets one."""
    reads = _counting_reads(monkeypatch)  # counted, so that reading goes the way it goes
    cache, history, outcomes = PrefixCache(), [{"role": "system", "content": "Be brief."}], []
    for n in range(3):
        cache.read("s", CHAT_API, _one_shot(n))
    for turn in range(200):
        history.append({"role": "user", "content": f"question {turn}"})
        outcomes.append(cache.read("s", CHAT_API, json.dumps({"messages": history}).encode()))
        history.append({"role": "assistant", "content": f"answer {turn}"})
        cache.read("s", CHAT_API, _one_shot(100 + turn))
    assert [r.outcome for r in outcomes].count("hit") >= 150
    # Each hit starts the count over: the one-shot call after it is read (a cost, as before
    # the count; a session's next request is a hit whatever happens to the one-shot calls).
    assert reads.count(True) <= 200 + 30


def test_which_misses_of_a_space_read_does_not_depend_on_other_spaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second review's case: one generator drew every space's reads, so another client's
    misses decided which of a space's misses read its list (and whether its session got an
    entry at all). Each space draws from its own sequence."""
    reads = _counting_reads(monkeypatch)
    alone, beside = PrefixCache(), PrefixCache()
    for n in range(200):
        alone.read("a", CHAT_API, _one_shot(n))
    pattern = list(reads)
    reads.clear()
    for n in range(200):
        beside.read("a", CHAT_API, _one_shot(n))
        marked = len(reads)
        for k in range(n % 4):
            beside.read("b", CHAT_API, _one_shot(1000 + 4 * n + k))
        del reads[marked:]  # b's reads
    assert reads == pattern
    assert 3 <= len(pattern) <= 2 + 20


def test_a_spaces_count_of_misses_outlives_its_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's case: the count of a space's unread misses was kept with its entries, which
    another space's sessions push out under the bound: its one-shot calls then read their list
    on every miss."""
    reads = _counting_reads(monkeypatch)
    cache = PrefixCache(PrefixConfig(max_bytes=200_000))
    others = [
        orjson.dumps({"messages": [{"role": "user", "content": "y" * 30_000}] * n}) for n in (1, 2)
    ]
    for n in range(200):
        cache.read("s", CHAT_API, _one_shot(n))
        for k, body in enumerate(others):  # a compact session of another space, at the bound
            cache.read(("other", n, k), CHAT_API, body)
    assert len(reads) <= 2 + 30, len(reads)


@pytest.mark.parametrize("name", NAMES)
def test_list_items_orjson_shares_resume_as_a_full_run_writes_them(name: str) -> None:
    """A review's case: ``0`` and ``-0`` are one object once orjson parsed them, so a message
    known by its object took the last one's bytes; a resumed run copied the previous request's
    bytes, mapped over its shorter list, and sent ``-0`` where a full run sent ``0``."""
    user, bad = b'{"role": "user", "content": "hi"}', b'{"role": "assistant", "tool_calls": []}'
    first = b'{"model": "m", "messages": [' + user + b", -0, " + bad + b", " + user + b"]}"
    then = first[:-2] + b', {"role": "assistant", "content": "ok"}, 0, ' + user + b"]}"
    replay(CHAT_API, plan_of("chat", name), [first, then])
    # The second review's case: the first request went as it came (nothing to repair), so the
    # resumed run has no repaired bytes to copy: its list is written as a full run writes it.
    first = b'{"model": "m", "messages": [' + user + b", -0, 1E2, " + user + b"]}"
    then = first[:-2] + b', {"role": "assistant", "tool_calls": []}, ' + user + b"]}"
    replay(CHAT_API, plan_of("chat", name), [first, then])


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
def test_an_integer_past_64_bits_does_not_stop_a_session_growing(
    separators: tuple[str, str],
) -> None:
    """orjson reads an integer past 64 bits as a float, and writes it so: the message that holds
    one is not orjson's writing, and the standard library read it as an integer, so the list was
    not found the same and the entry stopped growing there (every later request then parsed
    and walked all the turns after it). It is read as orjson reads it now: each request reuses
    the one before, and a repaired body keeps the client's digits, as a full run does."""
    history: list[Any] = [TURN[0], {"role": "assistant", "content": "x", "tool_calls": []}]
    bodies = []
    for turn in range(6):
        history = [*history, {"role": "user", "content": f"q{turn}"}]
        if turn == 2:
            history.append({"role": "user", "content": "n", "big": 18446744073709551616})
        payload = {"model": "m", "messages": history}  # orjson cannot write it: httpx can
        bodies.append(json.dumps(payload, separators=separators).encode())
    cache = replay(CHAT_API, plan_of("chat", "deepseek"), bodies)
    assert cache.counts == {"hit": 5, "miss": 1, "skip": 0}
    reading = PrefixCache()
    reused = [reading.read("s", CHAT_API, body).reused for body in bodies]
    assert reused == [0] + [body.rindex(b"]") for body in bodies[:-1]]
    written = sanitize_body(bodies[-1], plan_of("chat", "deepseek"), "chat").body
    assert b'"big": 18446744073709551616' in written or b'"big":18446744073709551616' in written


def _shot(n: int) -> bytes:
    """A one-shot call in compact bytes: a conversation of its own, 10 KB."""
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": f"{n:05}" * 2000}]})


def _books_hold(cache: PrefixCache) -> None:
    """The cache's books, counted again from its entries: what it charges, its bound, and
    that each entry kept is in its space and each space's in the order of use."""
    kept = cache._lru
    assert cache.charged == sum(entry.charge for entry in kept.values())
    assert cache.charged <= cache.config.max_bytes
    held = 0
    for name, place in cache._spaces.items():
        assert place.entries and all(entry.space == name for entry in place.entries)
        assert all(kept.get(id(entry)) is entry for entry in place.entries)
        held += len(place.entries)
    assert held == len(kept)


@settings(max_examples=examples(0.5), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=60), st.integers(3, 30))
def test_the_bound_and_its_books_hold_over_any_traffic(
    steps: list[tuple[int, int]], room: int
) -> None:
    """Sessions that grow, rewrite their last turn, retry and repair, and one-shot calls, in
    four spaces, under a bound of a few entries: after each request the books hold."""
    plan = plan_of("chat", "deepseek")
    cache = PrefixCache(PrefixConfig(max_bytes=room * ENTRY_BYTES))
    turns = [0] * 4
    for number, (space, kind) in enumerate(steps):
        if kind == 0:
            turns[space] += 1
        body = _grown(f"s{space}", turns[space]) if kind < 3 else _shot(number)
        if kind == 1:  # its last turn rewritten (Claude Code's moving marker)
            body = body.replace(b" now", b" now, marked")
        if kind == 4:  # a turn the rules repair, resumed from the record kept
            body = orjson.dumps({"messages": [*TURN, {"role": "assistant", "tool_calls": []}]})
        reading = cache.read(space, CHAT_API, body)
        _books_hold(cache)
        cache.repair(reading, body, plan, "chat", parsed=reading.payload)
        _books_hold(cache)


def test_a_repair_charging_its_entry_more_drops_another_entry_not_its_own() -> None:
    """A review's case: the repair of a request keeps the rules' record with its entry, charged
    then; when another request came between its read and its repair (the stash's wait), its
    entry is the least recently used, and the bound dropped it rather than the next least
    recently used."""
    plan = plan_of("chat", "deepseek")
    ours, theirs = bench_session(30, "stuck", seed=3), bench_session(30, "stuck", seed=4)

    def run(bound: int) -> tuple[PrefixCache, int]:
        cache = PrefixCache(PrefixConfig(max_bytes=1 << 40))
        for body in (ours[4], theirs[4], ours[5], theirs[5]):  # both entries reused once
            space = "ours" if body in ours else "theirs"
            cache.repair(cache.read(space, CHAT_API, body), body, plan, "chat", parsed=None)
        reading = cache.read("ours", CHAT_API, ours[6])
        cache.read("theirs", CHAT_API, theirs[6])  # meanwhile: ours is the least recently used
        before = cache.charged
        cache.configure(PrefixConfig(max_bytes=bound))  # within it, until the record is kept
        cache.repair(reading, ours[6], plan, "chat", parsed=reading.payload)
        return cache, before

    probe, before = run(1 << 40)
    assert probe.charged > before  # the record it keeps is charged
    cache, _ = run(before + (probe.charged - before) // 2)
    assert "ours" in cache._spaces and "theirs" not in cache._spaces
    assert cache._spaces["ours"].entries[0].carried is not None


def _grown(tag: str, turns: int) -> bytes:
    """A session's body after ``turns`` turns of 3 KB."""
    messages: list[dict[str, str]] = [{"role": "system", "content": f"system {tag}"}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"{tag} q{turn} " + "u" * 1500})
        messages.append({"role": "assistant", "content": f"{tag} a{turn} " + "a" * 1500})
    messages.append({"role": "user", "content": f"{tag} q{turns} now"})
    return orjson.dumps({"model": "m", "messages": messages})


def test_a_key_with_sessions_in_parallel_pushes_out_other_keys_ended_sessions() -> None:
    """A review's case, against a rule that made a space past a quarter of the bound pay with
    its own entries (tried, and undone): a key running two sessions in parallel, the rest of
    the cache held by other keys' sessions that ended, missed 9 of its last requests (its own
    active entries went, the others' idle ones stayed until their ttl). The least recently
    used go."""
    probe = PrefixCache()
    probe.read("p", CHAT_API, _grown("x", 20))
    clock = [0.0]
    cache = PrefixCache(PrefixConfig(max_bytes=6 * probe.charged), clock=lambda: clock[0])
    for other in range(40):  # other keys' sessions of five turns, ended
        for turn in range(6):
            cache.read(("other", other), CHAT_API, _grown(f"o{other}", turn))
            clock[0] += 1
    outcomes = []
    for turn in range(21):
        for session in range(2):
            outcomes.append(cache.read("dev", CHAT_API, _grown(f"d{session}", turn)).outcome)
            clock[0] += 5
    assert outcomes == ["miss"] * 2 + ["hit"] * 40


def test_a_session_in_another_writing_among_one_shot_calls_gets_its_entry() -> None:
    """A review's case: a hit started a space's draws over with its count, so the misses
    read after each hit were always the same ones (the 1st, 2nd, 23rd, 61st...), and a session
    in another writing whose request came 3rd to 22nd after a hit never got its entry. The
    draws go on; the count starts over."""
    for shots in (3, 10):
        cache, compact, spaced, outcomes = PrefixCache(), [TURN[0]], [TURN[1]], []
        for turn in range(150):
            compact.append({"role": "user", "content": f"qa {turn}"})
            cache.read("s", CHAT_API, orjson.dumps({"messages": compact}))
            for k in range(shots):
                cache.read("s", CHAT_API, _one_shot(1000 * turn + k))
            spaced.append({"role": "user", "content": f"qd {turn}"})
            outcomes.append(cache.read("s", CHAT_API, json.dumps({"messages": spaced}).encode()))
            spaced.append({"role": "assistant", "content": f"ad {turn}"})
        assert [r.outcome for r in outcomes].count("hit") >= 100, shots


def test_a_space_alone_fills_the_bound() -> None:
    """One key for every session (a team's gateway), twelve sessions starting together: its
    space holds as many sessions as the bound does (a gate on a space's entries, tried and
    undone, kept eight)."""
    sessions = [bench_session(20, "clean", seed=seed) for seed in range(12)]
    probe = PrefixCache()
    for session in sessions:
        probe.read(("probe", len(probe._spaces)), CHAT_API, session[-1])
    cache = PrefixCache(PrefixConfig(max_bytes=probe.charged + 4 * ENTRY_BYTES))
    for turn in range(min(map(len, sessions))):
        outcomes = [cache.read("s", CHAT_API, session[turn]).outcome for session in sessions]
        assert outcomes == ["miss" if turn == 0 else "hit"] * len(sessions), turn


def test_a_session_sharing_its_space_with_one_shot_calls_hits_again_after_a_compaction() -> None:
    """A review's case, against a gate (tried, and undone) that let a space make an entry on one
    miss in 32 once it had missed eight times since its last hit: a session sharing its key with 20
    one-shot calls a turn that compacts its history (one miss) then missed 18 of its next 24
    requests. Every miss makes its entry: the next request hits."""
    cache, history, outcomes = PrefixCache(), [{"role": "system", "content": "Be brief."}], []
    for turn in range(40):
        if turn == 20:  # compacted: a summary in place of the history
            history = [history[0], {"role": "user", "content": "Summary of turns 0-19."}]
        history = [*history, {"role": "user", "content": f"question {turn}"}]
        outcomes.append(cache.read("s", CHAT_API, orjson.dumps({"messages": history})).outcome)
        history = [*history, {"role": "assistant", "content": f"answer {turn}"}]
        for n in range(20):
            cache.read("s", CHAT_API, _shot(20 * turn + n))
    assert outcomes == ["miss"] + ["hit"] * 19 + ["miss"] + ["hit"] * 19


def test_a_nested_list_key_before_the_real_one_is_not_reused() -> None:
    """The first ``"messages":[`` is a nested one holding the same bytes as the list: the entry
    is made there, and the hit's parse finds its key is not a top-level one."""
    body = orjson.dumps({"metadata": {"messages": TURN}, "messages": TURN})
    _, reading = two(body, body)
    assert reading.outcome == "miss"
    assert same_json(reading.payload, orjson.loads(body))


def test_sessions_of_other_credentials_never_meet() -> None:
    first = orjson.dumps({"messages": TURN})
    cache = PrefixCache()
    cache.read("alice", CHAT_API, first)
    assert cache.read("bob", CHAT_API, first).outcome == "miss"
    assert cache.read("alice", CHAT_API, first).outcome == "hit"


def test_entries_expire_and_the_switch_turns_it_off() -> None:
    now = [0.0]
    cache = PrefixCache(PrefixConfig(ttl=10), clock=lambda: now[0])
    body = orjson.dumps({"messages": TURN})
    cache.read("s", CHAT_API, body)
    now[0] = 9.0
    assert cache.read("s", CHAT_API, body).outcome == "hit"  # used: lives 10 s more
    now[0] = 30.0
    assert cache.read("s", CHAT_API, body).outcome == "miss"
    cache.configure(PrefixConfig(enabled=False))
    assert cache.entries == 0
    assert cache.read("s", CHAT_API, body) is SKIP


@SETTINGS
@given(tail=st.binary(max_size=40), keep=st.integers(0, 60))
def test_any_bytes_after_a_cached_prefix_parse_as_a_full_parse_does(tail: bytes, keep: int) -> None:
    """Fuzz: the second body is the first up to some point, then anything."""
    first = orjson.dumps({"messages": TURN + NEXT, "model": "m"})
    cut = first.index(b"]") - keep
    second = first[: max(cut, 1)] + tail
    _, reading = two(first, second)
    try:
        expected = orjson.loads(second)
    except orjson.JSONDecodeError:
        assert reading is SKIP
        return
    if reading.payload is not None:
        assert same_json(reading.payload, expected)


# ---------------------------------------------------------------------------------------------
# The walk goes on where it stopped
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(broken=broken_transcripts(max_turns=4), at=st.integers(0, 40))
def test_a_walk_that_goes_on_gives_the_signals_of_one_walk(broken: Any, at: int) -> None:
    """...and knows where the arguments are bad as the prescan that reads the list does."""
    items = broken.messages
    at = min(at, len(items))
    _, state = walk(items[:at])
    signals, after = walk(items[at:], state) if state is not None else (None, None)
    assert signals == scan(items)
    reads_the_list = getattr(bad_arguments_at, "__wrapped__")  # noqa: B009
    if after is not None:
        assert primed(after) == {bad_arguments_at: reads_the_list(items)}
    with memo.run():
        scan(items)
        assert bad_arguments_at(items) == reads_the_list(items)


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


def test_ten_thousand_sessions_stay_inside_the_bound() -> None:
    """10,000 distinct sessions of three requests each through a 16 MiB cache: what it charges
    stays within the bound, and what it really holds (traced allocations) too."""
    bound = 16 * 1024 * 1024
    cache = PrefixCache(PrefixConfig(max_bytes=bound))
    template = bench_session(12, "clean-kimi", seed=5)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for number in range(10_000):
        marker = f'"You are session {number}. '.encode()
        for body in template[:3]:
            cache.read(number, CHAT_API, body.replace(b'"You are ', marker, 1))
        assert cache.charged <= bound
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert cache.entries < 10_000  # the oldest went
    assert held <= bound, f"{held} bytes held for a {bound} byte bound"


#: What the cache may hold per byte it charges (docs/performance.md#prefix, SECURITY.md):
#: never more than it charges, measured in traced allocations.
HELD_PER_CHARGE = 1.0


@contextmanager
def _tracing() -> Iterator[None]:
    """Allocations traced from here on, the process's objects so far frozen (``gc.freeze``):
    a collection inside walks only what was made since, not a long-lived xdist worker's heap
    (two full collections per example were most of the charge tests' time in the suite)."""
    gc.collect()
    gc.freeze()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()
        gc.unfreeze()


def _traced_by_the_cache(*more: str) -> int:
    """The bytes still live that the cache's code allocated since tracing began (its parses and
    entries: ``proxy/relay/prefix.py`` and the walks it calls in ``rules/``; ``more``: files
    that stand in for the server's other parts), not what other threads of the test process
    allocate meanwhile (a pytest-xdist worker keeps some)."""
    places = ("*/proxy/relay/*", "*/rules/*", *more)
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, place) for place in places]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


def _warm(bodies: Sequence[bytes], api: Api, plan: Plan | None) -> None:
    """``bodies`` through a cache of their own, repaired under ``plan``: what the process keeps
    the first time (memos, caches) is then not traced as the cache's."""
    warm = PrefixCache()
    for body in bodies:
        reading = warm.read("s", api, body)
        if plan is not None:
            warm.repair(reading, body, plan, api.name, parsed=None)


def _held(
    bodies: Sequence[bytes],
    api: Api = CHAT_API,
    plan: Plan | None = None,
    check: Callable[[Reading, Sanitized], None] | None = None,
) -> tuple[int, int, int]:
    """One session's ``bodies`` through a fresh, unbounded cache: the bytes it then holds
    (traced allocations still live), what it charges, and what the charge before issue 36
    (4 bytes per byte of prefix, 40 per message, 2 KiB per entry) would have been. With a
    ``plan``, each body is repaired too (what the run keeps for the next request is held),
    and ``check`` is given each reading and what its repair made."""
    cache = PrefixCache(PrefixConfig(max_bytes=1 << 40))
    for body in bodies:  # orjson's key cache is the process's, not the prefix cache's: filled
        orjson.loads(body)
    _warm(bodies, api, plan)  # and so are the rules' memos (the walks', a plan's steps)
    with _tracing():
        for body in bodies:
            reading = cache.read("s", api, body)
            if plan is not None:
                through = cache.repair(reading, body, plan, api.name, parsed=reading.payload)
                if check is not None:
                    check(reading, through)
                del through
            del reading
        gc.collect()
        held = _traced_by_the_cache()
    entries = list(cache._lru.values())
    old = sum(4 * len(e.prefix) + len(e.head) + 2048 + 40 * len(e.items) for e in entries)
    return held, cache.charged, old


def _content(value: Any, copies: int) -> bytes:
    return orjson.dumps({"messages": [{"role": "user", "content": [value] * copies}]})


#: Bodies made of small values, the shapes that cost the most objects per byte: empty
#: containers, nested ones, small strings and numbers, wide characters, an object of distinct
#: keys (too many for orjson's key cache; longer than it caches), a turn of many tool calls.
TINY = {
    "empty objects": _content({}, 30_000),
    "empty lists": _content([], 30_000),
    "nested objects": _content({"a": {"b": {}}}, 20_000),
    "one-key objects": _content({"a": "b"}, 20_000),
    "lists of one": _content([[1]], 20_000),
    "short strings": _content("a", 30_000),
    "wide strings": _content("\u00e9", 30_000),
    "astral strings": _content("\U0001f600", 30_000),
    "numbers": orjson.dumps({"messages": [{"role": "user", "content": list(range(1000, 31000))}]}),
    "floats": _content(1.5, 30_000),
    "long keys": orjson.dumps(
        {"messages": [{"role": "user", "content": {"k" * 65 + str(n): "v" for n in range(43691)}}]}
    ),
    "tiny messages": orjson.dumps({"messages": [{"role": "user", "content": "a"}] * 10_000}),
    "tool calls": orjson.dumps(
        {
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{n}", "type": "function", "function": {"name": "f"}}
                        for n in range(5000)
                    ],
                },
            ]
        }
    ),
    "one wide text": orjson.dumps(
        {"messages": [{"role": "user", "content": "x" * 100_000 + "\U0001f600"}] * 4}
    ),
}


@pytest.mark.parametrize("shape", sorted(TINY))
def test_what_the_cache_holds_is_at_most_its_charge(shape: str) -> None:
    """Was: bodies of tiny containers held up to 6x what they were charged (670 MB at the
    default 128 MiB). Now the charge counts their values: whatever a body is made of, the
    cache holds (traced allocations) at most ``HELD_PER_CHARGE`` times what it charges. The
    control: the charge before fell short of what the same bodies hold, for the shapes whose
    values are containers."""
    body = TINY[shape]
    # The body, then a session going on from it (a hit extends the entry).
    grown = body[:-2] + b',{"role":"user","content":[{},{},{}]}]}'
    held, charged, old = _held([body, grown])
    assert charged > 0  # an entry was made, and kept
    assert held <= HELD_PER_CHARGE * charged, f"{held} held for {charged} charged"
    if shape in ("empty objects", "empty lists", "nested objects", "one-key objects"):
        assert held > 3 * old, f"the control: {held} held for {old} charged before"


@pytest.mark.parametrize("writing", ["json.dumps", "dotnet"])
def test_escaped_wide_characters_are_charged_what_they_hold(writing: str) -> None:
    """Was: a long text with one character past U+FFFF, written with ASCII escapes
    (``json.dumps``' default, .NET's), was charged at the ASCII rate, its bytes being ASCII,
    while Python holds four bytes for each of its characters: 2.97 times its charge."""
    value = orjson.loads(TINY["one wide text"])
    body = WRITINGS[writing](value)
    grown = WRITINGS[writing]({"messages": [*value["messages"], *NEXT]})
    assert body.isascii()
    held, charged, _ = _held([body, grown])
    assert held <= HELD_PER_CHARGE * charged, f"{held} held for {charged} charged"


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["clean", "clean-kimi", "stuck", "broken"])
def test_an_agent_session_is_charged_what_it_holds(workload: str) -> None:
    """The benchmark's sessions (120 requests, each a hit extending the entry): the cache holds
    at most its charge, and no less than a third of it (a charge far above what is held would
    crowd sessions out for nothing)."""
    held, charged, _ = _held(bench_session(120, workload, seed=3))
    assert charged / 3 <= held <= HELD_PER_CHARGE * charged, (held, charged)


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["stuck", "broken", "stuck-spaced"])
def test_what_resumed_repairs_keep_is_charged(workload: str) -> None:
    """The records resumed repairs keep (the body written, the marks, the messages rules made:
    ``PrefixCache.keep``) are charged too: a session repaired on every request holds (traced
    allocations) at most what its entry is charged."""
    plan = plan_of("chat", "deepseek")
    cache = PrefixCache(PrefixConfig(max_bytes=1 << 40))
    with _tracing():
        for body in bench_session(120, workload, seed=3):
            reading = cache.read("s", CHAT_API, body)
            through = cache.repair(reading, body, plan, parsed=reading.payload)
            del reading, through
        gc.collect()
        held = _traced_by_the_cache()
    (entry,) = cache._lru.values()
    assert entry.carried is not None and entry.carried_charge > 0
    assert held <= HELD_PER_CHARGE * cache.charged, (held, cache.charged)


@pytest.mark.parametrize("writing", ["orjson", "json.dumps", "indented"])
def test_messages_rules_make_are_charged_in_any_writing(writing: str) -> None:
    """A review's case: a body the rules rewrite (DeepSeek collapses text parts into one text)
    in a writing not orjson's, its list written whole: the messages the rules made, which the
    record the next request resumes from keeps, were charged nothing (1.22 times the charge
    held, for json.dumps' writing)."""
    plan = plan_of("chat", "deepseek")

    def message(n: int) -> dict[str, Any]:
        texts = ("x" * 50_000 + str(n), "y" * 50_000)
        return {"role": "user", "content": [{"type": "text", "text": text} for text in texts]}

    messages = [message(n) for n in range(4)]
    bodies = [
        WRITINGS[writing]({"model": "deepseek-chat", "messages": messages[:k]}) for k in (3, 4)
    ]

    def repaired(reading: Reading, through: Sanitized) -> None:
        assert through.changes and reading.layout is not None
        assert reading.layout.entry.own is (writing == "orjson")

    held, charged, _ = _held(bodies, plan=plan, check=repaired)
    assert held <= 1.01 * charged, (held, charged)


def _recalled(payload: dict[str, Any], keys: list[str], size: int) -> RequestFacts:
    """What a stash holding every turn's reasoning (``size`` characters each) gives a request:
    fresh texts each time, as a store's answer is (Redis), allocated here (traced with the
    cache's, below)."""
    wanted = _turn_keys(payload, "scope")
    texts = {key: "".join(("reasoning of ", key, " ", "x" * size)) for key in wanted if key in keys}
    return RequestFacts("scope", texts, wanted=wanted)


@pytest.mark.slow
@pytest.mark.parametrize("size", [500, 20_000])
def test_a_thinking_session_holds_what_it_is_charged_with_its_facts(size: int) -> None:
    """A DeepSeek thinking session whose every turn's reasoning is recalled keeps, in its
    resumed record, the facts its steps were given (the keys and the texts: the store's
    answer, new each request, so not the kept messages' copies): charged too. Long reasoning
    (20,000 characters a turn) held more than it was charged while only the keys were."""
    plan = plan_of("chat", "deepseek-reasoner")
    session = _thinking(bench_session(120, "clean", seed=3))[:-1]  # the last one runs whole
    keys = _turn_keys(orjson.loads(session[-1]), "scope")
    cache = PrefixCache(PrefixConfig(max_bytes=1 << 40))
    with _tracing():
        for body in session:
            reading = cache.read("s", CHAT_API, body)
            assert reading.payload is not None
            given = _recalled(reading.payload, keys, size)
            through = cache.repair(reading, body, plan, parsed=reading.payload, given=given)
            resumed = through.resumed
            del reading, through, given
        assert resumed  # kept: a resumed run's record, its old messages an earlier request's
        gc.collect()
        held = _traced_by_the_cache(f"*/{__name__.replace('.', '/')}.py")
    (entry,) = cache._lru.values()
    assert entry.carried is not None and entry.carried_charge > 0
    facts = [ctx.given for _, ctx in entry.carried.steps if ctx.given.recalled]
    assert facts and len(facts[0].recalled) == len(keys)  # the record holds them
    assert held <= HELD_PER_CHARGE * cache.charged, (held, cache.charged)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@settings(SETTINGS, max_examples=examples(0.1))
@given(data=st.data())
def test_generated_sessions_hold_at_most_their_charge(api: str, data: st.DataObject) -> None:
    items = RENDER[api](data.draw(conversations(FATES_ALL)))
    field = APIS[api].field
    session = bodies(items, data.draw(cuts(len(items))), {"model": "m"}, field)
    held, charged, _ = _held(session, APIS[api])
    assert held <= HELD_PER_CHARGE * charged, (held, charged)


def test_one_body_over_the_bound_is_not_kept() -> None:
    cache = PrefixCache(PrefixConfig(max_bytes=1024))
    body = orjson.dumps({"messages": [{"role": "user", "content": "x" * 2048}]})
    assert cache.read("s", CHAT_API, body).outcome == "miss"
    assert cache.entries == 0 and cache.charged == 0


@pytest.mark.parametrize("api", [RESPONSES_API, MESSAGES_API])
def test_every_api_reuses_the_parse(api: Api) -> None:
    """...and what its walk (if it has one: Messages) knows of the whole list, walked over the
    new items only."""
    items = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    first = orjson.dumps({"model": "m", api.field: items[:1]})
    second = orjson.dumps({"model": "m", api.field: items})
    cache = PrefixCache()
    cache.read("s", api, first)
    reading = cache.read("s", api, second)
    assert reading.outcome == "hit"
    assert same_json(reading.payload, orjson.loads(second))
    walk = api.resumable
    assert reading.walked.signals == ({} if walk is None else {walk.scan: walk.scan(items)})


@pytest.mark.parametrize("depth", range(247, 257))
def test_a_body_written_from_its_layout_fails_where_orjson_fails(depth: int) -> None:
    """orjson writes at most 255 levels, counted from the body's top: a message copied from
    the body, or written alone, must not get through where the whole body would not."""
    deep: Any = "x"
    for _ in range(depth):
        deep = [deep]
    broken = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{'a': 1}"}}
        ],
    }
    answer = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    history = [{"role": "user", "content": deep}, broken, answer]
    session = [
        json.dumps({"messages": history[:cut], "model": "m"}, separators=(",", ":")).encode()
        for cut in (1, 2, 3)  # the compact bytes orjson would write, if it could
    ]
    cache = replay(CHAT_API, plan_of("chat", "deepseek"), session)
    assert cache.counts["hit"] == (2 if depth < 252 else 0)  # 252: the body is 256 deep


def test_a_layout_writes_what_orjson_writes_whatever_the_rules_left() -> None:
    """Messages dropped, added, moved, or none left: ``Layout.write`` is ``orjson.dumps``."""
    items = [{"role": "user", "content": f"m{n}"} for n in range(8)]
    body = orjson.dumps({"model": "m", "messages": items, "temperature": 0.2})
    reading = PrefixCache().read("s", CHAT_API, body)
    assert reading.layout is not None and reading.payload is not None
    kept = reading.payload["messages"]
    made = {"role": "user", "content": "new"}
    for listed in (
        [],
        kept,
        kept[:3] + kept[5:],
        [made, *kept],
        [*kept[:2], made, *kept[2:]],
        kept[::-1],
        [kept[0], kept[7]],
    ):
        payload = {**reading.payload, "messages": listed}
        assert reading.layout.write(body, payload, "messages") == orjson.dumps(payload)


def test_a_moved_cache_marker_reuses_what_comes_before_it() -> None:
    """Claude Code marks its newest turn: the last message of each body differs from the same
    message in the next one, and the next body is read from the message before it on."""
    history = [
        {"role": "user", "content": [{"type": "text", "text": f"turn {n}"}]} for n in range(8)
    ]
    session = bodies(history, [2, 4, 6, 8], {"model": "m"}, "messages", marked=True)
    cache = replay(MESSAGES_API, plan_of("messages", "anthropic"), session)
    assert cache.counts == {"hit": 3, "miss": 1, "skip": 0}
    assert cache.entries == 1


# ---------------------------------------------------------------------------------------------
# The signed-duplicates check follows the new turn
# ---------------------------------------------------------------------------------------------


def _doubled(session: list[bytes], where: str) -> list[bytes]:
    """``session`` with a signed object that repeats a key from its second half on: the
    thinking block of the first assistant turn that half adds (``turn``), or the request's
    own fields (``fields``: a top-level ``signature``, and ``stream`` twice)."""
    half = len(session) // 2
    if where == "fields":
        doubled = b',"signature":"s","stream":true}'
        return [*session[:half], *(body[:-1] + doubled for body in session[half:])]
    before = len(orjson.loads(session[half])["messages"])
    turns = orjson.loads(session[-1])["messages"]
    turn = next(m for m in turns[before:] if m["role"] == "assistant")
    block = turn["content"][0]
    signed = b'"signature":' + orjson.dumps(block["signature"])
    assert block["type"] == "thinking" and session[-1].count(signed) == 1
    return [body.replace(signed, signed + b',"thinking":"again"') for body in session]


@pytest.mark.parametrize("where", ["turn", "fields"])
@pytest.mark.parametrize("name", ["anthropic", "deepseek", "kimi"])
def test_a_signed_session_is_checked_only_where_it_grows(
    name: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code with extended thinking: every assistant turn opens with a signed thinking
    block, and a stuck session is rewritten on every request, so each one is checked for a
    signed object that repeats a key (rules/providers/sanitize.py). Through the cache, each
    request after the first it checked reads only what it adds (the top-level fields and its
    new messages): what its prefix holds was read for an earlier request. What it forwards is
    a full run's, and a repeated key is still found where a full run finds it: in a block a
    later turn adds (the cache reads that body whole: its bytes are not orjson's), or in the
    request's own fields."""
    clean = api_session("messages", 60, "stuck-split", seed=11, thinking=True)
    doubled = _doubled(clean, where)
    plan = plan_of("messages", name)
    read: list[int] = []
    check = sanitize.signed_duplicates

    def counted(raw: bytes) -> bool:
        read.append(len(raw))
        return check(raw)

    monkeypatch.setattr(sanitize, "signed_duplicates", counted)
    for session in (clean, doubled):
        cache = PrefixCache()
        for number, body in enumerate(session):
            full = sanitize_body(body, plan, "messages")
            read.clear()
            reading = cache.read("s", MESSAGES_API, body)
            through = cache.repair(reading, body, plan, "messages", parsed=reading.payload)
            assert (through.body, through.changes, through.skipped) == (
                full.body,
                full.changes,
                full.skipped,
            ), number
            rewritten = through.body != body or through.skipped is not None
            assert len(read) == rewritten, number  # a body the rules rewrote is checked
            if session is doubled and body != clean[number]:
                assert through.skipped == "duplicate_signed_keys", number
            elif rewritten and number >= 4:  # from the first checked request's prefix on
                fields = {k: v for k, v in orjson.loads(body).items() if k != "messages"}
                added = len(body) - len(session[number - 1])
                assert read[0] <= added + len(orjson.dumps(fields)) + 20, (number, read[0])
        assert cache.counts["hit"] == len(session) - 1


def test_a_signature_key_with_an_escaped_letter_is_checked() -> None:
    """JSON may escape any letter of a key: ``"\\u0073ignature"`` reads as ``signature``, so a
    signed block that repeats a key is found however its key is written."""
    block = b'{"type":"thinking","thinking":"a","\\u0073ignature":"s","thinking":"b"}'
    body = b'{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text",'
    body += b'"text":"hi"}]},{"role":"assistant","content":[' + block + b"]},"
    body += b'{"role":"assistant","content":[{"type":"text","text":"again"}]}]}'
    assert sanitize.signed_duplicates(body)
    result = sanitize_body(body, plan_of("messages", "anthropic"), "messages")
    assert result.skipped == "duplicate_signed_keys" and result.body == body


# ---------------------------------------------------------------------------------------------
# Recalled facts: a thinking session whose stash restores each turn's reasoning resumes
# ---------------------------------------------------------------------------------------------


def _turn_keys(payload: dict[str, Any], scope: str) -> list[str]:
    """The keys a DeepSeek thinking request's turns ask the stash for, written out here: one
    per assistant tool-call turn without its ``reasoning_content`` (the rule's own reading is
    what is judged)."""
    keys = [
        reasoning_content.turn_key(scope, message["tool_calls"])
        for message in payload["messages"]
        if message.get("role") == "assistant"
        and message.get("tool_calls")
        and not (message.get("reasoning_content") or "").strip()
    ]
    return [key for key in keys if key is not None]


def replay_recalled(
    session: list[bytes], stores: Sequence[dict[str, str]], plan: Plan
) -> tuple[int, list[bool]]:
    """Each request of ``session`` given what its own ``stores`` entry holds for the keys its
    turns want (as the proxy's stash lookup gives it, ``RequestFacts.wanted`` included), through
    a resuming cache, against a full run given the same facts; how many requests resumed,
    and which."""
    cache, resumed = PrefixCache(), []
    for number, (body, store) in enumerate(zip(session, stores, strict=True)):
        wanted = _turn_keys(orjson.loads(body), "scope")
        recalled = {key: store[key] for key in wanted if key in store}
        given = RequestFacts("scope", recalled, wanted=wanted)
        full = sanitize_body(body, plan, "chat", given=given)
        reading = cache.read("s", CHAT_API, body)
        through = cache.repair(reading, body, plan, "chat", parsed=reading.payload, given=given)
        where = (number, reading.outcome, through.resumed)
        assert through.body == full.body, where
        assert through.changes == full.changes, where
        assert through.failures == full.failures, where
        resumed.append(through.resumed)
    return sum(resumed), resumed


def _thinking(session: list[bytes]) -> list[bytes]:
    return [orjson.dumps({**orjson.loads(body), "model": "deepseek-reasoner"}) for body in session]


@pytest.mark.parametrize("workload", ["clean", "stuck", "stuck-split"])
def test_a_thinking_session_whose_reasoning_is_recalled_resumes(workload: str) -> None:
    """DeepSeek in thinking mode, a client that drops ``reasoning_content`` (most do), and the
    stash restoring each tool-call turn's reasoning: every request is given one more recalled
    value than the last, so it made a new plan, and ran every rule over the whole history
    (1.1 ms a request at 300 messages). Facts that say the same of the old turns (the same
    value, or none again, for every key they asked for) now let the rules resume: as often as
    with nothing recalled at all, but for the first request given a value (the one before was
    given none, so it did not say which keys it asked for)."""
    session = _thinking(bench_session(60, workload, seed=11))
    last = orjson.loads(session[-1])
    store = {key: f"reasoning {n}" for n, key in enumerate(_turn_keys(last, "scope"))}
    plan = plan_of("chat", "deepseek-reasoner")
    count, resumed = replay_recalled(session, [store] * len(session), plan)
    _, without = replay_recalled(session, [{}] * len(session), plan)
    first = next(n for n, body in enumerate(session) if _turn_keys(orjson.loads(body), "scope"))
    assert [*resumed[:first], True, *resumed[first + 1 :]] == [
        *without[:first],
        True,
        *without[first + 1 :],
    ], (resumed, without)
    assert count >= len(session) - 5, resumed


def test_a_value_recalled_later_for_an_old_turn_runs_the_rules_whole() -> None:
    """A turn's reasoning the stash did not hold for a request (the response stored late, a
    race) but holds for the next: that turn is decided anew (restored, not the placeholder),
    so the request runs whole; a value that changed, likewise."""
    session = _thinking(bench_session(60, "clean", seed=11))
    keys = _turn_keys(orjson.loads(session[-1]), "scope")
    full = {key: f"reasoning {n}" for n, key in enumerate(keys)}
    late = dict(full)
    del late[keys[1]]
    changed = {**full, keys[2]: "other reasoning"}
    at = len(session) // 2
    for later in (full, changed):
        stores = [late if number < at else later for number in range(len(session))]
        if later is changed:
            stores = [full if number < at else changed for number in range(len(session))]
        _, resumed = replay_recalled(session, stores, plan_of("chat", "deepseek-reasoner"))
        assert not resumed[at] and all(resumed[at + 1 : at + 4])


@SETTINGS
@given(data=st.data())
def test_generated_thinking_sessions_resume_as_their_facts_allow(data: st.DataObject) -> None:
    """Generated histories, cut as sessions, each request given what a changing stash holds
    (values added, dropped and replaced between requests): every request forwards what a full
    run given the same facts forwards."""
    items = data.draw(clean_transcripts(max_turns=4))
    points = data.draw(cuts(len(items)))
    session = _thinking(bodies(items, points, {"model": "deepseek-reasoner"}, "messages"))
    keys = _turn_keys(orjson.loads(session[-1]), "scope") if session else []
    stores: list[dict[str, str]] = []
    store: dict[str, str] = {}
    for _ in session:
        for key in keys:
            move = data.draw(st.sampled_from(("keep", "keep", "keep", "add", "drop", "change")))
            if move == "add" or (move == "change" and key in store):
                store[key] = data.draw(st.sampled_from(("a", "b", " ", "")))
            elif move == "drop":
                store.pop(key, None)
        stores.append(dict(store))
    replay_recalled(session, stores, plan_of("chat", "deepseek-reasoner"))


class _Store:
    """What ``proxy.stash.Stash.recall`` gives: the keys found, or nothing while the store
    fails (its error, and the retry window after it); and every lookup asked of it."""

    def __init__(self) -> None:
        self.held: dict[str, str] = {}
        self.down = False
        self.asked: list[list[str]] = []

    async def recall(self, keys: Sequence[str]) -> dict[str, str]:
        self.asked.append(list(keys))
        return {} if self.down else {key: self.held[key] for key in keys if key in self.held}


def _claude_code_turns(turns: int, session: str) -> bytes:
    """A Messages request in thinking mode whose ``turns`` tool-use turns came without their
    thinking (a client that drops it)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": f"task {session}"}]}
    ]
    for turn in range(turns):
        use = {"type": "tool_use", "id": f"toolu_{session}_{turn}", "name": "Read", "input": {}}
        result = {"type": "tool_result", "tool_use_id": use["id"], "content": "ok"}
        messages += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    request = {"model": "claude-sonnet-4-5", "max_tokens": 64, "thinking": thinking}
    return orjson.dumps({**request, "messages": messages})


def _use_key(session: str, turn: int) -> str:
    use = {"type": "tool_use", "id": f"toolu_{session}_{turn}", "name": "Read", "input": {}}
    key = missing_thinking.turn_key("scope", [use])
    assert key is not None
    return key


async def _look_up(
    hooks: ReasoningHooks, planner: Planner, raw: bytes, reading: Any
) -> RequestReasoning:
    """The stash lookup of a Messages request as the server does it (proxy/server/trip.py
    ``_recall_here``, then ``ReasoningHooks.recall``), over the prefix cache's ``reading`` of
    it (``None``: the body alone, as without the cache)."""
    found = hooks.read(
        planner,
        raw,
        "scope",
        api="messages",
        mark=b'"tool_use"',
        parsed=None if reading is None else reading.payload,
        carried=None if reading is None else reading.resume,
    )
    assert found is not None
    if found.wanted:
        await hooks.recall(found)
    return found


async def test_two_sessions_of_one_key_and_betas_each_ask_for_their_own_turns() -> None:
    """Claude Code's main agent and a subagent: one credential, the same ``anthropic-beta``
    values. A plan given betas and nothing recalled was remembered by scope and betas, with
    the keys the first such request asked for (``RequestFacts.wanted``); the next session's
    request then took another session's keys for its own last request's, asked the store for
    them, skipped its own turn, and sent a placeholder where the whole run restores the turn's
    thinking. Each request, through the cache, works out the keys its whole body wants, asks
    the store only for what its last request was not given, and forwards what the whole run
    forwards."""
    planner, store = Planner("deepseek"), _Store()
    hooks = ReasoningHooks(None, cast(Any, None))
    hooks.stash = cast(Any, store)
    cache = PrefixCache()
    betas = frozenset({"interleaved-thinking-2025-05-14"})

    async def lookup(raw: bytes, reading: Any) -> tuple[RequestReasoning, RequestFacts]:
        found = await _look_up(hooks, planner, raw, reading)
        return found, replace(found.given, betas=betas)  # the server's given_to_rules

    async def through(raw: bytes, session: str) -> tuple[list[str], Any, Any]:
        reading = cache.read(("route", "messages", session), MESSAGES_API, raw)
        found, given = await lookup(raw, reading)
        served = cache.repair(reading, raw, planner, "messages", parsed=found.payload, given=given)
        found, given = await lookup(raw, None)  # the oracle: the whole body, no cache
        whole = sanitize_body(raw, planner, "messages", given=given)
        return list(found.wanted), served, whole

    await through(_claude_code_turns(1, "x"), "x")  # the other session: its turn not stored
    thought = [{"type": "thinking", "thinking": "read it first", "signature": "sig"}]
    store.held[_use_key("s", 0)] = missing_thinking.stored_form(thought)
    store.down = True  # this session's turn is stored, but its first lookup fails
    await through(_claude_code_turns(1, "s"), "s")
    store.down = False
    store.held.update({_use_key("s", n): missing_thinking.stored_form(thought) for n in (1, 2)})
    for turns in (2, 3):
        store.asked.clear()
        wanted, served, whole = await through(_claude_code_turns(turns, "s"), "s")
        assert wanted == [_use_key("s", n) for n in range(turns)], turns
        # The store is asked for what the last request was not given: after the blip, every
        # turn; then the new turn only (the values found before are given again).
        assert store.asked[0] == (wanted if turns == 2 else wanted[-1:]), turns
        assert (served.body, served.changes) == (whole.body, whole.changes), turns
        assert [change.action for change in whole.changes] == ["restored_thinking"] * turns


def _memos_keep_own_facts() -> list[str]:
    """The memos of plans and steps (rules/engine/resume.py, rules/providers/sanitize.py,
    rules/providers/planner.py) that hold a step given one request's own facts."""

    def own(steps: Any) -> bool:
        return any(ctx.given.own for _, ctx in steps)

    found = []
    if any(own(steps) for steps, _ in resume._FACTS.values()):
        found.append("_FACTS")
    if any(ctx.given.own for ctx, _ in resume._STEPS.values()):
        found.append("_STEPS")
    if any(any(step.ctx.given.own for step in facts) for facts, _ in resume._WOKEN.values()):
        found.append("_WOKEN")
    if any(own(steps) for steps, _ in sanitize._READABLE.values()):
        found.append("_READABLE")
    if any(own(made.steps) for _, made in planning._GIVEN.values()):
        found.append("_GIVEN")
    return found


async def test_no_memo_keeps_one_requests_facts() -> None:
    """Claude Code in thinking mode with a cold stash: every request asks for its turns' keys
    and is given none back, with its betas. Each such request's plan is its own (it holds the
    keys it asked for): the memos of plans and steps, which live as long as the process, must
    not keep it, nor the plans of requests given values."""
    planner, store = Planner("deepseek"), _Store()
    hooks = ReasoningHooks(None, cast(Any, None))
    hooks.stash = cast(Any, store)
    cache, betas = PrefixCache(), frozenset({"interleaved-thinking-2025-05-14"})
    for turns in range(1, 8):
        if turns == 5:  # from here on the store holds the first turn's thinking
            thought = [{"type": "thinking", "thinking": "first", "signature": "sig"}]
            store.held[_use_key("m", 0)] = missing_thinking.stored_form(thought)
        raw = _claude_code_turns(turns, "m")
        reading = cache.read("s", MESSAGES_API, raw)
        found = await _look_up(hooks, planner, raw, reading)
        assert found.wanted
        given = replace(found.given, betas=betas)
        assert given.own
        cache.repair(reading, raw, planner, "messages", parsed=found.payload, given=given)
        assert _memos_keep_own_facts() == [], turns


async def test_a_session_is_given_again_what_it_was_given_and_asks_for_the_rest() -> None:
    """A session's request that is its last one plus a turn is given again the values its last
    request was given (while the prefix cache keeps the session), and asks the store only for
    the rest: its new turn, and a turn the last request got nothing for. So a value the store
    has since dropped (its TTL, its bound, an outage) still reaches the turn it was restored to,
    and a value stored late is still found."""
    planner, store = Planner("deepseek"), _Store()
    hooks = ReasoningHooks(None, cast(Any, None))
    hooks.stash = cast(Any, store)
    cache = PrefixCache()
    keys = [_use_key("k", n) for n in range(3)]
    store.held[keys[0]] = _thought("first")  # the first turn's is stored, the second's is late
    sent = []
    for turns in (2, 3):
        if turns == 3:
            del store.held[keys[0]]  # dropped from the store meanwhile
            store.held[keys[1]] = _thought("second")  # stored late
        store.asked.clear()
        raw = _claude_code_turns(turns, "k")
        reading = cache.read("s", MESSAGES_API, raw)
        found = await _look_up(hooks, planner, raw, reading)
        served = cache.repair(
            reading, raw, planner, "messages", parsed=found.payload, given=found.given
        )
        sent.append(_thoughts_sent(served.body))
        assert store.asked == [keys[:2] if turns == 2 else keys[1:3]], turns
    assert sent == [["first", "placeholder"], ["first", "second", "placeholder"]]


def _thought(text: str) -> str:
    """What the stash keeps of a turn whose thinking is ``text``."""
    return missing_thinking.stored_form([{"type": "thinking", "thinking": text, "signature": "s"}])


def _thoughts_sent(body: bytes) -> list[str]:
    """The thinking each assistant turn of a Messages body opens with: its text, or
    ``placeholder`` for one no stash gave (an unsigned block)."""
    out = []
    for message in orjson.loads(body)["messages"]:
        if message["role"] == "assistant":
            block = message["content"][0]
            assert block["type"] == "thinking"
            out.append(block["thinking"] if block["signature"] else "placeholder")
    return out


async def test_a_new_turn_with_an_old_turns_calls_gets_what_a_whole_lookup_gives() -> None:
    """Two turns with the same calls (a per-turn counter for ids, the same tool and input) have
    one stash key, and the store keeps its newest text. A request that is the last one plus
    such a turn asks the store for the new turn's key even though the last request was given
    a text for it, as a lookup of the whole body does (a hostile review found the old text
    kept, the body then depending on whether the prefix cache kept the session)."""
    planner, store = Planner("deepseek"), _Store()
    hooks = ReasoningHooks(None, cast(Any, None))
    hooks.stash = cast(Any, store)
    cache = PrefixCache()
    use = {"type": "tool_use", "id": "toolu_0", "name": "Read", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_0", "content": "ok"}
    thinking = {"type": "enabled", "budget_tokens": 1024}
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    key = missing_thinking.turn_key("scope", [use])
    assert key is not None
    sent = []
    for turn in ("first", "second"):
        store.held[key] = _thought(turn)  # the store keeps the newest text of the key
        history += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
        raw = orjson.dumps(
            {
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "thinking": thinking,
                "messages": history,
            }
        )
        reading = cache.read("s", MESSAGES_API, raw)
        found = await _look_up(hooks, planner, raw, reading)
        served = cache.repair(
            reading, raw, planner, "messages", parsed=found.payload, given=found.given
        )
        alone = await _look_up(hooks, planner, raw, None)  # the oracle: no cache
        whole = sanitize_body(raw, planner, "messages", given=alone.given)
        assert served.body == whole.body, turn
        sent.append(_thoughts_sent(served.body))
    # The first turn gets the key's newest text; the second, whose id
    # messages-duplicate-tool-use-ids renames before the thinking rule runs, keys nothing.
    assert sent == [["first"], ["second", "placeholder"]]
