"""The log lines, byte for byte, as the configured chain writes them (``configure_logging``:
proxy/observe/log.py) and as docs/observability.md#logs documents them: the event's fields in
the order the call names them, ``event``, the request's context (``request_id``, then ``worker``
under ``--workers``), ``level``, ``timestamp``; every field capped, the client's text withheld
unless the request's route logs content.

The expected lines are written out here, not made by the code under test: a field renamed,
moved, a cap or a withheld value changed fails a test."""

from __future__ import annotations

import contextvars
import io
import logging
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog
from aiohttp.test_utils import make_mocked_request
from hypothesis import given, settings
from hypothesis import strategies as st

import proxy.observe.accounting
from proxy.observe import log as logmod
from proxy.observe.accounting import Accounting
from proxy.observe.flow import Flow
from proxy.observe.log import (
    CONTENT_ALLOWED,
    LIBRARY_LOGGERS,
    SINK,
    Render,
    cap,
    cap_fields,
    configure_logging,
    get_logger,
)
from proxy.observe.metrics import Metrics
from rules.engine.base import Change
from rules.providers.sanitize import Sanitized
from tests.budget import examples

ROOT = Path(__file__).resolve().parents[2]
#: 2026-11-30T22:41:07.532118Z, as ``time.time_ns`` gives it.
NOW_NS = 1_796_078_467_532_118_000
STAMP = "2026-11-30T22:41:07.532118Z"
REQUEST_ID = "4b1f0c6e9a2d4f3c8e7a6b5c4d3e2f1a"
CHAT = "/v1/chat/completions"
SECRET = "the user's own words: my password is hunter2"


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[str]]]:
    """The chain ``chatmend serve`` configures, writing into a buffer at a fixed time; the
    accounting's logger a fresh one (a module's logger keeps the chain it first wrote with).
    Gives the lines written so far."""
    buffer = io.BytesIO()
    monkeypatch.setattr(SINK, "file", buffer)
    monkeypatch.setattr(time, "time_ns", lambda: NOW_NS)
    monkeypatch.setattr(proxy.observe.accounting, "log", get_logger())
    monkeypatch.setattr(proxy.observe.accounting, "ms", lambda since: 412.7)
    libraries = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    kept = [(lib.handlers[:], lib.level, lib.propagate) for lib in libraries]
    configure_logging()
    try:
        yield lambda: buffer.getvalue().decode().splitlines()
    finally:
        structlog.reset_defaults()
        for library, (handlers, level, propagate) in zip(libraries, kept, strict=True):
            library.handlers[:], library.level, library.propagate = handlers, level, propagate


def in_request(run: Callable[[], None], **context: Any) -> None:
    """``run`` in a context of its own with ``context`` bound (as the flow and the worker bind
    it): nothing leaks into the test's context."""

    def bound() -> None:
        structlog.contextvars.bind_contextvars(**context)
        run()

    contextvars.copy_context().run(bound)


def flow(**fields: Any) -> Flow:
    request = make_mocked_request("POST", CHAT)
    done = Flow(request, REQUEST_ID, fields.pop("client_request_id", None))
    for name, value in fields.items():
        setattr(done, name, value)
    return done


def test_request_done_of_a_clean_request(written: Callable[[], list[str]]) -> None:
    clean = flow(
        status=200,
        upstream_ms=410.9,
        sanitize_ms=0.21,
        outcome="completed",
        prefix="hit",
        route="default",
        api="chat",
    )
    in_request(lambda: Accounting(Metrics()).done(clean), request_id=REQUEST_ID)
    assert written() == [
        '{"client_request_id":null,"method":"POST","path":"/v1/chat/completions","status":200,'
        '"duration_ms":412.7,"upstream_ms":410.9,"sanitize_ms":0.21,"changes":0,'
        '"outcome":"completed","prefix":"hit","event":"request_done",'
        f'"request_id":"{REQUEST_ID}","level":"info","timestamp":"{STAMP}"}}'
    ]


