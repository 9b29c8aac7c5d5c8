"""tests/work.py: the line counter behind the linear-work tests tells linear from quadratic."""

from __future__ import annotations

from typing import Any

import pytest

from tests.work import assert_linear, lines_executed


def linear(items: list[Any]) -> int:
    total = 0
    for item in items:
        total += item
    return total


def rescanning(items: list[Any]) -> int:
    """A rescan from index 0 per item, the shape of issue 15's bug."""
    total = 0
    for end in range(len(items)):
        for item in items[:end]:
            total += item
    return total


def test_the_count_is_exact_and_includes_nested_calls() -> None:
    assert lines_executed(lambda: linear([1] * 10)) == lines_executed(lambda: linear([2] * 10))
    assert lines_executed(lambda: linear([1] * 20)) == lines_executed(lambda: linear([1] * 10)) + 20


def test_linear_work_passes() -> None:
    small, large = assert_linear(lambda n: [1] * n, linear, 100)
    assert small < large <= 4 * small


def test_a_rescan_from_the_start_fails() -> None:
    with pytest.raises(AssertionError, match="more than linear"):
        assert_linear(lambda n: [1] * n, rescanning, 100)
