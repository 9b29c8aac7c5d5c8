"""Request-level fields (docs/providers.md#pairing ``tools: []``, docs/providers.md#reasoning
thinking + tool_choice)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rules.chat.thinking_tool_choice import forced
from rules.engine.thinking import THINKING_MODELS, thinking_enabled
from rules.providers.contract.base import Check, Found


def _empty_tools(messages: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    if "tools" in request and request["tools"] in ([], None):
        yield Found(None)


def _thinking_tool_choice(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    if forced(request.get("tool_choice")) and thinking_enabled(request, options["models"]):
        yield Found(None)


CHECKS: tuple[Check, ...] = (
    Check(
        "empty_tools",
        "no empty or null tools list",
        _empty_tools,
        # docs/providers.md#deepseek-pairing, DeepSeek v3.1 (marimo-team/marimo#6108)
        "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty "
        "array instead.",
    ),
    Check(
        "thinking_tool_choice",
        "no required or named tool_choice in thinking mode",
        _thinking_tool_choice,
        # docs/providers.md#deepseek-reasoning, DeepSeek V4 (deepseek-ai/DeepSeek-V3#1376)
        "Thinking mode does not support this tool_choice",
        options={"models": THINKING_MODELS},
    ),
)
