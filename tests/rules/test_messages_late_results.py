"""Issue 24's Messages reproductions through every profile's Messages plan, expectations written
out here from the client's body: a ``tool_result`` sent in a later user turn (the call's turn,
then "never mind", "ok", then the result) answers its call, moved to the head of the user turn
right after it; under the ``anthropic`` profile, thinking in the tool loop's final turn with
thinking off and a thinking block signed by another issuer are removed, and blocks signed in
Anthropic's shape reach it byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

from rules.engine.pipeline import run_rules
from rules.providers.contract.messages import violations
from rules.providers.planner import compile_messages_plan
from rules.providers.profiles import PROFILES

SIG = "EqQBCkYIBxgCKkBsig0000000000000000000000000000000000000000"
UUID = "8f14e45f-ceea-467f-a0e6-1c2b3d4e5f60"
CALL = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.txt b.txt"}
NAMES = [name for name in PROFILES if name != "passthrough"]


def run(name: str, request: dict[str, Any]) -> dict[str, Any]:
    plan = compile_messages_plan(PROFILES[name])
    result = run_rules(request["messages"], plan.steps, request=request)
    out = {**(result.request or request), "messages": result.messages}
    assert violations(out, plan.contract) == [], name
    return out


@pytest.mark.parametrize("name", NAMES)
def test_a_result_sent_turns_later_answers_its_call(name: str) -> None:
    sent = [
        {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Listing."}, CALL]},
        {"role": "user", "content": [{"type": "text", "text": "never mind"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [RESULT]},
    ]
    out = run(name, {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": sent})
    messages = out["messages"]
    assert messages[1] == sent[1]
    assert messages[2]["content"][0] == RESULT  # the real result, not a stub
    texts = [
        b["text"] for m in messages if m["role"] == "user" for b in m["content"] if "text" in b
    ]
    assert texts[:2] == ["list the files", "never mind"]


def test_anthropic_removes_thinking_it_refuses_and_keeps_its_own_byte_for_byte() -> None:
    own = {"type": "thinking", "thinking": "claude's plan", "signature": SIG}
    foreign = {"type": "thinking", "thinking": "deepseek's plan", "signature": UUID}
    sent = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [foreign, CALL]},
        {"role": "user", "content": [RESULT]},
        {"role": "assistant", "content": [own, {"type": "text", "text": "done"}]},
        {"role": "user", "content": "thanks"},
    ]
    thinking = {"type": "enabled", "budget_tokens": 2048}
    request = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "thinking": thinking}
    out = run("anthropic", {**request, "messages": sent})
    assert out["messages"][1]["content"] == [CALL]
    assert out["messages"][3]["content"][0] is own or out["messages"][3]["content"][0] == own
    # Only Anthropic-signed thinking: nothing to do.
    clean = [sent[0], {"role": "assistant", "content": [own, CALL]}, sent[2]]
    assert run("anthropic", {**request, "messages": clean})["messages"] == clean
    # Thinking off: the tool loop's final assistant turn loses its thinking.
    off = run("anthropic", {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": clean})
    assert off["messages"][1]["content"] == [CALL]
