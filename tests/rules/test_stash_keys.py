"""The stash keys a request's turns want (``StashQuery.keys``) are each turn's own: the keys of a
list are those of its first messages then those of the rest, wherever it is cut. The server
relies on it to read only the turns a session's request adds (proxy/stash/hooks.py ``_keys``):
the keys of the turns before are the ones the last request asked for. Judged over generated
histories of both APIs, in thinking mode, against the keys of the whole list."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chat import reasoning_content
from rules.engine.base import Rule
from rules.messages import missing_thinking
from tests.budget import examples
from tests.rules.test_nothing_lost import FATES_ALL, RENDER, conversations
from tests.strategies import broken_transcripts, clean_transcripts

SETTINGS = settings(
    max_examples=examples(0.5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Each API's recalling rule, and the request fields that put it in thinking mode.
CASES: dict[str, tuple[Rule, dict[str, Any]]] = {
    "chat": (reasoning_content.RULE, {"model": "deepseek-reasoner"}),
    "messages": (
        missing_thinking.RULE,
        {"model": "claude-sonnet-4-5", "thinking": {"type": "enabled", "budget_tokens": 1024}},
    ),
}


@st.composite
def histories(draw: st.DrawFn, api: str) -> list[Any]:
    if api == "messages":
        return list(RENDER["messages"](draw(conversations(FATES_ALL))))
    shape = draw(st.sampled_from(("clean", "broken", "conversation")))
    if shape == "clean":
        return list(draw(clean_transcripts(max_turns=4)))
    if shape == "broken":
        return list(draw(broken_transcripts(max_turns=4)).messages)
    return list(RENDER["chat"](draw(conversations(FATES_ALL))))


@pytest.mark.parametrize("api", sorted(CASES))
@SETTINGS
@given(data=st.data())
def test_the_keys_of_a_list_are_those_of_its_parts(api: str, data: st.DataObject) -> None:
    rule, fields = CASES[api]
    assert rule.recall is not None
    messages = data.draw(histories(api))
    ctx = rule.context()
    whole = rule.recall.keys({**fields, "messages": messages}, ctx, "scope", 0)
    for cut in range(len(messages) + 1):
        before = rule.recall.keys({**fields, "messages": messages[:cut]}, ctx, "scope", 0)
        after = rule.recall.keys({**fields, "messages": messages}, ctx, "scope", cut)
        assert before + after == whole, cut
    # Not in thinking mode, no turn wants a key, wherever the list starts.
    plain = {"model": "plain-model", "messages": messages}
    assert rule.recall.keys(plain, ctx, "scope", len(messages) // 2) == []


def test_a_history_with_turns_to_restore_has_keys() -> None:
    """The property above is not vacuous: a tool-call turn without its reasoning wants one."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    rule, fields = CASES["chat"]
    assert rule.recall is not None
    request = {**fields, "messages": messages}
    assert len(rule.recall.keys(request, rule.context(), "scope", 0)) == 1
    assert rule.recall.keys(request, rule.context(), "scope", 2) == []
