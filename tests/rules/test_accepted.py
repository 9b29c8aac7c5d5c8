"""Minimal intervention: what a provider accepts reaches it byte for byte, under every profile.

For every profile and every client-shaped body (tests/client_shapes.py) that the profile's own
contract accepts, the proxy's sanitizer forwards the very bytes it got and records no change,
not even in report mode. Each profile must accept a fair share of the corpus, so the test cannot
pass by rejecting everything.
"""

from __future__ import annotations

import orjson
import pytest

from rules.providers.contract import violations
from rules.providers.planner import compile_plan
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import sanitize_body
from tests.client_shapes import SESSIONS, bodies

BODIES = bodies()
#: Profiles whose contracts refuse many standard shapes (Mistral: `name`, ids of 9 characters;
#: Gemini: tool messages without `name`; xAI: `null` next to calls).
FEW = {"mistral": 6, "gemini-openai": 6, "xai": 9, "openai": 10, "azure": 10}


@pytest.mark.parametrize("name", list(PROFILES))
def test_accepted_bodies_pass_byte_for_byte(name: str) -> None:
    plan = compile_plan(PROFILES[name])
    report = compile_plan(PROFILES[name], report=frozenset({"*"}))
    accepted = []
    for label, raw in BODIES.items():
        if violations(orjson.loads(raw), plan.contract):
            continue
        accepted.append(label)
        out = sanitize_body(raw, plan)
        assert out.body is raw, (name, label, [c.as_dict() for c in out.changes])
        assert out.changes == () and out.failures == () and out.skipped is None, (name, label)
        reported = sanitize_body(raw, report)
        assert reported.body is raw and reported.reported == (), (name, label)
    sessions = {label.split("/")[0] for label in accepted}
    assert len(sessions) >= FEW.get(name, len(SESSIONS) // 2), (name, sorted(sessions))


@pytest.mark.parametrize(
    "session",
    ["openai_sdk_null", "langchain_empty_string", "content_absent", "agent_100_empty_string"],
)
def test_the_default_profile_forwards_a_standard_agent_transcript(session: str) -> None:
    """The issue's case: `""` or `null` next to tool calls is DeepSeek's to accept."""
    raw = bodies()[f"{session}/tools"]
    out = sanitize_body(raw, compile_plan(PROFILES["deepseek"]))
    assert out.body is raw and out.changes == ()
