"""Reasoning replay (docs/providers.md#reasoning): in thinking mode, DeepSeek and Kimi reject an
assistant tool-call turn without its ``reasoning_content``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any, Final

from rules.engine.thinking import THINKING_MODELS
from rules.providers.contract.base import Check, Example, Found, role_of
from rules.providers.contract.chat_shapes import REASONING_FIELD as FIELD
from rules.providers.contract.chat_shapes import calling_turn, plain_turns_in_loops
from rules.providers.contract.examples import AFTER, USER, calls_turn, tool_call, tool_result
from rules.providers.contract.thinking import in_thinking_mode

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
    if not in_thinking_mode(request, options["models"]):
        return
    plain = set(plain_turns_in_loops(messages)) if options.get("plain_turns") else set()
    for index, message in enumerate(messages):
        if calling_turn(message) or index in plain:
            value = message.get(FIELD)
            if not (isinstance(value, str) and value):
                yield Found(index)


#: docs/providers.md#gemini-reasoning, Gemini 3 through its OpenAI-compatible endpoint
#: (Gitlawb/openclaude#67).
GEMINI_SIGNATURE_TEXT: Final = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {index}. Please "
    "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def _signature_missing(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """Google validates the current turn only (the steps since the last user message), and in
    each step the first function call; an ``extra_content.google.thought_signature`` string
    (Google's ``skip_thought_signature_validator`` included) passes."""
    model = request.get("model")
    name = model.lower().split("/")[-1] if isinstance(model, str) else ""
    if not any(fnmatchcase(name, p.lower()) for p in options["models"]):
        return
    start = max((i for i, m in enumerate(messages) if role_of(m) == "user"), default=-1) + 1
    for index in range(start, len(messages)):
        message = messages[index]
        calls = message.get("tool_calls") if role_of(message) == "assistant" else None
        if not (isinstance(calls, list) and calls and isinstance(calls[0], dict)):
            continue
        extra = calls[0].get("extra_content")
        google = extra.get("google") if isinstance(extra, dict) else None
        signature = google.get("thought_signature") if isinstance(google, dict) else None
        if not (isinstance(signature, str) and signature):
            function = calls[0].get("function")
            called = function.get("name") if isinstance(function, dict) else None
            yield Found(index, {"name": called if isinstance(called, str) else ""})


CHECKS: tuple[Check, ...] = (
    Check(
        "reasoning_content_missing",
        "in thinking mode, every tool-call turn carries reasoning_content",
        _reasoning_missing,
        DEEPSEEK_V4_TEXT,
        options={"models": list(THINKING_MODELS), "plain_turns": False},
        examples=(
            Example(
                {
                    "thinking": {"type": "enabled"},
                    "messages": [USER, calls_turn(tool_call()), tool_result(), AFTER],
                }
            ),
        ),
        repair={"reasoning-content": {"models": ["*"], "plain_turns": True}},
    ),
    Check(
        "thought_signature_missing",
        "in the current turn, the first call of each step carries a thought signature",
        _signature_missing,
        GEMINI_SIGNATURE_TEXT,
        options={"models": ["gemini-3*"]},
        examples=(
            Example(
                {
                    "model": "gemini-3.1-pro-preview",
                    "messages": [USER, calls_turn(tool_call()), tool_result()],
                }
            ),
        ),
        repair={"missing-thought-signatures": {"models": ["*"]}},
        # Google validates thought signatures for Gemini 3 only
        probe_models=("gemini-3*",),
    ),
)
