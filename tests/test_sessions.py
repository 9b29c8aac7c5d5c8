"""tests/sessions.py builds what it says: growing sessions, each request the previous one plus a
turn, the stuck one carrying its one early defect in every later request; interleaved, each
session still extends its own."""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from rules.providers.planner import Planner
from rules.providers.sanitize import sanitize_body
from tests.sessions import WORKLOADS, interleaved, session


def _messages(body: bytes) -> list[Any]:
    messages: list[Any] = orjson.loads(body)["messages"]
    return messages


def test_each_request_is_the_previous_one_plus_a_turn() -> None:
    for workload in WORKLOADS:
        bodies = session(60, workload, seed=3)
        assert len(bodies) > 5, workload
        for before, after in itertools.pairwise(bodies):
            old, new = _messages(before), _messages(after)
            assert new[: len(old)] == old and len(new) > len(old), workload
            assert new[len(old)]["role"] == "assistant", workload


def test_the_stuck_session_carries_its_defect_and_the_clean_ones_none() -> None:
    plan = Planner().plan("deepseek-chat")
    stuck = session(60, "stuck", seed=3)
    repaired = [bool(sanitize_body(body, plan).changes) for body in stuck]
    first = repaired.index(True)
    assert first > 0 and all(repaired[first:]), repaired
    for workload in ("clean", "clean-empty", "clean-kimi"):
        assert not any(sanitize_body(b, plan).changes for b in session(60, workload, seed=3))
    broken = [bool(sanitize_body(b, plan).changes) for b in session(60, "broken", seed=3)]
    assert any(broken)


def test_interleaved_sessions_go_step_by_step_and_each_extends_its_own() -> None:
    bodies = interleaved("stuck", 3, 40)
    assert all(b"\n" not in body for body in bodies)  # one body per line for wrk's script
    for before, after in zip(bodies, bodies[3:], strict=False):  # the same session, a step on
        old, new = _messages(before), _messages(after)
        assert new[: len(old)] == old and len(new) > len(old)
