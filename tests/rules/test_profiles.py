"""Every profile, over random broken requests: what its provider rejects is gone afterwards.

For each profile: hypothesis-generated broken requests (``tests.requests``) pass that profile's
contract after its pipeline, no rule crashes, a second pass changes nothing, the input is never
written to, and every user and tool-result text the core pipeline keeps is still somewhere in
the request.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from rules.chat import RULES, RULES_BY_NAME, sanitize_messages
from rules.chat.unanswered_tool_calls import DEFAULT_CONTENT as STUB
from rules.engine.pipeline import run_rules
from rules.providers.contract import CHECKS_BY_CODE, violations
from rules.providers.planner import Planner
from rules.providers.profiles import DEFAULT_PROFILE, PROFILES
from rules.providers.sanitize import sanitize_body
from tests.budget import examples
from tests.requests import BrokenRequest, broken_requests

PLANNER = Planner()
PER_PROFILE = settings(
    max_examples=examples(0.4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pieces(message: Any) -> Iterator[str]:
    """The non-empty texts of a message: its string content, or its text parts."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        if content.strip():
            yield content
    elif isinstance(content, list):
        for part in content:
            if (
                isinstance(part, dict)
                and isinstance(part.get("text"), str)
                and part["text"].strip()
            ):
                yield part["text"]


def all_text(messages: list[Any]) -> str:
    return "\n".join(piece for message in messages for piece in pieces(message))


@pytest.mark.slow
@PER_PROFILE
@given(request=broken_requests())
def test_every_profile_contract_holds_after_its_pipeline(request: BrokenRequest) -> None:
    """Every profile judges the same drawn request (drawing is most of the cost): each meets as
    many requests as when it drew its own."""
    for name in PROFILES:
        check_profile(name, request)


def check_profile(name: str, request: BrokenRequest) -> None:
    plan = PLANNER.plans[name]
    snapshot = copy.deepcopy(request.payload)
    raw = orjson.dumps(request.payload)
    context = f"\nprofile {name}, defects {request.broken.defects} + {request.extra}"

    result = sanitize_body(raw, plan)
    assert result.failures == (), f"a rule crashed: {result.failures}" + context
    out = orjson.loads(result.body)
    left = violations(out, plan.contract)
    assert not left, f"still rejected: {[v.as_dict() for v in left]}\nout: {out}" + context

    # A second pass finds nothing to do.
    again = sanitize_body(result.body, plan)
    assert again.changes == (), [c.as_dict() for c in again.changes]

    # The rules never write into what they are given (here without the proxy's private copy).
    messages = request.payload["messages"]
    run_rules(messages, plan.steps, request=request.payload)
    assert request.payload == snapshot, "a rule wrote into its input" + context

    # Every user and tool-result text the core pipeline keeps is still sent, maybe merged,
    # moved or collapsed into a string (profiles may add text, never lose it).
    if name == "passthrough":
        return
    kept = sanitize_messages(messages).messages
    sent = all_text(out["messages"])
    for message in kept:
        if isinstance(message, dict) and message.get("role") in ("user", "tool"):
            for piece in pieces(message):
                if piece != STUB:
                    assert piece in sent, f"text lost: {piece!r}\nout: {out}" + context


def test_every_profile_names_real_rules_and_checks() -> None:
    for profile in PROFILES.values():
        assert set(profile.rules) <= set(RULES_BY_NAME), profile.name
        assert set(profile.contract) <= set(CHECKS_BY_CODE), profile.name
        for pattern, variant in profile.variants:
            assert variant in PROFILES and pattern == pattern.lower(), profile.name
        for code, overrides in profile.contract.items():
            # every override text fills in from what its check reports
            check = CHECKS_BY_CODE[code]
            assert set(overrides) <= {"text", "status", *check.options}, (profile.name, code)


def test_the_default_profile_is_deepseek_and_runs_the_core_rules() -> None:
    assert DEFAULT_PROFILE == "deepseek"
    names = [rule.name for rule, _ in PLANNER.plans["deepseek"].steps]
    assert [rule.name for rule in RULES if rule.default] == [
        n for n in names if RULES_BY_NAME[n].default
    ]


def test_passthrough_runs_nothing_and_checks_nothing() -> None:
    plan = PLANNER.plans["passthrough"]
    assert plan.steps == [] and plan.contract == {}
    raw = b'{"messages": [{"role": "assistant", "tool_calls": []}], "tools": []}'
    result = sanitize_body(raw, plan)
    assert result.body is raw and not result.changed
