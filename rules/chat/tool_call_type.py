"""tool-call-type: every assistant tool call leaves with its ``type``.

What: a tool call (a dict in an assistant's ``tool_calls``) with no ``type``, or ``type: null``,
gets ``"type": "function"``. A call with any other type is left as it is.
Why: OpenAI-compatible servers require the field; Azure AI Inference answers "Missing required
parameter: 'messages[2].tool_calls[0].type'." (docs/providers.md#azure-pairing, langchain-ai/
langchain-azure#35). Agents that rebuild calls from their own records often drop it.
Safety: safe. ``function`` is the only type a chat-completions call with a ``function`` has.
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.message_fields import call_id
from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at

NAME = "tool-call-type"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    suspects = _suspects(messages)
    if not suspects:
        return Outcome(messages)  # the common case, checked in one tight pass
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        calls = [
            {**call, "type": "function"}
            if type(call) is dict and call.get("type") is None
            else call
            for call in message["tool_calls"]
        ]
        filled = [
            call_id(new)
            for new, old in zip(calls, message["tool_calls"], strict=True)
            if new is not old
        ]
        changes.append(Change(NAME, index, "filled_type", {"count": len(filled), "ids": filled}))
        return {**message, "tool_calls": calls}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


def _suspects(messages: list[Any]) -> list[int]:
    """Indices of the assistants with a call whose ``type`` is missing or null."""
    suspects: list[int] = []
    for index, message in enumerate(messages):
        if type(message) is not dict or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if type(calls) is not list:
            continue
        for call in calls:
            if type(call) is dict and call.get("type") is None:
                suspects.append(index)
                break
    return suspects


RULE = Rule(
    name=NAME,
    summary='Give tool calls without a type the type "function".',
    defect='a tool call without `type` (or `type: null`): Azure AI Inference "Missing required '
    "parameter: 'messages[N].tool_calls[0].type'.\" (langchain-ai/langchain-azure#35; "
    "docs/providers.md#azure-pairing)",
    repair='set `"type": "function"`; any other type is kept. `function` is the only type such '
    "a call has",
    safety="safe",
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=scan.on(scan.CALL_TYPE),
    introduces=frozenset(),  # a call only gains its type
)
