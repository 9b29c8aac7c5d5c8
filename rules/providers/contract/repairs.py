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

One defect is catalogued once per API, under that API's class (``TWINS``): a provider's words
catalogued as a chat class (MiniMax's "tool result's tool id(…) not found", ``orphan_tool_result``)
refuse a Responses request for the same defect, so recovery reads a class in the request's API
(``repair_in``): its own repair, else its twin's there.
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


#: The APIs in the order of a ``TWINS`` row.
TWIN_APIS = ("chat", "responses", "messages")
#: One defect under its class in each API (chat, Responses, Messages; ``None``: the API has no
#: class for it): the same pairing, id or argument law, stated once per API's shape. Only defects
#: that are the same law on both sides are twins (chat's ``thinking_type`` replaces ``enabled``,
#: Messages' ``messages_thinking_type`` asks for it: not twins).
TWINS: tuple[tuple[str | None, str | None, str | None], ...] = (
    # a result or output that answers no call
    ("orphan_tool_result", "responses_orphan_output", "messages_orphan_tool_result"),
    # a call that no result or output answers
    ("unanswered_tool_call", "responses_unanswered_call", "messages_unanswered_tool_use"),
    # arguments that are not a JSON object
    ("invalid_arguments", "responses_invalid_arguments", None),
    # two calls with one id
    ("duplicate_tool_call_id", None, "messages_duplicate_tool_use_id"),
    # two tools with one name
    ("duplicate_tool_names", None, "messages_duplicate_tool_names"),
    # the first message is not a user message
    ("first_not_user", None, "messages_first_not_user"),
    # user and assistant turns do not alternate
    ("roles_not_alternating", None, "messages_roles_alternate"),
    # a required or named tool_choice in thinking mode
    ("thinking_tool_choice", None, "messages_thinking_tool_choice"),
    # a tool declaration the endpoint does not run (a built-in or server tool)
    (None, "responses_server_tool", "messages_server_tool"),
)


def _twins() -> Mapping[tuple[str, str], str]:
    """(a class, an API) -> that class's twin in the API."""
    table: dict[tuple[str, str], str] = {}
    for row in TWINS:
        for code in row:
            for api, twin in zip(TWIN_APIS, row, strict=True):
                if code is not None and twin is not None and twin != code:
                    table[code, api] = twin
    return table


_TWIN_OF = _twins()


def twin_of(api: str, code: str) -> str | None:
    """The class ``code`` (catalogued in some API) has in ``api``, if it has one there."""
    return _TWIN_OF.get((code, api))


def repair_in(api: str, code: str) -> Repair | None:
    """The repair of class ``code`` as a request of ``api`` knows it: its own, or its twin's in
    ``api`` (the ``Repair`` carries the class it repairs in ``api``)."""
    own = repair_for(api, code)
    if own is not None:
        return own
    twin = twin_of(api, code)
    return repair_for(api, twin) if twin is not None else None