def test_a_worker_bound_context_comes_after_the_request_id(
    written: Callable[[], list[str]],
) -> None:
    """The context's keys keep one order whatever order they were bound in (structlog's
    ``merge_contextvars`` wrote them in an order that changed with each process's hash seed)."""
    done = flow(status=499, outcome="client_disconnected", client_request_id="client-7")

    def run() -> None:
        structlog.contextvars.bind_contextvars(request_id=REQUEST_ID)
        Accounting(Metrics()).done(done)

    in_request(run, worker=1)  # bound first, as ``chatmend serve --workers`` does
    assert written() == [
        '{"client_request_id":"client-7","method":"POST","path":"/v1/chat/completions",'
        '"status":499,"duration_ms":412.7,"upstream_ms":null,"sanitize_ms":null,"changes":0,'
        '"outcome":"client_disconnected","prefix":null,"event":"request_done",'
        f'"request_id":"{REQUEST_ID}","worker":1,"level":"info","timestamp":"{STAMP}"}}'
    ]


def _repaired(*changes: Change) -> Flow:
    result = Sanitized(b"{}", changes=changes, profile="deepseek")
    return flow(sanitized=result, profile="deepseek", api="chat")


#: A repaired body's changes: a safe one, a lossy one whose detail holds the client's text
#: (``original``), a lossy drop (``content``), a long id over the string cap, a list over the
#: item cap, a mapping nested past four levels, and a replaced value (``value``, a long one).
CHANGES = (
    Change("duplicate-tool-call-ids", 3, "renamed_id", {"from": "terminal:0", "to": "t:0_d2"}),
    Change(
        "invalid-tool-arguments",
        5,
        "replaced_unrepairable",
        {"tool_call_id": "call_1", "original_length": len(SECRET), "original": SECRET},
    ),
    Change(
        "orphan-tool-results",
        6,
        "dropped_result",
        {"tool_call_id": "x" * 300, "reason": "unknown_id", "content_length": 44},
    ),
    Change("empty-tool-calls", 7, "dropped_key", {"ids": list(range(150))}),
    Change("empty-tool-calls", 8, "dropped_key", {"deep": {"a": {"b": {"c": [1]}}}}),
    Change("request-values", -1, "replaced", {"field": "tool_choice", "value": SECRET}),
)
_IDS = ",".join(str(n) for n in range(100))
#: Each change as the line lists it; ``{original}`` and ``{value}`` where the client's text
#: stands or is withheld.
LISTED = (
    '{"rule":"duplicate-tool-call-ids","index":3,"action":"renamed_id","from":"terminal:0",'
    '"to":"t:0_d2"}',
    '{"rule":"invalid-tool-arguments","index":5,"action":"replaced_unrepairable",'
    '"tool_call_id":"call_1","original_length":44,"original":{original},"safety":"lossy"}',
    '{"rule":"orphan-tool-results","index":6,"action":"dropped_result","tool_call_id":"'
    + "x" * 256
    + '...[300 chars]","reason":"unknown_id","content_length":44,"safety":"lossy"}',
    '{"rule":"empty-tool-calls","index":7,"action":"dropped_key","ids":['
    + _IDS
    + ',"...[50 more]"]}',
    '{"rule":"empty-tool-calls","index":8,"action":"dropped_key","deep":{"a":{"b":"..."}}}',
    '{"rule":"request-values","index":-1,"action":"replaced","field":"tool_choice",'
    '"value":{value},"safety":"unsafe"}',
)
WITHHELD = '"...[44 chars, not logged: log_content is off]"'
TEXT = orjson.dumps(SECRET).decode()


def _sanitized_line(rules: str, listed: str, context: str) -> str:
    count = sum(int(n) for n in re.findall(r":(\d+)", rules))
    return (
        f'{{"path":"/v1/chat/completions","profile":"deepseek","count":{count},'
        f'"rules":{{{rules}}},"changes":[{listed}],"event":"payload_sanitized",{context}'
        f'"level":"info","timestamp":"{STAMP}"}}'
    )


def _shown(listed: str, content: bool) -> str:
    text = TEXT if content else WITHHELD
    return listed.replace("{original}", text).replace("{value}", text)


ALL_RULES = (
    '"duplicate-tool-call-ids":1,"invalid-tool-arguments":1,"orphan-tool-results":1,'
    '"empty-tool-calls":2,"request-values":1'
)


