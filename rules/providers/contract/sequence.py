"""Role sequence and position (docs/providers.md#roles): what deepseek-reasoner, Qwen and MiniMax
reject, and what HF chat templates (vLLM, TGI, llama.cpp) raise, about the order of roles.

Entries that are no message (not an object, or without a string role) are passed over by every
check here: a server's request schema rejects them before any role rule is looked at.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rules.providers.contract.base import Check, Example, Found, role_of
from rules.providers.contract.examples import (
    AFTER,
    SYSTEM,
    USER,
    calls_turn,
    tool_call,
    tool_result,
)
from rules.vocabulary import SYSTEM_ROLES


def _successive_users(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    previous: str | None = None
    for index, message in enumerate(messages):
        role = role_of(message)
        if role == "user" and previous == "user":
            yield Found(index, {"previous": index - 1})
        previous = role


def _roles_not_alternating(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """The alternation loop of the HF templates, in its tool-aware form (Mistral-7B-Instruct-v0.3
    and later, Devstral): ``messages[0]`` is set aside if it is a system message; tool messages
    and every message whose ``tool_calls`` is set (not null) are skipped; the rest must go user,
    non-user, user, ... The template raises at the first break, so only that one is reported.

    A system message later than index 0 counts as a non-user. Templates with no tool exception
    (Llama-2, Gemma) also reject every tool message at an even position: no sequence repair
    fixes that (they need tool results rendered as user text), so it is not modelled here.
    """
    start = 1 if messages and role_of(messages[0]) == "system" else 0
    turn = 0
    for index in range(start, len(messages)):
        message = messages[index]
        role = role_of(message)
        if (
            role is None
            or role in ("tool", "tool_results")
            or message.get("tool_calls") is not None
        ):
            continue
        if (role == "user") != (turn % 2 == 0):
            yield Found(index, {"role": role})
            return
        turn += 1


def _system_not_first(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    for index, message in enumerate(messages):
        if index > 0 and role_of(message) == "system":
            yield Found(index)


def _multiple_system(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    first: int | None = None
    for index, message in enumerate(messages):
        if role_of(message) == "system":
            if first is None:
                first = index
            else:
                yield Found(index, {"first": first})


def _first_not_user(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """The first message with a role that is not system (or developer), if it is not a user.
    With option ``tool_calls_only`` (Gemini) only an assistant with tool calls counts."""
    for index, message in enumerate(messages):
        role = role_of(message)
        if role is None or role in SYSTEM_ROLES:
            continue
        if role != "user" and (not options.get("tool_calls_only") or _has_calls(message)):
            yield Found(index, {"role": role})
        return


def _has_calls(message: dict[str, Any]) -> bool:
    calls = message.get("tool_calls")
    return message.get("role") == "assistant" and isinstance(calls, list) and bool(calls)


def _no_user_message(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """No user message at all, in a non-empty list (an empty one is another rejection)."""
    if messages and not any(role_of(message) == "user" for message in messages):
        yield Found(None)


CHECKS: tuple[Check, ...] = (
    Check(
        "system_not_first",
        "a system message only at index 0",
        _system_not_first,
        # docs/providers.md#qwen-roles, Qwen3.5/3.6 chat template (vllm-project/vllm#41114,
        # ggml-org/llama.cpp#27367)
        "System message must be at the beginning.",
        examples=(
            Example({"messages": [USER, {"role": "assistant", "content": "Ok."}, SYSTEM, AFTER]}),
        ),
        repair={"system-messages": {"later": "hoist"}},
    ),
    Check(
        "multiple_system",
        "at most one system message",
        _multiple_system,
        # docs/providers.md#minimax-roles, MiniMax (BigPizzaV3/CodexPlusPlus#267)
        "invalid params, chat content has invalid message role: system (2013)",
        examples=(
            Example({"messages": [SYSTEM, {"role": "system", "content": "Be terse."}, USER]}),
        ),
        repair={"system-messages": {"later": "hoist"}},
    ),
    Check(
        "first_not_user",
        "the first message after the system messages is a user message",
        _first_not_user,
        # docs/providers.md#deepseek-roles, deepseek-reasoner (ChatGPTNextWeb/NextChat#6343)
        "The first message (except the system message) of deepseek-reasoner must be a user "
        "message, but an {role} message detected.",
        options={"tool_calls_only": False},
        examples=(Example({"messages": [calls_turn(tool_call()), tool_result(), AFTER]}),),
        repair={"leading-user-message": {}},
    ),
    Check(
        "no_user_message",
        "at least one user message",
        _no_user_message,
        # docs/providers.md#qwen-roles, Qwen DashScope (agentscope-ai/agentscope-java#613)
        "<400> InternalError.Algo.InvalidParameter: The input messages do not contain elements "
        "with the role of user",
        examples=(Example({"messages": [SYSTEM, {"role": "assistant", "content": "Hello."}]}),),
        repair={"leading-user-message": {}},
    ),
    Check(
        "successive_user",
        "no user right after a user",
        _successive_users,
        # docs/providers.md#deepseek-roles, deepseek-reasoner (deepseek-ai/DeepSeek-R1#21)
        "deepseek-reasoner does not support successive user or assistant messages "
        "(messages[{previous}] and messages[{index}] in your input). You should interleave the "
        "user/assistant messages in the message sequence.",
        examples=(Example({"messages": [USER, {"role": "user", "content": "Also the tests."}]}),),
        repair={"consecutive-user-messages": {}},
    ),
    Check(
        "roles_not_alternating",
        "after an optional leading system message, user and assistant alternate from a user",
        _roles_not_alternating,
        # docs/providers.md#chat-templates-roles, HF chat templates on vLLM (400) / TGI
        # (microsoft/autogen#1037, huggingface/text-generation-inference#3198)
        "Conversation roles must alternate user/assistant/user/assistant/...",
        examples=(Example({"messages": [USER, {"role": "user", "content": "Also the tests."}]}),),
        repair={
            "consecutive-assistant-messages": {},
            "consecutive-user-messages": {},
            "system-messages": {"later": "hoist"},
        },
    ),
)
