"""The one reading of thinking mode (rules/engine/thinking.py), and the router profile that
picks the downstream provider from the model's vendor prefix."""

from __future__ import annotations

from typing import Any

import pytest

from rules.engine.thinking import THINKING_MODELS, model_names, thinking_enabled
from rules.providers.contract.thinking import in_thinking_mode
from rules.providers.planner import Planner
from rules.providers.profiles import KIMI_THINKING_MODELS

#: (request fields, thinking?) under DeepSeek's default models: what clients and routers send.
CASES: list[tuple[dict[str, Any], bool]] = [
    ({"model": "deepseek-v4-flash"}, True),
    ({"model": "DeepSeek-V4-Pro"}, True),
    ({"model": "deepseek-flash"}, True),
    ({"model": "deepseek-chat"}, False),
    # router names (BerriAI/litellm#27439, OpenRouter slugs)
    ({"model": "deepseek/deepseek-v4-flash"}, True),
    ({"model": "~deepseek/deepseek-v4-flash-latest"}, True),
    ({"model": "openrouter/~deepseek/deepseek-v4-flash-latest"}, True),
    ({"model": "deepseek/deepseek-v4-flash:free"}, True),
    ({"model": "deepseek/deepseek-chat"}, False),
    ({"model": "anthropic/claude-3.7-sonnet:thinking"}, True),
    # explicit switches decide over the model, in both directions
    ({"model": "deepseek-v4-flash", "thinking": {"type": "disabled"}}, False),
    ({"model": "deepseek-chat", "thinking": {"type": "enabled"}}, True),
    ({"model": "deepseek-chat", "thinking": {"type": "adaptive"}}, True),
    ({"model": "deepseek-chat", "reasoning": {"enabled": True}}, True),
    ({"model": "deepseek-v4-flash", "reasoning": {"enabled": False}}, False),
    ({"model": "deepseek-chat", "reasoning": {"effort": "high"}}, True),
    ({"model": "deepseek-v4-flash", "reasoning": {"effort": "none"}}, False),
    ({"model": "deepseek-chat", "reasoning_effort": "max"}, True),
    ({"model": "deepseek-v4-flash", "reasoning_effort": "none"}, False),
    ({"model": "deepseek-v4-flash", "enable_thinking": False}, False),
    ({"model": "qwen3-max", "enable_thinking": True}, True),
    ({"model": "deepseek-v4-flash", "chat_template_kwargs": {"thinking": False}}, False),
    ({"model": "deepseek-chat", "chat_template_kwargs": {"enable_thinking": True}}, True),
    # the first switch present wins; a malformed one is no switch
    ({"model": "deepseek-chat", "thinking": {"type": "enabled"}, "reasoning_effort": "none"}, True),
    ({"model": "deepseek-v4-flash", "thinking": "on"}, True),
    ({"model": "deepseek-v4-flash", "reasoning_effort": ""}, True),
    ({"model": 7}, False),
    ({}, False),
]


@pytest.mark.parametrize(("request_fields", "thinking"), CASES)
def test_the_rules_and_the_contract_read_thinking_mode_alike(
    request_fields: dict[str, Any], thinking: bool
) -> None:
    assert thinking_enabled(request_fields, THINKING_MODELS) is thinking
    assert in_thinking_mode(request_fields, THINKING_MODELS) is thinking


@pytest.mark.parametrize(
    "model",
    [
        "kimi-k2.5",
        "moonshotai/kimi-k2.6",
        "kimi-k2-thinking-turbo",
        "kimi-k3",
        "~moonshotai/kimi-k3",
    ],
)
def test_kimi_thinking_models_include_k3(model: str) -> None:
    assert thinking_enabled({"model": model}, KIMI_THINKING_MODELS)
    assert not thinking_enabled({"model": "kimi-k2-0905-preview"}, KIMI_THINKING_MODELS)


def test_model_names_are_matched_as_sent_and_bare() -> None:
    assert model_names("~DeepSeek/DeepSeek-V4-Flash-Latest:nitro") == (
        "~deepseek/deepseek-v4-flash-latest:nitro",
        "deepseek-v4-flash-latest",
    )
    assert model_names("kimi-k2.5") == ("kimi-k2.5",)


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("deepseek/deepseek-v4-flash", "deepseek"),
        ("~deepseek/deepseek-v4-flash-latest", "deepseek"),
        ("moonshotai/kimi-k2.5", "kimi"),
        ("minimax/minimax-m2.7", "minimax"),
        ("openai/gpt-5", "openrouter"),
        ("google/gemini-3-flash-preview", "openrouter"),
        (None, "openrouter"),
    ],
)
def test_the_openrouter_profile_runs_the_vendor_profile(model: Any, profile: str) -> None:
    """OpenRouter relays the downstream refusal verbatim: a vendor whose refusals are on record
    through it gets its own profile; any other model the pairing core."""
    assert Planner(default="openrouter").plan(model).profile == profile
    assert Planner().under("openrouter").plan(model).profile == profile
