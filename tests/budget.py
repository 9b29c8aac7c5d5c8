"""Hypothesis budgets relative to the run's profile (tests/conftest.py registers ``ci``, ``dev``
and ``deep``): a test whose strategy is costly, or whose property needs a wider search, asks for
a share of the profile's count instead of an absolute number, so ``deep`` deepens it too."""

from __future__ import annotations

from hypothesis import settings


def examples(scale: float) -> int:
    """``scale`` times the profile's ``max_examples`` (at least one)."""
    return max(1, round(settings().max_examples * scale))
