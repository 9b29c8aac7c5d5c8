"""How the time of the rules and of ``sanitize_body`` grows with the messages: the wall-clock
side of the linear-work tests.

The tests prove linear work by counting the Python lines a call executes (tests/work.py), which
holds the same on a loaded CI runner as on an idle laptop. What a count cannot see (C-level
copies, allocation, the collector) and what the absolute figures are, this measures: each case
at ``n / factor`` and ``n`` messages (the size its test once timed), best of ``--repeat`` with
the collector off, and reports the time ratio (``factor`` for linear work, ``factor ** 2`` for
a quadratic pass) and the time at ``n`` against the budget that test used to assert. Fixed
cases (hostile argument texts, the token cap) have one size and a budget.

Run: ``.venv/bin/python -m bench.scaling [--factor 10] [--repeat 3] [--only NAME] [--check]``,
or ``make bench-scaling``. ``--check`` exits 1 when a case is over its budget or ratio limit.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import tests.rules.test_consecutive_assistant_messages as assistants
import tests.rules.test_consecutive_user_messages as users
import tests.rules.test_displaced_tool_results as displaced
import tests.rules.test_duplicate_tool_call_ids as duplicates
import tests.rules.test_invalid_tool_arguments as arguments
import tests.rules.test_missing_tool_call_ids as missing
import tests.rules.test_orphan_tool_results as orphans
import tests.rules.test_replayed_history as replayed
import tests.rules.test_system_messages as systems
import tests.rules.test_tool_user_bridge as bridge
import tests.rules.test_unanswered_tool_calls as unanswered
from rules.chat import RULES, RULES_BY_NAME
from rules.engine import json_repair_passes
from rules.engine.pipeline import default_steps
from rules.providers.sanitize import sanitize_body
from tests.bodies import SCALING_SHAPES, scaled_body

#: A quadratic pass multiplies the time by ``factor ** 2``; linear code by about ``factor``, up
#: to 2.5 times that on a busy 2-core VM (allocation and GC grow a little faster than n).
RATIO_SLACK = 5.0
STEPS = default_steps(RULES)


def by_rule(name: str) -> Callable[[list[Any]], Any]:
    rule = RULES_BY_NAME[name]
    return lambda messages: rule.apply(messages, rule.context())


def sanitize(raw: bytes) -> Any:
    return sanitize_body(raw, STEPS)


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[int], Any]
    work: Callable[[Any], Any]
    #: The size the test timed; ``None`` for a fixed case (``build`` ignores its argument).
    n: int | None
    #: Seconds the test allowed at ``n`` (``None``: it asserted only the ratio).
    budget: float | None


def _shape(shape: str) -> Callable[[int], bytes]:
    return lambda n: scaled_body(shape, n)


def _fixed(value: Any) -> Callable[[int], Any]:
    return lambda _: value


def _cases() -> list[Case]:
    cases = [
        Case(f"sanitize_body/{shape}", _shape(shape), sanitize, 10_000, 5.0)
        for shape in sorted(SCALING_SHAPES)
    ]
    rule_cases: list[tuple[str, Callable[[int], Any], int, float]] = [
        ("consecutive-assistant-messages", assistants.one_run, 2_000, 0.5),
        ("consecutive-assistant-messages", assistants.split_turns, 500, 0.5),
        ("consecutive-user-messages", users.users, 20_000, 1.0),
        ("system-messages", systems.interleaved, 5_000, 1.0),
        ("orphan-tool-results", orphans.answered_twice, 2_000, 0.5),
        ("orphan-tool-results", orphans.orphans_between_texts, 1_000, 0.5),
        ("missing-tool-call-ids", missing.results_without_ids, 2_000, 0.5),
        ("missing-tool-call-ids", missing.padded_ids_reversed, 2_000, 0.5),
        ("unanswered-tool-calls", unanswered.unanswered, 1_000, 0.5),
        ("displaced-tool-results", displaced.displaced, 1_000, 0.5),
        ("displaced-tool-results", displaced.one_id_everywhere, 1_000, 0.5),
        ("duplicate-tool-call-ids", duplicates.terminal_turns, 1_000, 0.5),
        ("duplicate-tool-call-ids", duplicates.one_turn_one_id, 2_000, 0.5),
        ("tool-user-bridge", bridge.gaps, 1_000, 0.5),
        ("replayed-history", replayed.same_id_turns, 1_500, 2.0),
    ]
    cases += [
        Case(f"{rule}/{build.__name__}", build, by_rule(rule), n, budget)
        for rule, build, n, budget in rule_cases
    ]
    # The scan alone, uncapped (see _uncapped_scan): its test asserted only the ratio.
    repair = json_repair_passes.repair_object
    cases.append(Case("json-repair/repeated_items", arguments.repeated_items, repair, 80_000, None))
    stored, _ = replayed.stored_history(5)
    stored = [*stored, *stored[:180]]  # 403 messages
    replay = by_rule("replayed-history")
    cases.append(Case("replayed-history/403_stored", _fixed(stored), replay, None, 1.0))
    invalid = by_rule("invalid-tool-arguments")
    cases += [
        Case(
            f"invalid-tool-arguments/hostile_{i}",
            _fixed(arguments._messages(make(200_000))),
            invalid,
            None,
            5.0,
        )
        for i, make in enumerate(arguments.HOSTILE)
    ]
    wide = arguments._messages(arguments.WIDE)
    cases.append(Case("invalid-tool-arguments/past_the_cap", _fixed(wide), invalid, None, 2.0))
    return cases


@contextmanager
def _uncapped_scan(case: Case) -> Iterator[None]:
    """The repair-time case measures the scan, not its cap (as its test does)."""
    if case.name != "json-repair/repeated_items":
        yield
        return
    saved = json_repair_passes.MAX_SCAN_TOKENS
    json_repair_passes.MAX_SCAN_TOKENS = 10**7  # type: ignore[misc]
    try:
        yield
    finally:
        json_repair_passes.MAX_SCAN_TOKENS = saved  # type: ignore[misc]


def best_of(repeat: int, work: Callable[[Any], Any], value: Any) -> float:
    timings: list[float] = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            work(value)
            timings.append(time.perf_counter() - started)
        finally:
            gc.enable()
    return min(timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__)
    parser.add_argument("--factor", type=int, default=10, help="large size / small size")
    parser.add_argument("--repeat", type=int, default=3, help="timings per size (best kept)")
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    parser.add_argument("--check", action="store_true", help="exit 1 past a budget or ratio")
    args = parser.parse_args(argv)
    limit = args.factor * RATIO_SLACK
    print(f"| case | n | ms at n/{args.factor} | ms at n | ratio | budget ms | |")
    print("|---|---:|---:|---:|---:|---:|---|")
    over = 0
    for case in _cases():
        if args.only not in case.name:
            continue
        with _uncapped_scan(case):
            large = best_of(args.repeat, case.work, case.build(case.n or 0))
            if case.n is None:
                small_text, ratio_text, ratio_ok = "", "", True
            else:
                small_value = case.build(max(1, case.n // args.factor))
                small = best_of(args.repeat, case.work, small_value)
                ratio = large / max(small, 1e-9)
                small_text, ratio_text = f"{small * 1000:.2f}", f"{ratio:.1f}"
                ratio_ok = ratio < limit
        ok = ratio_ok and (case.budget is None or large < case.budget)
        over += not ok
        print(
            f"| {case.name} | {case.n or ''} | {small_text} | {large * 1000:.2f} | {ratio_text} "
            f"| {'' if case.budget is None else f'{case.budget * 1000:.0f}'} "
            f"| {'ok' if ok else 'OVER'} |"
        )
    print(f"\nratio limit {limit:.0f} (linear: {args.factor}, quadratic: {args.factor**2})")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
