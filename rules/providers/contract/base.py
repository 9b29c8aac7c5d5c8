"""The vocabulary of provider contracts: Check (one rejection a provider gives), Found, Violation.

A check finds every place a payload breaks one provider rule; the violation it reports carries
the provider's own error text (docs/providers.md), filled in with indices and ids only, never
with message content. A profile lists the checks its provider applies, each with overrides:
``text`` (that provider's wording of the same rejection), ``status`` (its HTTP status) and the
check's own options.
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