def test_payload_sanitized_withholds_the_clients_text(written: Callable[[], list[str]]) -> None:
    in_request(lambda: Accounting(Metrics()).repaired(_repaired(*CHANGES)), request_id=REQUEST_ID)
    listed = _shown(",".join(LISTED), content=False)
    assert written() == [_sanitized_line(ALL_RULES, listed, f'"request_id":"{REQUEST_ID}",')]
    assert "hunter2" not in written()[0]


def test_payload_sanitized_keeps_it_where_the_route_logs_content(
    written: Callable[[], list[str]],
) -> None:
    in_request(
        lambda: Accounting(Metrics()).repaired(_repaired(*CHANGES)),
        request_id=REQUEST_ID,
        worker=0,
        **{CONTENT_ALLOWED: True},
    )
    listed = _shown(",".join(LISTED), content=True)
    context = f'"request_id":"{REQUEST_ID}","worker":0,'
    assert written() == [_sanitized_line(ALL_RULES, listed, context)]


@pytest.mark.parametrize("content", [False, True])
@pytest.mark.parametrize("n", range(len(CHANGES)))
def test_each_change_alone(written: Callable[[], list[str]], n: int, content: bool) -> None:
    """One change a line: its cap or its withheld text decides the line by itself (a line
    with nothing to cap is passed on as it is)."""
    change = CHANGES[n]
    context = {CONTENT_ALLOWED: True} if content else {}
    in_request(
        lambda: Accounting(Metrics()).repaired(_repaired(change)),
        request_id=REQUEST_ID,
        **context,
    )
    rules = f'"{change.rule}":1'
    expected = _sanitized_line(rules, _shown(LISTED[n], content), f'"request_id":"{REQUEST_ID}",')
    assert written() == [expected]


def test_a_long_list_of_changes_is_cut_where_the_log_caps_it(
    written: Callable[[], list[str]],
) -> None:
    many = tuple(Change("empty-tool-calls", n, "dropped_key", {}) for n in range(150))
    in_request(lambda: Accounting(Metrics()).repaired(_repaired(*many)), request_id=REQUEST_ID)
    (line,) = written()
    listed = ",".join(
        f'{{"rule":"empty-tool-calls","index":{n},"action":"dropped_key"}}' for n in range(99)
    )
    assert line == (
        '{"path":"/v1/chat/completions","profile":"deepseek","count":150,'
        f'"rules":{{"empty-tool-calls":150}},"changes":[{listed},"...[51 more]"],'
        f'"event":"payload_sanitized","request_id":"{REQUEST_ID}","level":"info",'
        f'"timestamp":"{STAMP}"}}'
    )


def test_a_call_site_field_named_like_the_context_wins(written: Callable[[], list[str]]) -> None:
    """A field the call names keeps its place and value (``merge_contextvars``' ``setdefault``);
    the levels are the method's."""

    def run() -> None:
        log = get_logger()
        log.warning("worker_exited", worker=3, code=1)
        log.error("rule_failed", rule="r", error="KeyError", where="x.py:1")

    in_request(run, worker=1)
    assert written() == [
        f'{{"worker":3,"code":1,"event":"worker_exited","level":"warning","timestamp":"{STAMP}"}}',
        '{"rule":"r","error":"KeyError","where":"x.py:1","event":"rule_failed","worker":1,'
        f'"level":"error","timestamp":"{STAMP}"}}',
    ]


