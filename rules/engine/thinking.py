"""Thinking mode: whether a request runs in it, and where a turn carries its reasoning."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

#: Models that think unless the request says otherwise: DeepSeek's reasoner alias and V4
#: (thinking on by default, docs/providers.md#deepseek).
THINKING_MODELS: tuple[str, ...] = ("deepseek-reasoner*", "deepseek-v4*")
#: Where a chat assistant message carries the model's reasoning (DeepSeek, Kimi).
REASONING_FIELD = "reasoning_content"


def thinking_enabled(request: Mapping[str, Any], models: Sequence[str]) -> bool:
    """``thinking: {"type": "enabled"|"disabled"}`` decides; without it, the model name does
    (case-insensitive glob patterns, e.g. ``deepseek-v4*``)."""
    thinking = request.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "disabled"):
        return bool(thinking["type"] == "enabled")
    model = request.get("model")
    if not isinstance(model, str):
        return False
    model = model.lower()
    return any(fnmatchcase(model, pattern.lower()) for pattern in models)
