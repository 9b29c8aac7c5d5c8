"""messages-thinking-type: ``thinking.type`` ``enabled`` for the models that accept no other.

What: request level. For a model matching option ``models`` (Kimi K2.7 Code: ``kimi-k2.7-code``
and ``kimi-k2.7-code-highspeed``), a ``thinking`` whose ``type`` is a string other than
``enabled`` is rewritten: ``disabled`` is removed (the model's default is thinking on, which it
cannot turn off); any other type (``adaptive``, as Claude Code and the SDKs send for newer
Claude models) becomes ``{"type": "enabled", "budget_tokens": N}``, its other keys kept. ``N``
is the client's own ``budget_tokens`` if it sent one of at least 1024; else ``max_tokens - 1``,
the largest budget the request allows (what Claude Code itself sends with ``enabled``, and the
nearest to ``adaptive``, where the model decides how much to think); else 1024, Anthropic's
minimum. A request with ``type: enabled`` or another model is never touched.
Why: Kimi's endpoint answers 400 "invalid thinking: only type=enabled is allowed for this model"
(MoonshotAI/Kimi-K2#141; can1357/oh-my-pi#3852 for ``kimi-k2.7-code`` and ``-highspeed``,
ltmoerdani/opencode-copilot-chat#45; docs/providers.md#anthropic-messages). Only that family:
Kimi K2.5/K2.6 accept ``disabled``, and Kimi K3 refuses ``enabled`` and wants ``adaptive``
(BigPizzaV3/CodexPlusPlus#2183), so the option names the refusing models, not Kimi as a whole.
Safety: safe: the model thinks in either case (it has no other mode); the budget bounds its
thinking within the client's own ``max_tokens``. Logged with the type it was and the budget.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Final

from rules import vocabulary
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.wake import fields

NAME = "messages-thinking-type"
#: Anthropic's smallest ``budget_tokens``.
MIN_BUDGET: Final = 1024
#: The models on record refusing every ``thinking.type`` but ``enabled``.
REFUSING: Final = vocabulary.THINKING_TYPE_REFUSING

#: The rule's options (the record below lists them; read them through these).
MODELS = Option(
    "models", list(REFUSING), "Models that accept only `thinking.type: enabled` (globs)."
)


def refused(request: Any, models: Any) -> str | None:
    """The ``thinking.type`` a model in ``models`` refuses in this request, else ``None``."""
    thinking = request.get("thinking")
    kind = thinking.get("type") if type(thinking) is dict else None
    model = request.get("model")
    if type(kind) is not str or kind == "enabled" or type(model) is not str:
        return None
    if not isinstance(models, list | tuple):
        return None
    lowered = model.lower()
    return kind if any(type(p) is str and fnmatchcase(lowered, p.lower()) for p in models) else None


def budget(thinking: dict[str, Any], max_tokens: Any) -> int:
    """The ``budget_tokens`` of the ``enabled`` thinking that replaces ``thinking``."""
    own = thinking.get("budget_tokens")
    if type(own) is int and own >= MIN_BUDGET:
        return own
    if type(max_tokens) is int and max_tokens > MIN_BUDGET:
        return max_tokens - 1
    return MIN_BUDGET


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    kind = refused(request, MODELS.of(ctx))
    if kind is None:
        return Outcome(messages)
    if kind == "disabled":
        fields = {key: value for key, value in request.items() if key != "thinking"}
        change = Change(NAME, -1, "removed_thinking", {"was": kind})
        return Outcome(messages, (change,), request=fields)
    thinking: dict[str, Any] = request["thinking"]
    tokens = budget(thinking, request.get("max_tokens"))
    enabled = {**thinking, "type": "enabled", "budget_tokens": tokens}
    change = Change(NAME, -1, "enabled_thinking", {"was": kind, "budget_tokens": tokens})
    return Outcome(messages, (change,), request={**request, "thinking": enabled})


RULE = Rule(
    name=NAME,
    summary="For models that accept only `thinking.type: enabled`, rewrite any other type.",
    defect="`thinking.type` other than `enabled` (`adaptive`, `disabled`) for Kimi K2.7 Code: "
    'Kimi "invalid thinking: only type=enabled is allowed for this model"',
    repair='`adaptive` (or any other type) becomes `{"type": "enabled", "budget_tokens": N}` (the '
    "client's budget, else `max_tokens - 1`, at least 1024); `disabled` is removed (the model "
    "always thinks); for option `models` only",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(MODELS,),
    reads_request=True,
    woken_by=fields("thinking"),
)
