"""Request-level fields, every profile: a request its provider accepts leaves byte for byte, a
refused one leaves accepted, and nothing the client sent is lost.

Requests are clean transcripts (Gemini signatures kept on some calls) with drawn request-level
fields (``tests.strategies.request_fields``: model names as routers spell them, thinking
switches, tools with and without schemas and with repeated names, every kind of
``tool_choice``, temperatures). The judge is each profile's contract, and through the
``openrouter`` profile the downstream one its vendor prefix picks; the oracle of what must
survive is written here: every user text, tool result and tool argument, every tool name the
client defined, the choice of a tool that is still defined, a temperature changed only to
the value a thinking model accepts, and a thinking switch changed only where MiniMax-M3 refuses
``enabled`` and takes ``adaptive`` (thinking stays on: "invalid thinking.type: \"enabled\"
(allowed: adaptive, disabled)", CherryHQ/cherry-studio#16247).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from rules.providers.contract import violations
from rules.providers.planner import Plan, Planner
from rules.providers.profiles import PROFILES
from rules.providers.sanitize import sanitize_body
from tests.budget import examples
from tests.strategies import request_fields, signed_transcripts

PLANNERS = {name: Planner(default=name) for name in PROFILES}
PER_REQUEST = settings(
    max_examples=examples(0.5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _texts(messages: list[Any]) -> list[str]:
    """Every visible user and tool-result text (merged or moved by a sequence rule, each must
    still be somewhere in what is sent)."""
    return [
        m["content"]
        for m in messages
        if m.get("role") in ("user", "tool")
        and isinstance(m.get("content"), str)
        and m["content"].strip()
    ]


def _all_text(messages: list[Any]) -> str:
    """Every text sent: string contents, and the text of text parts (a user message merged
    with an image becomes a part list)."""
    pieces: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            pieces.append(content)
        elif isinstance(content, list):
            pieces += [p["text"] for p in content if isinstance(p, dict) and "text" in p]
    return "\n".join(pieces)


def _arguments(messages: list[Any]) -> Counter[str]:
    return Counter(
        orjson.dumps(
            orjson.loads(call["function"]["arguments"]), option=orjson.OPT_SORT_KEYS
        ).decode()
        for m in messages
        for call in m.get("tool_calls") or ()
    )


def _tool_names(payload: dict[str, Any]) -> set[str]:
    tools = payload.get("tools")
    return {t["function"]["name"] for t in tools} if isinstance(tools, list) else set()


def judge(name: str, plan: Plan, payload: dict[str, Any]) -> None:
    raw = orjson.dumps(payload)
    context = f"\nprofile {name} (plan {plan.profile}), request {payload}"
    refused = violations(payload, plan.contract)
    result = sanitize_body(raw, plan)
    assert result.failures == (), result.failures
    if not refused:
        assert result.body is raw and result.changes == (), (
            [c.as_dict() for c in result.changes],
            context,
        )
        return
    out = orjson.loads(result.body)
    left = violations(out, plan.contract)
    assert not left, f"still refused: {[v.as_dict() for v in left]}" + context
    if plan.profile == "passthrough":
        return
    sent = out["messages"]
    # Nothing lost: user texts, tool results, tool arguments (as objects), tool definitions.
    text = _all_text(sent)
    for piece in _texts(payload["messages"]):
        assert piece in text, f"lost {piece!r}" + context
    assert _arguments(payload["messages"]) == _arguments(sent), context
    assert _tool_names(payload) == _tool_names(out), context
    choice = out.get("tool_choice")
    if isinstance(choice, dict):
        assert choice["function"]["name"] in _tool_names(out), context
    if "temperature" in out:
        assert out["temperature"] in (payload["temperature"], 1), context
    else:
        assert "temperature" not in payload, context
    assert out.get("thinking") == _thinking_accepted(plan.profile, payload), context
    for key in ("model", "reasoning", "reasoning_effort", "enable_thinking"):
        assert out.get(key) == payload.get(key), key + context


def _thinking_accepted(profile: str, payload: dict[str, Any]) -> Any:
    """The thinking switch as sent: the client's, but ``enabled`` -> ``adaptive`` for a
    MiniMax-M3 model on its own endpoint (the one value change that keeps thinking on)."""
    thinking = payload.get("thinking")
    model = str(payload.get("model", "")).lower().rsplit("/", 1)[-1]  # as sent or bare
    m3 = profile == "minimax" and model.startswith("minimax-m3")
    if m3 and isinstance(thinking, dict) and thinking.get("type") == "enabled":
        return {**thinking, "type": "adaptive"}
    return thinking


@pytest.mark.slow
@PER_REQUEST
@given(messages=signed_transcripts(), fields=request_fields())
def test_request_fields_under_every_profile(messages: list[Any], fields: dict[str, Any]) -> None:
    payload = {**fields, "messages": messages}
    for name, planner in PLANNERS.items():
        judge(name, planner.plan(payload.get("model")), payload)
