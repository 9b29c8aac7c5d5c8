"""One record per API chatmend repairs: what differs between chat completions, Responses and
Anthropic Messages, in one place. Code that must act differently per API reads the request's
record (looked up once, by name, with ``api_named``); nothing compares API names.

The proxy side extends these records with what only the server needs (the path, the response
observer, the stash lookup): ``proxy/relay/served.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from rules.chat import RULES
from rules.chat import scan as chat_scan
from rules.engine.base import Change, Rule, Safety
from rules.messages import MESSAGES_RULES
from rules.messages import scan as messages_scan
from rules.providers.contract import DEFAULT_CONTRACT, Contract, Violation
from rules.providers.contract import messages as messages_contract
from rules.providers.contract import responses as responses_contract
from rules.providers.contract import violations as chat_violations
from rules.providers.profiles import Profile, Settings
from rules.responses import RESPONSES_RULES

#: ``check(payload, contract, betas)``: every rejection ``contract`` gives the payload.
Check = Callable[[Any, Contract, Collection[str]], list[Violation]]


@dataclass(frozen=True, slots=True)
class Resumable:
    """An API's one walk (``Rule.scan``) and the same walk able to go on from where an earlier
    one stopped (``rules.chat.scan.walk``): a request that adds a turn to the last one is
    walked over that turn only (proxy/relay/prefix.py)."""

    scan: Callable[[list[Any]], frozenset[str] | None]
    walk: Callable[[list[Any], Any], tuple[frozenset[str] | None, Any]]
    #: What a walk's final state knows for the rules' prescans (``run_rules(primed=...)``).
    primed: Callable[[Any], Mapping[Callable[[list[Any]], Any], Any]]


@dataclass(frozen=True, slots=True)
class Api:
    """What one API is to the rules, the planner and the contract."""

    #: The API's name: in plans (``Plan.api``), metrics labels, the configuration's sections.
    name: str
    #: The request field holding the list the rules run over.
    field: str
    #: The rule registry: every rule of the API, in its one order.
    rules: tuple[Rule, ...]
    #: The contract a plan built from bare steps is checked against.
    core: Contract
    #: The contract check of a payload of this API.
    check: Check
    #: A profile's settings for the API's rules (its ``rules``, ``responses`` or ``messages``).
    settings: Callable[[Profile], Settings]
    #: A string ``field`` holds no item: only the request-level rules run (else it is skipped).
    string_field: bool = False
    #: Its bodies may carry provider-signed blocks (a rewritten body whose signed object repeats
    #: a key goes as it came).
    signed: bool = False
    #: Its walk, resumable (``None``: the pipeline walks the whole list itself).
    resumable: Resumable | None = None

    def where(self, index: int | None) -> str:
        """Where a change or violation at ``index`` is, for a person: ``request`` or
        ``<field>[index]``."""
        return "request" if index is None or index < 0 else f"{self.field}[{index}]"


def _chat_check(payload: Any, contract: Contract, betas: Collection[str]) -> list[Violation]:
    return chat_violations(payload, contract)


def _responses_check(payload: Any, contract: Contract, betas: Collection[str]) -> list[Violation]:
    return responses_contract.violations(payload, contract)


def _messages_check(payload: Any, contract: Contract, betas: Collection[str]) -> list[Violation]:
    return messages_contract.violations(payload, contract, betas=betas)


CHAT_API = Api(
    "chat",
    "messages",
    RULES,
    DEFAULT_CONTRACT,
    _chat_check,
    lambda p: p.rules,
    resumable=Resumable(chat_scan.scan, chat_scan.walk, chat_scan.primed),
)
RESPONSES_API = Api(
    "responses",
    "input",
    RESPONSES_RULES,
    responses_contract.RESPONSES_CONTRACT,
    _responses_check,
    lambda profile: profile.responses,
    string_field=True,
)
MESSAGES_API = Api(
    "messages",
    "messages",
    MESSAGES_RULES,
    messages_contract.MESSAGES_CORE,
    _messages_check,
    lambda profile: profile.messages,
    signed=True,
    resumable=Resumable(messages_scan.signals, messages_scan.walk, messages_scan.primed),
)

#: Every API by name.
APIS: Mapping[str, Api] = {api.name: api for api in (CHAT_API, RESPONSES_API, MESSAGES_API)}


def api_named(name: str) -> Api:
    """The record of the API called ``name`` (``KeyError`` for an unknown one)."""
    return APIS[name]


#: Every rule of every API, by name (names are unique across the three registries).
RULES_BY_NAME: Mapping[str, Rule] = {
    rule.name: rule for api in (CHAT_API, RESPONSES_API, MESSAGES_API) for rule in api.rules
}


def safety_of(change: Change) -> Safety:
    """The fix safety of ``change``: its rule's class for its action (``Rule.safety_of``); a
    change of no known rule counts as ``lossy``."""
    rule = RULES_BY_NAME.get(change.rule)
    return "lossy" if rule is None else rule.safety_of(change.action)
