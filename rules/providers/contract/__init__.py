"""The provider contract, checked: what a strict provider would reject, with its own words.

``violations(payload, contract)`` lists every rejection the provider a profile describes would
give a chat-completions payload. Each check (``Check``) encodes one rule with the provider's
error text (docs/providers.md, the section cited next to it), and a profile's contract names the
checks its provider applies, with that provider's wording and status where it differs. The rules are
built to leave nothing here: the proxy runs it after a rewrite and logs what is left as
``contract_violation``; ``chatmend check`` prints it; ``chatmend emulate`` and the tests' strict
fake upstream answer with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.providers.contract import (
    content,
    fields,
    ids,
    order,
    pairing,
    reasoning,
    request,
    sequence,
)
from rules.providers.contract.base import Check, Found, Violation

#: Every check chatmend knows, by family.
CHECKS: tuple[Check, ...] = (
    *pairing.CHECKS,
    *request.CHECKS,
    *ids.CHECKS,
    *sequence.CHECKS,
    *order.CHECKS,
    *content.CHECKS,
    *fields.CHECKS,
    *reasoning.CHECKS,
)
CHECKS_BY_CODE: Mapping[str, Check] = {check.code: check for check in CHECKS}

#: A contract: the codes of the checks a provider applies, each with its overrides (``text``,
#: ``status``, options). Order is the order rejections are reported in.
Contract = Mapping[str, Mapping[str, Any]]

#: The strict DeepSeek-style contract of the default profile: every pairing and shape check.
DEFAULT_CONTRACT: Contract = {
    **{check.code: {} for check in pairing.CHECKS},
    "bookkeeping_field": {},  # Moonshot/Kimi, Fireworks (NousResearch/hermes-agent#47868)
}

NOT_CHAT = "Failed to deserialize the JSON body into the target type"


def violations(payload: Any, contract: Contract | None = None) -> list[Violation]:
    """Every rejection ``contract`` (default: ``DEFAULT_CONTRACT``) gives this chat payload, in
    contract order (empty: accepted)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        return [Violation("not_chat", None, NOT_CHAT)]
    messages: list[Any] = payload["messages"]
    found: list[Violation] = []
    for code, overrides in (DEFAULT_CONTRACT if contract is None else contract).items():
        found.extend(CHECKS_BY_CODE[code].run(messages, payload, overrides))
    return found


__all__ = [
    "CHECKS",
    "CHECKS_BY_CODE",
    "DEFAULT_CONTRACT",
    "Check",
    "Contract",
    "Found",
    "Violation",
    "violations",
]
