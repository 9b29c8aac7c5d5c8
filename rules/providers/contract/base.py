"""The vocabulary of provider contracts: Check (one rejection a provider gives), Found, Violation.

A check finds every place a payload breaks one provider rule; the violation it reports carries
the provider's own error text (docs/providers.md), filled in with indices and ids only, never
with message content. A profile lists the checks its provider applies, each with overrides:
``text`` (that provider's wording of the same rejection), ``status`` (its HTTP status) and the
check's own options.

A check is one record, declared once and read by everything that needs it: its text and status
(the contract, the emulator, the refusal reader), the requests it refuses (``examples``: the
catalogue rows, the repair tests, ``chatmend probe``), the repair that answers it (``repair``:
recovery, ``chatmend check --error``, docs/profiles.md) and which models the probe sends its
examples for (``probe_models``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Violation:
    """One rejection: chatmend's code, the message index (``None``: the whole request), the
    provider's error text and HTTP status. The text holds indices and ids, never content."""

    code: str
    index: int | None
    message: str
    status: int = 400

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "index": self.index, "message": self.message}


@dataclass(frozen=True, slots=True)
class Found:
    """Where a check found a defect, and the values its text template needs (``index`` is always
    available to the template; ``fields`` adds e.g. ``previous``, ``position``, ``role``)."""

    index: int | None
    fields: Mapping[str, Any] = field(default_factory=dict)


#: Rule name -> options: rules switched on with these options over a request's plan.
Settings = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Example:
    """A request a check refuses (its fields; ``model`` only where the check looks at it: the
    probe sends the model it probes, the catalogue rows ``some-model`` where none is given), and
    the check's options it was written for (``{}``: the check's defaults). A check has one per
    option value the profiles set that a single request cannot cover (tests/rules/test_checks.py
    holds every profile's setting of every check to one of them)."""

    request: Mapping[str, Any]
    options: Mapping[str, Any] = field(default_factory=dict)


#: ``find(messages, request, options)``: every place the payload breaks the rule. ``messages`` is
#: a list (of anything); ``request`` the whole payload (read-only); ``options`` the check's
#: options with the profile's overrides applied.
Find = Callable[[list[Any], Mapping[str, Any], Mapping[str, Any]], Iterable[Found]]


@dataclass(frozen=True, slots=True)
class Check:
    """One provider rule: how to find where a payload breaks it, and the words of the 400."""

    code: str
    summary: str
    find: Find
    #: The provider's error text, a ``str.format`` template over ``index`` and the Found's fields.
    text: str
    status: int = 400
    #: Options ``find`` reads, with their defaults; a profile may override them.
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Requests it refuses (``Example``).
    examples: tuple[Example, ...] = ()
    #: The rules that answer its refusal, with the options it calls for: switched on over the
    #: request's plan, they make it pass (recovery, ``rules.providers.contract.repairs``).
    repair: Settings = field(default_factory=dict)
    #: Model globs ``chatmend probe`` sends the examples for (empty: any model): a check only
    #: some models get (Gemini 3 validates thought signatures).
    probe_models: tuple[str, ...] = ()

    def run(
        self, messages: list[Any], request: Mapping[str, Any], overrides: Mapping[str, Any]
    ) -> list[Violation]:
        options = {**self.options, **overrides}
        text = options.pop("text", self.text)
        status = options.pop("status", self.status)
        found = self.find(messages, request, options)
        return [
            Violation(self.code, at.index, text.format(index=at.index, **at.fields), status)
            for at in found
        ]


def role_of(message: Any) -> str | None:
    """The role of a message, or ``None`` for a non-dict or a non-string role."""
    role = message.get("role") if isinstance(message, dict) else None
    return role if isinstance(role, str) else None
