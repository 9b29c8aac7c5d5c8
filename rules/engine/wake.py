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


#: A request-level rule's signals are the request's top-level keys, each with this prefix: the
#: pipeline sets ``FIELD + key`` for every key of the request as the earlier rules left it.
FIELD = "field:"


def fields(*keys: str) -> Signals:
    """The ``woken_by`` of a request-level rule (``Rule.reads_request``, no ``Rule.scan``) that
    can act only when the request has one of the top-level ``keys``."""
    return Signals(frozenset(FIELD + key for key in keys))


@dataclass(frozen=True, slots=True)
class FieldsOf:
    """The ``woken_by`` of a request-level rule whose keys are those of its option ``option`` (a
    mapping of request keys): picklable, like ``Signals``. An option that is not a mapping wakes
    the rule always (``None``)."""

    option: str

    def __call__(self, options: Mapping[str, Any]) -> frozenset[str] | None:
        value = options.get(self.option)
        if not isinstance(value, Mapping):
            return None
        return frozenset(FIELD + key for key in value if isinstance(key, str))


@dataclass(frozen=True, slots=True)
class FieldsNamed:
    """The ``woken_by`` of a request-level rule that acts on the top-level keys its options
    name: a list of names, or a mapping whose keys are names or dotted paths (their first
    step). Picklable, like ``Signals``; nothing named wakes nothing."""

    options: tuple[str, ...]

    def __call__(self, options: Mapping[str, Any]) -> frozenset[str]:
        keys: set[str] = set()
        for name in self.options:
            value = options.get(name)
            if isinstance(value, list | Mapping):
                keys.update(key.split(".", 1)[0] for key in value if isinstance(key, str))
        return frozenset(FIELD + key for key in keys)


def field_signals(request: Mapping[str, Any]) -> frozenset[str]:
    """The signals of a request's top-level keys, for the steps ``fields`` declares."""
    return frozenset(FIELD + key for key in request if isinstance(key, str))
