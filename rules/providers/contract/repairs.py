"""Which rules repair each catalogued rejection: the one table recovery (proxy/recovery/retry.py)
and ``chatmend check --error`` read, gathered from the check records (``Check.repair``, declared
next to each check's text and examples).

A ``Repair`` names the rules that, switched on with its options over the request's plan, make
the check of that error class pass (tests/rules/test_repairs.py runs each on the check's own
examples). The options are the strict ones the provider's refusal calls for: the upstream has
already said no, so a repair may do more than the profile's minimal setting would (the whole
field allowlist, every empty content shape, any model). Several rules stand in one repair where
one refusal has several causes: an unanswered call may be a split turn, a displaced result or a
dangling call, and the pairing rules only ever act where their own defect is.

What a repair may change is its rules' fix safety (``Rule.safety``): recovery runs its ``safe``
and ``unsafe`` changes (the refusal named the class) and its ``lossy`` ones only where the route
opts in (``recover.lossy``). Where a rule can keep the client's data or drop it, the checks ask
for the keeping form: an orphan result kept as text, a refused role renamed, thinking parts moved
to ``reasoning_content``. Every check carries a repair (tests/rules/test_checks.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rules.providers.contract import CHECKS
from rules.providers.contract.base import Check, Settings
from rules.providers.contract.messages import MESSAGES_CHECKS
from rules.providers.contract.responses import CHECKS as RESPONSES_CHECKS


@dataclass(frozen=True, slots=True)
class Repair:
    """The rules that repair one error class of one API (``chat``, ``responses`` or
    ``messages``)."""

    code: str
    api: str
    rules: Settings


def _table(api: str, checks: Iterable[Check]) -> Mapping[str, Repair]:
    return {check.code: Repair(check.code, api, check.repair) for check in checks if check.repair}


#: Error class -> its repair, per API.
REPAIRS: Mapping[str, Mapping[str, Repair]] = {
    "chat": _table("chat", CHECKS),
    "responses": _table("responses", RESPONSES_CHECKS),
    "messages": _table("messages", MESSAGES_CHECKS),
}


def repair_for(api: str, code: str) -> Repair | None:
    """The repair of error class ``code`` for a request of ``api``, if a rule has one."""
    return REPAIRS.get(api, {}).get(code)
