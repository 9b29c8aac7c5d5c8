"""unanswered-tool-calls beyond the fixtures: the option, new stubs, the strict contract, scale."""

from __future__ import annotations

from typing import Any

from rules.chat import RULES, sanitize_messages
from rules.chat.unanswered_tool_calls import DEFAULT_CONTENT, NAME, RULE, apply
from rules.engine.base import RuleContext
from tests.builders import result, result_ids, turn, user
from tests.fake_upstream import strict_errors
from tests.work import assert_linear


def stub(cid: str, content: str = DEFAULT_CONTENT) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def test_rule_record_and_option() -> None:
    assert RULE.name == NAME == "unanswered-tool-calls"
    assert RULE.default is True
    assert RULE.safety == "unsafe"  # the stub is chatmend's words
    assert RULE in RULES
    (option,) = RULE.options
    assert (option.name, option.default) == ("content", DEFAULT_CONTENT)
    assert DEFAULT_CONTENT == "[chatmend] No result was recorded for this tool call."
    assert option.validate("(no result)") is None
    assert option.validate(3) is not None


def test_a_bare_context_uses_the_default_and_every_stub_is_a_new_object() -> None:
    messages = [user(), turn("a", "b"), user("stop")]
    out = apply(messages, RuleContext()).messages
    assert out == [user(), turn("a", "b"), stub("a"), stub("b"), user("stop")]
    assert out[2] is not out[3]
    assert out[0] is messages[0] and out[1] is messages[1]


def test_the_same_input_gives_the_same_output() -> None:
    messages = [user(), turn("a", "b", "c"), result("b"), user()]
    first = apply(messages, RULE.context())
    assert first == apply(messages, RULE.context())


def test_hermes_56980_nine_calls_then_a_user_is_accepted_after_the_pipeline() -> None:
    """DeepSeek v4 bricked sessions: assistant(tool_calls x9) followed directly by a user."""
    calls = [f"call_0{i}_x" for i in range(9)]
    messages = [user(), turn(*calls), user("are you there?")]
    assert strict_errors({"messages": messages})
    out = sanitize_messages(messages).messages
    assert strict_errors({"messages": out}) == []
    assert result_ids(out) == calls


def unanswered(n: int) -> list[Any]:
    """One turn of ``2n`` unanswered calls, then ``n`` turns of one unanswered call each."""
    messages: list[Any] = [user(), turn(*(f"call_{i}" for i in range(2 * n))), user()]
    for i in range(n):
        messages += [turn(f"t{i}"), user()]
    return messages


def run(messages: list[Any]) -> list[Any]:
    return apply(messages, RuleContext()).messages


def test_two_thousand_unanswered_calls_and_a_thousand_blocks_are_linear() -> None:
    calls = [f"call_{i}" for i in range(2000)]
    assert result_ids(run(unanswered(1000))) == calls + [f"t{i}" for i in range(1000)]
    assert_linear(unanswered, run, 250)