def test_the_documented_lines_are_the_lines_written(
    written: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/observability.md#logs shows a repaired request's two lines: the same request,
    rendered at the same times, gives them byte for byte."""
    text = (ROOT / "docs" / "observability.md").read_text()
    documented = re.search(r'<a id="logs"></a>.*?```json\n(.*?)```', text, re.S)
    assert documented is not None
    shown = documented[1].splitlines()
    renamed = {"from": "terminal:0", "to": "terminal:0_d2"}
    changes = (
        Change("duplicate-tool-call-ids", 3, "renamed_id", renamed),
        Change("empty-tool-calls", 5, "dropped_key", {"was": "empty_list"}),
    )
    repaired = _repaired(*changes)
    done = flow(status=200, upstream_ms=410.9, sanitize_ms=0.21, changes=2, prefix="miss")
    done.outcome = "completed"
    accounting = Accounting(Metrics())
    steps = (lambda: accounting.repaired(repaired), lambda: accounting.done(done))
    for line, step in zip(shown, steps, strict=True):
        at = datetime.fromisoformat(orjson.loads(line)["timestamp"])
        monkeypatch.setattr(time, "time_ns", lambda at=at: _ns(at))
        in_request(step, request_id=orjson.loads(line)["request_id"])
    assert written() == shown


def _ns(at: datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000


# The capping path against the capping law: ``cap`` is the law, field by field; the processor
# passes a line on as it is only where the law writes the same bytes.

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.sampled_from(["auto", "x" * 256, "x" * 257]),
)
_keys = st.one_of(
    st.sampled_from(["original", "content", "output", "value", "rule", "x" * 257]),
    st.text(max_size=8),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, min_size=99, max_size=102).map(tuple),
        st.dictionaries(_keys, inner, max_size=4),
    ),
    max_leaves=40,
)


def _wrapped(path: list[str | None], leaf: Any) -> Any:
    """``leaf`` in a container per step of ``path``, innermost last: a list for ``None``, a
    mapping under the key given."""
    for step in reversed(path):
        leaf = [leaf] if step is None else {step: leaf}
    return leaf


#: A value nested from three to seven levels, around the fourth one ``cap`` stops at.
_deep = st.builds(_wrapped, st.lists(st.one_of(st.none(), _keys), min_size=3, max_size=7), _values)


@settings(max_examples=examples(2), deadline=None)  # 200 under the ci and dev profiles
@given(st.dictionaries(_keys, st.one_of(_values, _deep), max_size=6), st.booleans())
def test_capping_writes_what_the_law_writes(fields: dict[str, Any], content: bool) -> None:
    event = {**fields, "event": "e"}
    law: dict[str, Any] = {}
    for key, value in event.items():
        if not content and logmod._private(key, value):
            law[key] = logmod.withheld(value)
        else:
            law[key] = value if key in logmod.UNCAPPED else cap(value, content=content)
    line = cap_fields(None, "info", {**event, CONTENT_ALLOWED: content})
    assert orjson.dumps(line) == orjson.dumps(law)


def test_the_context_is_merged_as_structlog_merges_it() -> None:
    """``Render`` reads structlog's variables itself: the same keys and values as
    ``merge_contextvars``, the content mark consumed."""
    render = Render()
    assert render.variables is not None  # structlog keeps them where Render reads them

    def run() -> None:
        structlog.contextvars.bind_contextvars(
            worker=2, request_id="r", other="o", **{CONTENT_ALLOWED: True}
        )
        structlog.contextvars.unbind_contextvars("other")
        merged = structlog.contextvars.merge_contextvars(None, "info", {"event": "e"})
        event: dict[str, Any] = {"event": "e"}
        assert render.merge(None, "info", event) is True
        assert event == {k: v for k, v in merged.items() if k != CONTENT_ALLOWED}
        assert list(event) == ["event", "request_id", "worker"]

    contextvars.copy_context().run(run)


def test_a_level_below_the_configured_one_writes_nothing(
    written: Callable[[], list[str]],
) -> None:
    """``configure_logging(level)`` as ``bench.observe`` calls it; a library's record comes as
    a ``library_log`` line at its level, without its text."""
    configure_logging(logging.WARNING)

    def run() -> None:
        log = get_logger()
        log.info("request_done", status=200)
        log.log(logging.INFO, "library_log")
        log.log(logging.ERROR, "rule_failed", rule="r")
        log.warn("shutdown_draining")
        logging.getLogger("aiohttp.server").warning("bad header %s", SECRET)

    in_request(run, request_id=REQUEST_ID)
    context = f'"request_id":"{REQUEST_ID}"'
    assert written() == [
        f'{{"rule":"r","event":"rule_failed",{context},"level":"error","timestamp":"{STAMP}"}}',
        f'{{"event":"shutdown_draining",{context},"level":"warning","timestamp":"{STAMP}"}}',
        '{"logger":"aiohttp.server","where":"test_log_lines:'
        + str(run.__code__.co_firstlineno + 6)
        + f'","error":null,"event":"library_log",{context},"level":"warning",'
        f'"timestamp":"{STAMP}"}}',
    ]
