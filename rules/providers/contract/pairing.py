"""Tool-call structure and pairing (docs/providers.md#pairing, docs/providers.md#roles,
docs/providers.md#content): what DeepSeek, OpenAI, Qwen, Kimi and every strict OpenAI-compatible
provider reject about calls and their results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from rules.providers.contract.base import Check, Example, Found, Settings, role_of
from rules.providers.contract.examples import AFTER, USER, calls_turn, tool_call, tool_result


def _key(value: Any) -> Any:
    """A hashable stand-in for an id of any JSON type (a string stands for itself)."""
    return value if isinstance(value, str) else ("not a string", type(value).__name__, repr(value))


class _Pending:
    """The call ids of one assistant still waiting for a result, as a multiset: each result
    takes one in O(1), so a block of thousands of calls is checked in linear time."""

    def __init__(self, calls: Any = ()) -> None:
        self.ids = [c.get("id") for c in calls if isinstance(c, dict)]
        self.left: Counter[Any] = Counter(_key(i) for i in self.ids)
        self.waiting = len(self.ids)

    def __bool__(self) -> bool:
        return self.waiting > 0

    def take(self, value: Any) -> bool:
        """Consume one call with this id: False if none is waiting."""
        key = _key(value)
        if self.left.get(key, 0) <= 0:
            return False
        self.left[key] -= 1
        self.waiting -= 1
        return True

    def remaining(self) -> str:
        left = Counter(self.left)
        out = []
        for value in self.ids:
            if left[_key(value)] > 0:
                left[_key(value)] -= 1
                out.append(str(value))
        return ", ".join(out)


def _unanswered(messages: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    """An assistant's calls not all answered by the tool messages right after it."""
    pending = _Pending()
    pending_at = 0
    for index, message in enumerate(messages):
        role = role_of(message)
        if role != "tool" and pending:
            yield Found(pending_at, {"ids": pending.remaining()})
            pending = _Pending()
        if role == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                pending = _Pending(calls)
                pending_at = index
        elif role == "tool":
            pending.take(message.get("tool_call_id"))
    if pending:
        yield Found(pending_at, {"ids": pending.remaining()})


def _tool_walk(messages: list[Any]) -> Iterator[tuple[str, Found]]:
    """(kind, where) for every tool message that lacks an id, repeats one, or answers no call
    of the assistant right before its block; ``where`` carries the ``id`` (and the ``first``
    index that used it, for a repeat)."""
    seen: dict[Any, int] = {}
    pending = _Pending()
    for index, message in enumerate(messages):
        role = role_of(message)
        if role == "assistant":
            calls = message.get("tool_calls")
            pending = _Pending(calls if isinstance(calls, list) else ())
        elif role == "tool":
            tool_call_id = message.get("tool_call_id")
            if not isinstance(tool_call_id, str) or not tool_call_id:
                yield "missing", Found(index)
                continue
            if tool_call_id in seen:
                yield "duplicate", Found(index, {"id": tool_call_id, "first": seen[tool_call_id]})
            seen.setdefault(tool_call_id, index)
            if not pending.take(tool_call_id):
                yield "orphan", Found(index, {"id": tool_call_id})
        else:
            pending = _Pending()


