"""function-names beyond the fixtures: one map over tools, history and tool_choice; its check."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.chat import RULES, sanitize_messages
from rules.chat.function_names import NAME, PATTERNS, RULE, apply, coerce
from rules.engine.base import Outcome
from rules.providers.contract import CHECKS_BY_CODE
from rules.providers.contract.ids import OPENAI_NAME_TEXT
from tests.budget import examples
from tests.builders import call
from tests.strategies import TOOL_NAMES, arbitrary_messages, broken_transcripts, junk_values

CHECK = CHECKS_BY_CODE["function_name_invalid"]


def run(messages: list[Any], request: dict[str, Any], **options: Any) -> Outcome:
    ctx = replace(RULE.context(options), request={**request, "messages": messages})
    return apply(messages, ctx)


def tools(*names: Any) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n}} for n in names]


def test_rule_record() -> None:
    assert RULE.name == NAME == "function-names"
    assert RULE.default is False and RULE.reads_request
    assert RULE in RULES


def test_coerce_always_fits_its_pattern() -> None:
    assert coerce("my.tool", pattern="strict", empty="x") == "my_tool"
    assert coerce("my.tool", pattern="gemini", empty="x") == "my.tool"
    assert coerce("", pattern="strict", empty="invalid_tool_call") == "invalid_tool_call"
    assert coerce("", pattern="strict", empty="..") == "__"
    assert coerce("", pattern="strict", empty="") == "invalid_tool_call"
    long = coerce("a" * 100, pattern="strict", empty="x")
    assert len(long) == 64 and long.startswith("a" * 55 + "_")
    assert coerce("a" * 100, pattern="strict", empty="x") != coerce(
        "a" * 99 + "b", pattern="strict", empty="x"
    )


def test_clean_request_comes_back_untouched() -> None:
    messages = [{"role": "assistant", "tool_calls": [call("c", "read_file")]}]
    outcome = run(messages, {"tools": tools("read_file"), "tool_choice": "auto"})
    assert outcome.messages is messages and outcome.request is None and outcome.changes == ()


def test_only_tools_change_when_the_history_is_clean() -> None:
    request = {"model": "m", "tools": tools("fs.read", "ok")}
    messages: list[Any] = [{"role": "user", "content": "x"}]
    outcome = run(messages, request)
    assert outcome.messages is messages
    assert outcome.request == {**request, "messages": messages, "tools": tools("fs_read", "ok")}
    assert request["tools"] == tools("fs.read", "ok")  # the request is not mutated


def test_a_collision_between_two_coerced_names_is_resolved_in_order() -> None:
    messages = [{"role": "assistant", "tool_calls": [call("1", "a.b"), call("2", "a:b")]}]
    out = run(messages, {}).messages
    first, second = (c["function"]["name"] for c in out[0]["tool_calls"])
    assert first == "a_b" and second.startswith("a_b_") and len(second) == 12


def test_the_check_reports_tools_history_and_tool_choice_in_openai_words() -> None:
    request = {
        "tools": tools("ok", "mcp.read"),
        "tool_choice": {"type": "function", "function": {"name": "mcp.read"}},
    }
    messages = [{"role": "user"}, {"role": "assistant", "tool_calls": [call("c", "mcp.read")]}]
    found = CHECK.run(messages, request, {"text": OPENAI_NAME_TEXT})
    assert [(v.index, v.message) for v in found] == [
        (
            None,
            "Invalid 'tools[1].function.name': string does not match pattern. Expected a string "
            "that matches the pattern '^[a-zA-Z0-9_-]+$'.",
        ),
        (
            1,
            "Invalid 'messages[1].tool_calls[0].function.name': string does not match pattern. "
            "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
        ),
        (
            None,
            "Invalid 'tool_choice.function.name': string does not match pattern. Expected a "
            "string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
        ),
    ]
    assert CHECK.run(messages, request, {"pattern": "gemini"}) == []
    assert CHECK.run([], {"tools": tools("9lives")}, {"pattern": "gemini"})


def fn_name(holder: Any) -> Any:
    function = holder.get("function") if isinstance(holder, dict) else None
    return function.get("name") if isinstance(function, dict) else None


def all_names(messages: list[Any], request: dict[str, Any]) -> list[Any]:
    """Every function name the rule maps, in a fixed order of places."""
    listed = request.get("tools")
    found = [fn_name(tool) for tool in (listed if isinstance(listed, list) else ())]
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            found.append(message.get("name"))
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        found.extend(fn_name(c) for c in (calls if isinstance(calls, list) else ()))
    found.append(fn_name(request.get("tool_choice")))
    return found


_NAMES = st.one_of(
    st.sampled_from([*TOOL_NAMES, "my.tool", "my_tool", "fs/read", "", "a" * 70, "9x", "x.y.z"]),
    st.text(max_size=70),
)
_REQUESTS = st.fixed_dictionaries(
    {"tools": st.lists(_NAMES, max_size=4).map(lambda names: tools(*names))},
    optional={
        "tool_choice": st.one_of(
            _NAMES.map(lambda n: {"type": "function", "function": {"name": n}}),
            st.sampled_from(["auto", "required", None]),
        )
    },
)


def _holds(messages: list[Any], request: dict[str, Any], pattern: str) -> None:
    snapshot = copy.deepcopy((messages, request))
    outcome = run(messages, request, pattern=pattern)
    assert (messages, request) == snapshot
    fields = outcome.request if outcome.request is not None else request
    again = run(outcome.messages, fields, pattern=pattern)
    assert again.changes == () and again.messages is outcome.messages and again.request is None
    assert CHECK.run(outcome.messages, fields, {"pattern": pattern}) == []
    # one map: each old name always becomes the same new name, distinct names stay distinct
    both = zip(all_names(messages, request), all_names(outcome.messages, fields), strict=True)
    pairs = {(old, new) for old, new in both if isinstance(old, str)}
    olds = [old for old, _ in pairs]
    news = [new for _, new in pairs]
    assert len(olds) == len(set(olds)) and len(news) == len(set(news))
    strict = r"[a-zA-Z0-9_-]{1,64}"
    valid = re.compile(strict if pattern == "strict" else r"[a-zA-Z_][\w.-]{0,63}", re.ASCII)
    assert all(valid.fullmatch(new) for new in news)


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), _REQUESTS, st.sampled_from(PATTERNS))
def test_arbitrary_input(messages: list[Any], request: dict[str, Any], pattern: str) -> None:
    _holds(messages, request, pattern)


@pytest.mark.slow
@settings(deadline=None)
@given(arbitrary_messages(), junk_values)
def test_junk_request_fields_never_raise(messages: list[Any], junk: Any) -> None:
    for request in ({"tools": junk}, {"tool_choice": junk}, {"tools": [junk], "tool_choice": junk}):
        _holds(messages, request, "strict")


@pytest.mark.slow
@settings(max_examples=examples(0.5), deadline=None)
@given(broken_transcripts(), _REQUESTS, st.sampled_from(PATTERNS))
def test_after_the_pipeline(broken: Any, request: dict[str, Any], pattern: str) -> None:
    _holds(sanitize_messages(broken.messages).messages, request, pattern)
