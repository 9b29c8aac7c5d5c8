"""When a provider judges a request to be in thinking mode, read from what the providers document
(the contract's own reading: a check shares data with the rules, never their predicates).

DeepSeek, Kimi K2.x and GLM switch with ``thinking.type``; OpenRouter with ``reasoning``
(``enabled``, ``effort``); Kimi K3 and DeepSeek V4 take ``reasoning_effort``; Qwen / DashScope
``enable_thinking`` (and vLLM / SGLang ``chat_template_kwargs``). Without a switch the model
decides: a router's ``:thinking`` variant, or a model that thinks by default (the check's
``models`` globs, matched with and without a router's ``vendor/`` or ``~vendor/`` prefix).
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any


def _switch(request: Mapping[str, Any]) -> bool | None:
    thinking = request.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind in ("enabled", "adaptive", "disabled"):
        return bool(kind != "disabled")
    reasoning = request.get("reasoning")
    if isinstance(reasoning, dict):
        if isinstance(reasoning.get("enabled"), bool):
            return bool(reasoning["enabled"])
        if isinstance(reasoning.get("effort"), str) and reasoning["effort"]:
            return bool(reasoning["effort"] != "none")
    effort = request.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        return effort != "none"
    if isinstance(request.get("enable_thinking"), bool):
        return bool(request["enable_thinking"])
    kwargs = request.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("enable_thinking", "thinking"):
            if isinstance(kwargs.get(key), bool):
                return bool(kwargs[key])
    return None


def in_thinking_mode(request: Mapping[str, Any], models: Any) -> bool:
    """The provider would treat ``request`` as a thinking-mode request."""
    switch = _switch(request)
    if switch is not None:
        return switch
    model = request.get("model")
    if not isinstance(model, str):
        return False
    name = model.lower()
    if name.endswith(":thinking"):
        return True
    candidates = {name, name.split("/")[-1].lstrip("~").partition(":")[0]}
    listed = models if isinstance(models, list | tuple) else []
    patterns = [p.lower() for p in listed if isinstance(p, str)]
    return any(fnmatchcase(c, p) for c in candidates for p in patterns)
