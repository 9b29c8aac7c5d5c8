"""Thinking mode: whether a request runs in it, and where a turn carries its reasoning.

One reading, used by every chat rule that needs it (``reasoning-content``,
``thinking-tool-choice``, ``thinking-sampling``): what clients and routers actually send.

1. An explicit switch decides, the first one present in this order:
   ``thinking: {"type": "enabled"|"adaptive"|"disabled"}`` (DeepSeek, Kimi K2.x, GLM);
   ``reasoning: {"enabled": bool}`` or ``reasoning: {"effort": ...}`` (OpenRouter's unified
   field: ``effort: "none"`` is off; BerriAI/litellm#27439 sends ``reasoning: {enabled: true}``);
   a top-level ``reasoning_effort`` (``"none"`` is off; Kimi K3 and DeepSeek V4 read it);
   ``enable_thinking: bool`` (Qwen / DashScope, and clients that send it to DeepSeek through
   OpenRouter, fishjar/kiss-translator#624); ``chat_template_kwargs: {"enable_thinking"|
   "thinking": bool}`` (vLLM / SGLang serving the same models).
2. Without one, the model name: a router's ``:thinking`` variant thinks; otherwise the name is
   matched (case-insensitive globs) as sent and without its router prefix and decorations, so
   ``deepseek/deepseek-v4-flash``, ``~deepseek/deepseek-v4-flash-latest`` and
   ``moonshotai/kimi-k2.5:free`` match the patterns written for the bare names.

The model lists live in the profiles (``rules.providers.profiles``), each with its sources; the
defaults below are DeepSeek's, the default profile's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

#: Models that think unless the request says otherwise: DeepSeek's reasoner alias, V4 and its
#: renamed successor ``deepseek-flash`` (V4.1 Flash since 2026-09-10, "thinking (default)" in
#: DeepSeek's model table: coulsontl/ai-toolbox#337, kuan-er/sjtu-agent#182;
#: docs/providers.md#deepseek).
THINKING_MODELS: tuple[str, ...] = ("deepseek-reasoner*", "deepseek-v4*", "deepseek-flash*")
#: Where a chat assistant message carries the model's reasoning (DeepSeek, Kimi).
REASONING_FIELD = "reasoning_content"

_ON = ("enabled", "adaptive")


def explicit_thinking(request: Mapping[str, Any]) -> bool | None:
    """What the request's own switches say about thinking, or ``None`` if none is set."""
    thinking = request.get("thinking")
    if type(thinking) is dict and type(thinking.get("type")) is str:
        kind = thinking["type"]
        if kind in _ON or kind == "disabled":
            return kind in _ON
    reasoning = request.get("reasoning")
    if type(reasoning) is dict:
        enabled = reasoning.get("enabled")
        if type(enabled) is bool:
            return enabled
        effort = reasoning.get("effort")
        if type(effort) is str and effort:
            return effort != "none"
    effort = request.get("reasoning_effort")
    if type(effort) is str and effort:
        return effort != "none"
    enable = request.get("enable_thinking")
    if type(enable) is bool:
        return enable
    kwargs = request.get("chat_template_kwargs")
    if type(kwargs) is dict:
        for key in ("enable_thinking", "thinking"):
            if type(kwargs.get(key)) is bool:
                return bool(kwargs[key])
    return None


def model_names(model: str) -> tuple[str, ...]:
    """The lower-cased names a model is matched by: as sent, and bare (router prefix such as
    ``deepseek/`` or ``~deepseek/`` and a ``:variant`` suffix removed)."""
    lowered = model.lower()
    bare = lowered.rsplit("/", 1)[-1].lstrip("~").split(":", 1)[0]
    return (lowered,) if bare == lowered else (lowered, bare)


def model_matches(model: Any, patterns: Any) -> bool:
    """``model`` (a string) matches one of ``patterns`` (case-insensitive globs), as sent or
    bare (``model_names``)."""
    if type(model) is not str or not isinstance(patterns, list | tuple):
        return False
    known = _PATTERNS.get(id(patterns))
    if known is None or known[0] is not patterns:
        if len(_PATTERNS) >= 256:
            _PATTERNS.clear()
        strings = all(type(pattern) is str for pattern in patterns)
        known = _PATTERNS[id(patterns)] = (patterns, tuple(patterns) if strings else None)
    if known[1] is not None:
        return _matches(model, known[1])
    return _match(model, patterns)


#: The patterns a rule's options hold (the same list on every request), as the tuple
#: ``_matches`` remembers, or ``None`` if one is not a string; by the list's id.
_PATTERNS: dict[int, tuple[Any, tuple[str, ...] | None]] = {}


@lru_cache(maxsize=1024)
def _matches(model: str, patterns: tuple[str, ...]) -> bool:
    """``_match`` remembered: a request's model and a rule's patterns repeat from request to
    request (a pure function of two strings; bounded)."""
    return _match(model, patterns)


def _match(model: str, patterns: Sequence[Any]) -> bool:
    names = model_names(model)
    return any(
        type(pattern) is str and fnmatchcase(name, pattern.lower())
        for pattern in patterns
        for name in names
    )


def thinking_enabled(request: Mapping[str, Any], models: Sequence[str]) -> bool:
    """The request runs in thinking mode: its explicit switch says so, or, without one, its
    model is a router's ``:thinking`` variant or matches ``models`` (see the module doc)."""
    explicit = explicit_thinking(request)
    if explicit is not None:
        return explicit
    model = request.get("model")
    if type(model) is not str:
        return False
    if model.lower().endswith(":thinking"):
        return True
    return model_matches(model, models)
