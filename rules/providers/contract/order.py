"""Mistral's order contract (docs/providers.md#mistral-roles, mistral-common ``validator.py``):
which role may follow which, how a one-message request must start, and how a request must end; with
the deepseek-reasoner and llama.cpp wordings of the last rule as profile overrides.

Roles are judged only among the four Mistral knows (``system``, ``user``, ``assistant``,
``tool``): an entry that is not an object, has a non-string role or another role (``developer``,
``function``) is a schema rejection ("Input should be 'system', 'user', 'assistant' or
'tool'"), raised before any order rule is looked at, so these checks pass over it, and the pair
across it is not judged either (no order is defined with an unknown neighbour).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rules.providers.contract.base import Check, Example, Found, role_of
from rules.providers.contract.chat_shapes import ends_on_assistant
from rules.providers.contract.examples import AFTER, USER, calls_turn, tool_call, tool_result

#: mistral-common ``_validate_message_order``: the roles allowed after each role.
NEXT_ROLES: Mapping[str, frozenset[str]] = {
    "system": frozenset({"user", "assistant", "system"}),
    "user": frozenset({"assistant", "system", "user"}),
    "assistant": frozenset({"assistant", "user", "tool"}),
    "tool": frozenset({"assistant", "tool"}),
}


def _known_role(message: Any) -> str | None:
    role = role_of(message)
    return role if role in NEXT_ROLES else None


def _unexpected_role_order(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """Every message whose role the table does not allow after the previous message's."""
    previous: str | None = None
    for index, message in enumerate(messages):
        role = _known_role(message)
        if previous is not None and role is not None and role not in NEXT_ROLES[previous]:
            yield Found(index, {"role": role, "previous": previous})
        previous = role


def _conversation_start(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    """A request of exactly one message, an assistant or a tool message (mistral-common checks
    the first role only when it is the only message; longer requests meet the order table)."""
    if len(messages) == 1:
        role = _known_role(messages[0])
        if role in ("assistant", "tool"):
            yield Found(0, {"role": role})


def _trailing_assistant(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """The last entry is an assistant without tool calls (one with tool calls is
    unanswered_tool_call's), unless it carries ``"prefix": true`` and ``prefix_allowed``."""
    if ends_on_assistant(messages, options.get("prefix_allowed", True) is not False):
        yield Found(len(messages) - 1, {"role": "assistant"})


CHECKS: tuple[Check, ...] = (
    Check(
        "conversation_start",
        "a one-message request is a user or system message",
        _conversation_start,
        # docs/providers.md#mistral-roles, mistral-common validator.py ("Single-message request must
        # be user or system")
        "Conversation must start with a user message or system message",
        examples=(Example({"messages": [{"role": "assistant", "content": "Hello."}]}),),
        repair={"leading-user-message": {}},
    ),
    Check(
        "trailing_assistant",
        "the request does not end on an assistant without tool calls (unless prefix: true)",
        _trailing_assistant,
        # docs/providers.md#mistral-roles, Mistral (NEKOparapa/AiNiee#641, QuantumNous/new-api#2858,
        # 0xPlaygrounds/rig#1130); deepseek-reasoner (BerriAI/litellm#8090) and llama.cpp
        # (ggml-org/llama.cpp#20861) word it their way: profile overrides
        "Expected last role User or Tool (or Assistant with prefix True) for serving but got "
        "{role}",
        options={"prefix_allowed": True},
        examples=(Example({"messages": [USER, {"role": "assistant", "content": "Sure, I"}]}),),
        repair={"trailing-assistant": {"action": "continue", "prefix_allowed": False}},
    ),
    Check(
        "unexpected_role_order",
        "each role follows one Mistral allows before it",
        _unexpected_role_order,
        # docs/providers.md#mistral-roles, Mistral "tool → user" (avante-corp/avante.nvim#2562,
        # datapizza-labs/datapizza-ai#98) and the mistral-common order table (validator.py); Mistral
        # answers 400, code 3230
        "Unexpected role '{role}' after role '{previous}'",
        examples=(Example({"messages": [USER, calls_turn(tool_call()), tool_result(), AFTER]}),),
        repair={"tool-user-bridge": {}},
    ),
)
