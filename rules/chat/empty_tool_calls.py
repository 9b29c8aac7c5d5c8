"""empty-tool-calls: no assistant message leaves with ``tool_calls`` empty, null or not a list.

What: an assistant whose ``tool_calls`` is ``[]``, ``null`` or not a list loses the key; entries
that are not objects are removed from the list first. An assistant left with neither content
nor tool calls is removed.
Why: DeepSeek, OpenAI and Qwen answer 400 "Invalid 'messages[N].tool_calls': empty array ..."
(docs/providers.md#qwen-pairing), and "content or tool_calls must be set" for an assistant with
neither (docs/providers.md#qwen-content). It runs last, so no earlier rule can leave ``[]`` behind
(hermes #74101, E2). Safety: safe. The removed pieces carried nothing (an empty list, a ``null``
entry, a message with no text and no calls).
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.message_fields import has_content
from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at

NAME = "empty-tool-calls"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    suspects = [
        index
        for index, message in enumerate(messages)
        if type(message) is dict and message.get("role") == "assistant" and _is_defective(message)
    ]
    if not suspects:
        return Outcome(messages)  # the common case, checked without building anything
    changes: list[Change] = []
    out = rewrite_at(messages, suspects, lambda index, message: _fix(message, index, changes))
    return Outcome(out, tuple(changes))


def _is_defective(message: dict[str, Any]) -> bool:
    """Cheap test, for an assistant message, of whether ``_fix`` would change it."""
    calls = message.get("tool_calls")
    if calls is None:
        if "tool_calls" in message:
            return True
        content = message.get("content")
        return not (type(content) is str and content) and not has_content(message)
    if type(calls) is not list or not calls:
        return True
    for call in calls:  # noqa: SIM110 - a plain loop: no generator per message on the hot path
        if type(call) is not dict:
            return True
    return False


def _fix(message: Any, index: int, changes: list[Change]) -> Any:
    """Return the message unchanged, a repaired copy, or ``None`` to remove it."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return message
    fixed = message
    if "tool_calls" in message:
        calls = message["tool_calls"]
        kept = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
        if not kept:
            fixed = {k: v for k, v in message.items() if k != "tool_calls"}
            changes.append(Change(NAME, index, "dropped_key", {"was": _describe(calls)}))
        elif len(kept) != len(calls):
            fixed = {**message, "tool_calls": kept}
            dropped = len(calls) - len(kept)
            changes.append(Change(NAME, index, "dropped_invalid_calls", {"count": dropped}))
    if "tool_calls" not in fixed and not has_content(fixed):
        reason = {"reason": "no content, no tool calls"}
        changes.append(Change(NAME, index, "removed_message", reason))
        return None
    return fixed


def _describe(calls: Any) -> str:
    if calls is None:
        return "null"
    if isinstance(calls, list):
        return "empty_list" if not calls else "list_without_objects"
    return type(calls).__name__


RULE = Rule(
    name=NAME,
    summary="Drop empty, null or non-list tool_calls; remove assistants left with nothing.",
    defect="`tool_calls: []`, `null` or not a list: \"Invalid 'messages[N].tool_calls': empty "
    'array" (openai/openai-node#1341, anomalyco/opencode#41860), Qwen "Empty tool_calls is not '
    'supported in message" (smallmain/vscode-unify-chat-provider#65); an assistant with neither '
    'content nor tool calls: "content or tool_calls must be set" (carlrobertoh/ProxyAI#830; '
    "docs/providers.md#pairing)",
    repair="drop the key (and non-object entries); remove an assistant left with neither content "
    "nor tool calls. It runs after every rule that writes tool calls, so none can leave `[]` "
    "behind; it removes only empty pieces",
    safety="safe",
    default=True,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=scan.on(scan.EMPTY_ASSISTANT, scan.EMPTY_TOOL_CALLS),
)
