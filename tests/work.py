"""Linear-work claims proved by counting, not by a clock.

A test that says "n messages cost linear time" runs the same call on n and on ``factor * n``
inputs and counts the Python lines each executes (``sys.settrace``): the count is exact, so the
claim holds or fails the same way on an idle laptop and on a loaded CI runner. A rescan from
index 0 per message multiplies the count by about ``factor ** 2``; linear code by ``factor``.
The wall-clock side of the same claims (what a line costs, C-level copies) is measured by
``python -m bench.scaling`` (``make bench-scaling``), which reports the time ratios.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from rules.engine import known

T = TypeVar("T")

#: How far above ``factor`` the count ratio may go: allocation of a few more ids, a longer
#: digit string, a dict that resizes once more. A quadratic pass is at ``factor`` times over.
SLACK = 1.25


def lines_executed(work: Callable[[], Any]) -> int:
    """The Python lines ``work()`` executes, every frame it enters included (with nothing
    remembered from an earlier call: ``rules.engine.known`` is emptied first)."""
    known.forget()
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def enter(frame: FrameType, event: str, arg: Any) -> Any:
        return local

    previous = sys.gettrace()
    sys.settrace(enter)
    try:
        work()
    finally:
        sys.settrace(previous)
    return count


def assert_linear(
    build: Callable[[int], T], work: Callable[[T], Any], n: int, *, factor: int = 4
) -> tuple[int, int]:
    """Count ``work(build(n))`` and ``work(build(factor * n))``; the larger may cost at most
    ``factor * SLACK`` times the smaller. Returns both counts (for a test's own checks)."""
    work(build(max(1, n // 10)))  # first-call costs (imports, compiled patterns) out of the way
    small_input, large_input = build(n), build(factor * n)
    small = lines_executed(lambda: work(small_input))
    large = lines_executed(lambda: work(large_input))
    assert small > 0
    assert large <= small * factor * SLACK, (
        f"{factor}x the input cost {large / small:.1f}x the lines ({small} -> {large}): "
        f"more than linear (limit {factor * SLACK:.1f}x)"
    )
    return small, large
