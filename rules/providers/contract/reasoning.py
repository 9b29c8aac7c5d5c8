"""Reasoning replay (docs/providers.md#reasoning): in thinking mode, DeepSeek and Kimi reject an
assistant tool-call turn without its ``reasoning_content``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from rules.chat.reasoning_content import FIELD, plain_turns_in_tool_spans, tool_call_turn
from rules.engine.thinking import THINKING_MODELS, thinking_enabled
from rules.providers.contract.base import Check, Found

#: Row 170, DeepSeek V4 (anomalyco/opencode#24083): thinking on by default, no index in the text.
DEEPSEEK_V4_TEXT: Final = (
    "The `reasoning_content` in the thinking mode must be passed back to the API."
)
#: Row 169, DeepSeek V3.2 / ``deepseek-reasoner`` with thinking (hotovo/aider-desk#529).
DEEPSEEK_TEXT: Final = (
    "Missing `reasoning_content` field in the assistant message at message index {index}. For "
    "more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
)
#: Row 174, Moonshot Kimi K2.5/K2.6 (iOfficeAI/AionUi#2746, MoonshotAI/kimi-agent-sdk#169).
KIMI_TEXT: Final = (
    "thinking is enabled but reasoning_content is missing in assistant tool call message at "
    "index {index}"
)


def _reasoning_missing(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """In thinking mode, a tool-call turn whose ``reasoning_content`` is absent, not a string or
    ``""`` (V4 rejects the empty string, hermes R9; a blank one is accepted); with
    ``plain_turns``, also a plain assistant between two user messages with a tool-call turn
    (DeepSeek V4, hermes-agent PR #14941; docs/providers.md)."""
    if not thinking_enabled(request, options["models"]):
        return
    plain = set(plain_turns_in_tool_spans(messages)) if options.get("plain_turns") else set()
    for index, message in enumerate(messages):
        if tool_call_turn(message) or index in plain:
            value = message.get(FIELD)
            if not (isinstance(value, str) and value):
                yield Found(index)


CHECKS: tuple[Check, ...] = (
    Check(
        "reasoning_content_missing",
        "in thinking mode, every tool-call turn carries reasoning_content",
        _reasoning_missing,
        DEEPSEEK_V4_TEXT,
        options={"models": list(THINKING_MODELS), "plain_turns": False},
    ),
)
