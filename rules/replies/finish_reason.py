"""response-finish-reason: a choice that ends with ``finish_reason: "stop"`` after chatmend
made tool calls from its text ends with ``"tool_calls"``.

What: a model that wrote its call as text ends its choice with ``stop``; once
``response-text-tool-calls`` made the call real, ``stop`` is a lie.
Why: agents end the turn on ``stop`` and never run the call (decolua/9router#354); the
agent SDKs dispatch tools on ``tool_calls``.
Repair: ``stop`` becomes ``tool_calls`` only for a choice in which chatmend made a call. The
upstream's own ``stop`` after its own calls is left as it came: OpenAI itself sends it, and a
gateway that changed it would break parity (ENTERPILOT/GoModel#124).
Safety: safe: it says what the choice now holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.engine.base import Change, RuleContext
from rules.replies.base import ChoiceFix, ChoiceState, Needles, ReplyRule, Step, calls_allowed

NAME = "response-finish-reason"


class _Fix(ChoiceFix):
    def __init__(self, state: ChoiceState) -> None:
        self.state = state

    def feed(self, step: Step) -> list[Step]:
        if step.finish != "stop" or not self.state.made:
            return [step]
        self.state.changes.append(
            Change(
                NAME, self.state.index, "set_finish_reason", {"from": "stop", "to": "tool_calls"}
            )
        )
        return [Step(step.delta, "tool_calls")]


def arms(request: Mapping[str, Any], ctx: RuleContext) -> bool:
    return calls_allowed(request)


def fix(request: Mapping[str, Any], ctx: RuleContext, state: ChoiceState) -> ChoiceFix | None:
    return _Fix(state) if arms(request, ctx) else None


def needles(ctx: RuleContext) -> Needles:
    """None of its own: it acts only on a call ``response-text-tool-calls`` made."""
    return ()


RULE = ReplyRule(
    NAME,
    "finish_reason stop becomes tool_calls when chatmend made the choice's calls",
    "A choice whose calls chatmend made from text still ends with finish_reason stop.",
    "stop becomes tool_calls, only for a choice with a call chatmend made.",
    "safe",
    True,
    fix,
    arms,
    needles=needles,
)
