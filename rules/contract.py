"""The provider contract, checked: what a strict provider would reject, with its own words.

``violations(payload)`` lists every rejection a strict DeepSeek-style provider would give a
chat-completions payload: the error text is the provider's (provider-errors.md; DeepSeek's where
it is catalogued, else the OpenAI-compatible text the same check produces elsewhere), the code is
chatmend's, stable for logs and metrics. The rules are built to leave nothing here; the proxy runs
it after a rewrite and logs what is left as ``contract_violation``; ``chatmend check`` prints it;
the tests' strict fake upstream answers with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

_UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. (insufficient tool messages following tool_calls message)"
)


@dataclass(frozen=True, slots=True)
class Violation:
    """One rejection: chatmend's code, the message index (``None``: the whole request), the
    provider's error text. The text holds indices and ids, never message content."""

    code: str
    index: int | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "index": self.index, "message": self.message}


def violations(payload: Any) -> list[Violation]:
    """Every rejection a strict provider would give this chat payload (empty: accepted)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        return [
            Violation("not_chat", None, "Failed to deserialize the JSON body into the target type")
        ]
    messages: list[Any] = payload["messages"]
    found: list[Violation] = []
    seen_results: set[Any] = set()
    pending: list[Any] = []  # call ids of the last assistant not yet answered
    pending_at = 0
    previous_role: str | None = None
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if pending and role != "tool":
            # 1.A, DeepSeek (langgenius/dify#32222): a call with no result right after it
            found.append(Violation("unanswered_tool_call", pending_at, _UNANSWERED))
            pending = []
        if role == "assistant":
            assert isinstance(message, dict)
            if previous_role == "assistant":
                # 1.B, deepseek-reasoner (deepseek-ai/DeepSeek-R1#21)
                found.append(
                    Violation(
                        "successive_assistant",
                        index,
                        "deepseek-reasoner does not support successive user or assistant "
                        f"messages (messages[{index - 1}] and messages[{index}] in your input). "
                        "You should interleave the user/assistant messages in the message "
                        "sequence.",
                    )
                )
            found.extend(_assistant_violations(message, index))
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                pending = [c.get("id") for c in calls if isinstance(c, dict)]
                pending_at = index
        elif role == "tool":
            assert isinstance(message, dict)
            found.extend(_tool_violations(message, index, seen_results, pending))
        previous_role = role
    if pending:
        found.append(Violation("unanswered_tool_call", pending_at, _UNANSWERED))
    found.extend(_duplicate_call_ids(messages))
    return found


def _tool_violations(
    message: dict[str, Any], index: int, seen_results: set[Any], pending: list[Any]
) -> list[Violation]:
    tool_call_id = message.get("tool_call_id")
    if not isinstance(tool_call_id, str) or not tool_call_id:
        # 1.A, OpenAI/Azure (langchain-ai/langchain#22600)
        text = "Missing parameter 'tool_call_id': messages with role 'tool' must have a "
        return [Violation("missing_tool_call_id", index, text + "'tool_call_id'.")]
    found: list[Violation] = []
    if tool_call_id in seen_results:
        # 1.A, DeepSeek (craft-ai-agents/craft-agents-oss#621)
        text = f"Duplicate value for 'tool_call_id' of in message[{index}]"
        found.append(Violation("duplicate_tool_call_id", index, text))
    seen_results.add(tool_call_id)
    if tool_call_id in pending:
        pending.remove(tool_call_id)
    else:
        # 1.A, DeepSeek (FoundationAgents/OpenManus#23): a result before any call, after another
        # message, or for a call of an earlier block
        text = "Messages with role 'tool' must be a response to a preceding message with "
        found.append(Violation("orphan_tool_result", index, text + "'tool_calls'"))
    return found


def _duplicate_call_ids(messages: list[Any]) -> list[Violation]:
    seen: set[Any] = set()
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            cid = call.get("id") if isinstance(call, dict) else None
            if not isinstance(cid, str):
                cid = None  # a missing or non-string id: such calls share one "id"
            if cid in seen:
                # 1.A: DeepSeek checks uniqueness across the whole request (hermes-agent#79221)
                text = "Duplicate value for 'tool_call_id' in tool_calls"
                return [Violation("duplicate_tool_call_id", index, text)]
            seen.add(cid)
    return []


def _assistant_violations(message: dict[str, Any], index: int) -> list[Violation]:
    found: list[Violation] = []
    calls = message.get("tool_calls")
    if "tool_calls" in message and (not isinstance(calls, list) or not calls):
        # 1.A, DeepSeek via OpenCode (anomalyco/opencode#41860)
        text = (
            f"Invalid 'messages[{index}].tool_calls': empty array. Expected an array with "
            "minimum length 1, but got an empty array instead."
        )
        found.append(Violation("empty_tool_calls", index, text))
    if not calls and message.get("content") in (None, "", []):
        # 1.C, DeepSeek V3 (carlrobertoh/ProxyAI#830)
        text = "Invalid assistant message: content or tool_calls must be set"
        found.append(Violation("empty_assistant", index, text))
    for position, call in enumerate(calls if isinstance(calls, list) else []):
        if isinstance(call, dict) and call.get("type") is None:
            # 1.A, Azure AI Inference (langchain-ai/langchain-azure#35)
            text = f"Missing required parameter: 'messages[{index}].tool_calls[{position}].type'."
            found.append(Violation("missing_tool_call_type", index, text))
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        where = f"messages[{index}].tool_calls[{position}].function.arguments"
        if not isinstance(arguments, str):
            # 1.A, OpenAI (aaif-goose/goose-mobile#20)
            text = (
                f"Invalid type for '{where}': expected a string, but got "
                f"{type(arguments).__name__} instead."
            )
            found.append(Violation("arguments_not_string", index, text))
            continue
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            # 1.A, unattributed Moonshot-like (justrach/codegraff#752)
            text = (
                f"Invalid request: messages.{index}.tool_calls.{position}.function.arguments: "
                "arguments must be a valid JSON object string"
            )
            found.append(Violation("invalid_arguments", index, text))
    return found
