"""How a rule says when it has work: the signals of its API's scan (``Rule.scan``) that can wake
it (``Rule.woken_by``). The pipeline walks each distinct scan once and skips a rule none of whose
signals is set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Signals:
    """A rule's ``woken_by`` that does not depend on its options: a plain object, so a plan can be
    pickled for the worker processes big bodies are repaired in (a lambda cannot)."""

    names: frozenset[str]

    def __call__(self, options: Mapping[str, Any]) -> frozenset[str]:
        return self.names


def on(*names: str) -> Signals:
    """The ``woken_by`` of a rule that may act whenever one of ``names`` is set."""
    return Signals(frozenset(names))
