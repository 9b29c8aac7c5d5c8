"""One record per check (rules/providers/contract/base.py: ``Check``): its text, the requests it
refuses, the repair that answers it and its probe shape, declared once. Each example breaks its
check; every profile's setting of every check it applies is broken by one of the check's
examples (so the catalogue rows, the repair tests and ``chatmend probe`` see the refusal the
profile's provider gives); every rule a repair names exists, with options it takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rules.providers.apis import CHAT_API, MESSAGES_API, RESPONSES_API, Api
from rules.providers.contract import CHECKS_BY_CODE, Contract
from rules.providers.contract import responses as responses_contract
from rules.providers.contract.base import Check
from rules.providers.contract.messages import MESSAGES_CHECKS_BY_CODE
from rules.providers.planner import compile_responses_plan
from rules.providers.profiles import PROFILES, Profile

#: Per API: its checks by code, the contract a profile applies, and what a request always has.
Contracted = tuple[Api, dict[str, Check], Callable[[Profile], Contract], dict[str, Any]]
APIS: tuple[Contracted, ...] = (
    (CHAT_API, dict(CHECKS_BY_CODE), lambda p: p.contract, {"model": "some-model"}),
    (
        RESPONSES_API,
        dict(responses_contract.CHECKS_BY_CODE),
        lambda p: compile_responses_plan(profile=p).contract,
        {"model": "some-model"},
    ),
    (
        MESSAGES_API,
        dict(MESSAGES_CHECKS_BY_CODE),
        lambda p: p.messages_contract,
        {"model": "some-model", "max_tokens": 64},
    ),
)


def settings() -> list[tuple[str, str, str]]:
    """(api, profile, check) for every check every profile applies."""
    return [
        (api.name, name, code)
        for api, _, contract_of, _ in APIS
        for name, profile in PROFILES.items()
        for code in contract_of(profile)
    ]


@pytest.mark.parametrize(("api", "checks", "_", "base"), APIS, ids=[a[0].name for a in APIS])
def test_each_example_breaks_its_check(
    api: Api, checks: dict[str, Check], _: Any, base: dict[str, Any]
) -> None:
    for check in checks.values():
        assert check.examples, f"{check.code}: no example (Check.examples)"
        assert check.repair, f"{check.code}: no repair (Check.repair)"
        for example in check.examples:
            payload = {**base, **example.request}
            found = check.run(payload[api.field], payload, example.options)
            assert found, (check.code, example)


@pytest.mark.parametrize(("api", "name", "code"), settings())
def test_every_profiles_setting_of_a_check_is_broken_by_one_of_its_examples(
    api: str, name: str, code: str
) -> None:
    """A profile that sets a check's options its own way (Groq: system messages only; GLM: text
    parts only) must be refused by one of the check's examples: else the probe could not see
    its provider's refusal and no end-to-end test would send it. Add an ``Example`` for that
    option value to the check's record."""
    record, checks, contract_of, base = next(a for a in APIS if a[0].name == api)
    contract = contract_of(PROFILES[name])
    broken = [
        example
        for example in checks[code].examples
        if code in {v.code for v in record.check({**base, **example.request}, contract, ())}
    ]
    assert broken, f"no example of {code} is refused under profile {name}'s {contract[code]}"


def test_every_rule_a_repair_names_exists_and_takes_its_options() -> None:
    for api, checks, _, _ in APIS:
        registry = {rule.name: rule for rule in api.rules}
        for check in checks.values():
            for rule_name, options in check.repair.items():
                rule = registry.get(rule_name)
                assert rule is not None, (check.code, rule_name)
                declared = {option.name: option for option in rule.options}
                for key, value in options.items():
                    assert key in declared, (check.code, rule_name, key)
                    assert declared[key].validate(value) is None, (check.code, rule_name, key)


def test_a_profile_names_only_checks_on_record() -> None:
    """(Profile.contract, messages_contract and responses_contract name checks by code.)"""
    for name, profile in PROFILES.items():
        assert set(profile.contract) <= set(CHECKS_BY_CODE), name
        assert set(profile.messages_contract) <= set(MESSAGES_CHECKS_BY_CODE), name
        assert set(profile.responses_contract) <= set(responses_contract.CHECKS_BY_CODE), name