def _tool_kind(kind: str) -> Any:
    def find(messages: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
        for found, where in _tool_walk(messages):
            if found == kind:
                yield where

    return find


def _duplicate_call_ids(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """The first tool call whose id an earlier call of the request already used."""
    seen: set[Any] = set()
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            cid = call.get("id") if isinstance(call, dict) else None
            if not isinstance(cid, str):
                cid = None  # a missing or non-string id: such calls share one "id"
            if cid in seen:
                yield Found(index, {"id": cid})
                return  # the provider reports the first one
            seen.add(cid)


def _successive_assistants(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    previous: str | None = None
    for index, message in enumerate(messages):
        role = role_of(message)
        if role == "assistant" and previous == "assistant":
            yield Found(index, {"previous": index - 1})
        previous = role


def _assistants(messages: list[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, message in enumerate(messages):
        if role_of(message) == "assistant":
            yield index, message


def _empty_tool_calls(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    for index, message in _assistants(messages):
        calls = message.get("tool_calls")
        if "tool_calls" in message and (not isinstance(calls, list) or not calls):
            yield Found(index)


def _empty_assistant(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    for index, message in _assistants(messages):
        if not message.get("tool_calls") and message.get("content") in (None, "", []):
            yield Found(index)


def _calls(messages: list[Any]) -> Iterator[tuple[int, int, Any]]:
    for index, message in _assistants(messages):
        calls = message.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else ()):
            yield index, position, call


def _missing_type(messages: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    for index, position, call in _calls(messages):
        if isinstance(call, dict) and call.get("type") is None:
            yield Found(index, {"position": position})


def _arguments(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    return function.get("arguments") if isinstance(function, dict) else None


def _arguments_not_string(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    for index, position, call in _calls(messages):
        arguments = _arguments(call)
        if not isinstance(arguments, str):
            yield Found(index, {"position": position, "type": type(arguments).__name__})


def _invalid_arguments(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    for index, position, call in _calls(messages):
        arguments = _arguments(call)
        if not isinstance(arguments, str):
            continue  # arguments_not_string's
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            yield Found(index, {"position": position})


#: The pairing rules, in registry order: an unanswered call, an orphan result, a result without
#: its id or two results for one call may each come from a split turn (docs/providers.md#pairing,
#: hermes E1), a result displaced past a message, or a call never answered: one repair for all.
PAIRING_REPAIR: Settings = {
    "consecutive-assistant-messages": {},
    "blank-tool-call-ids": {},
    "displaced-tool-results": {},
    "missing-tool-call-ids": {},
    "orphan-tool-results": {"action": "text"},
    "unanswered-tool-calls": {},
}


#: Schema checks first (a provider deserializes before it validates), then semantic ones.
CHECKS: tuple[Check, ...] = (
    Check(
        "missing_tool_call_id",
        "a tool message carries a tool_call_id",
        _tool_kind("missing"),
        # docs/providers.md#openai-pairing, OpenAI/Azure (langchain-ai/langchain#22600)
        "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call()),
                        {"role": "tool", "content": "ok"},
                        AFTER,
                    ]
                }
            ),
        ),
        repair=PAIRING_REPAIR,
    ),
    Check(
        "arguments_not_string",
        "tool-call arguments are a string",
        _arguments_not_string,
        # docs/providers.md#openai-pairing, OpenAI (aaif-goose/goose-mobile#20)
        "Invalid type for 'messages[{index}].tool_calls[{position}].function.arguments': "
        "expected a string, but got {type} instead.",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call(arguments={"a": 1})),
                        tool_result(),
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"invalid-tool-arguments": {}},
    ),
    Check(
        "missing_tool_call_type",
        "every tool call has a type",
        _missing_type,
        # docs/providers.md#azure-pairing, Azure AI Inference (langchain-ai/langchain-azure#35)
        "Missing required parameter: 'messages[{index}].tool_calls[{position}].type'.",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(
                            {
                                "id": "abcDEF123",
                                "function": {"name": "read_file", "arguments": "{}"},
                            }
                        ),
                        tool_result(),
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"tool-call-type": {}},
    ),
    Check(
        "empty_tool_calls",
        "no empty, null or non-list tool_calls",
        _empty_tool_calls,
        # docs/providers.md#deepseek-pairing, DeepSeek via OpenCode (anomalyco/opencode#41860)
        "Invalid 'messages[{index}].tool_calls': empty array. Expected an array with minimum "
        "length 1, but got an empty array instead.",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        {"role": "assistant", "content": "Hm.", "tool_calls": []},
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"empty-tool-calls": {}},
    ),
    Check(
        "unanswered_tool_call",
        "every call answered by the tool messages right after its assistant",
        _unanswered,
        # docs/providers.md#deepseek-pairing, DeepSeek (langgenius/dify#32222)
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. (insufficient tool messages following tool_calls message)",
        examples=(Example({"messages": [USER, calls_turn(tool_call()), AFTER]}),),
        repair=PAIRING_REPAIR,
    ),
    Check(
        "orphan_tool_result",
        "a tool message answers a call of the assistant right before its block",
        _tool_kind("orphan"),
        # docs/providers.md#deepseek-pairing, DeepSeek (FoundationAgents/OpenManus#23)
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        tool_result("zzzZZZ999"),
                        {"role": "assistant", "content": "?"},
                        AFTER,
                    ]
                }
            ),
        ),
        repair=PAIRING_REPAIR,
    ),
    Check(
        "duplicate_tool_result",
        "no two tool messages answer the same id",
        _tool_kind("duplicate"),
        # docs/providers.md#deepseek-pairing, DeepSeek (craft-ai-agents/craft-agents-oss#621)
        "Duplicate value for 'tool_call_id' of in message[{index}]",
        examples=(
            Example(
                {"messages": [USER, calls_turn(tool_call()), tool_result(), tool_result(), AFTER]}
            ),
        ),
        repair={"duplicate-tool-call-ids": {}, **PAIRING_REPAIR},
    ),
    Check(
        "duplicate_tool_call_id",
        "tool-call ids unique across the request",
        _duplicate_call_ids,
        # docs/providers.md#deepseek-pairing: DeepSeek checks uniqueness across the whole request
        # (hermes-agent#79221)
        "Duplicate value for 'tool_call_id' in tool_calls",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call()),
                        tool_result(),
                        AFTER,
                        calls_turn(tool_call()),
                        tool_result(),
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"duplicate-tool-call-ids": {}},
    ),
    Check(
        "successive_assistant",
        "no assistant right after an assistant",
        _successive_assistants,
        # docs/providers.md#deepseek-roles, deepseek-reasoner (deepseek-ai/DeepSeek-R1#21)
        "deepseek-reasoner does not support successive user or assistant messages "
        "(messages[{previous}] and messages[{index}] in your input). You should interleave the "
        "user/assistant messages in the message sequence.",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        {"role": "assistant", "content": "A."},
                        {"role": "assistant", "content": "B."},
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"consecutive-assistant-messages": {}},
    ),
    Check(
        "empty_assistant",
        "an assistant has content or tool calls",
        _empty_assistant,
        # docs/providers.md#deepseek-content, DeepSeek V3 (carlrobertoh/ProxyAI#830)
        "Invalid assistant message: content or tool_calls must be set",
        examples=(Example({"messages": [USER, {"role": "assistant", "content": ""}, AFTER]}),),
        repair={"empty-tool-calls": {}},
    ),
    Check(
        "invalid_arguments",
        "tool-call arguments hold a JSON object",
        _invalid_arguments,
        # docs/providers.md#kimi-pairing, unattributed Moonshot-like (justrach/codegraff#752)
        "Invalid request: messages.{index}.tool_calls.{position}.function.arguments: arguments "
        "must be a valid JSON object string",
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call(arguments='{"path": "a"')),
                        tool_result(),
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"invalid-tool-arguments": {}},
    ),
)
