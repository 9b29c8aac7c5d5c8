"""thinking-tool-choice: no forced tool choice reaches a model in thinking mode.

What: in thinking mode (an explicit switch such as ``thinking.type: enabled``, ``reasoning`` or
``reasoning_effort``, else a model that thinks by default, option ``models``), a
``tool_choice`` of ``"required"`` or a named function becomes ``"auto"`` (option
``replacement: auto``) or is removed (``omit``).
Why: DeepSeek V4 "Thinking mode does not support this tool_choice"
(docs/providers.md#deepseek-reasoning, deepseek-ai/DeepSeek-V3#1376, BerriAI/litellm#37470); the
same is reported as "tool_choice 'required' is incompatible with thinking enabled"
(suyiiyii/AutoGLM-GUI#396), and by Kimi K2.5/K2.6 as "tool_choice 'specified' is incompatible
with thinking enabled" (docs/providers.md#kimi-request, bestruirui/octopus#251,
can1357/oh-my-pi#827). Thinking mode is read once, for every rule, by ``rules.engine.thinking``.
Safety: unsafe: the model may answer without calling the tool the client forced. The change is
logged with the original choice's kind (``required`` or ``function``).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.request import DROP, with_fields
from rules.engine.thinking import THINKING_MODELS, thinking_enabled
from rules.engine.wake import fields

NAME = "thinking-tool-choice"


#: The rule's options (the record below lists them; read them through these).
REPLACEMENT = Option(
    "replacement",
    "auto",
    "What a forced choice becomes: `auto`, or `omit` (the key is removed).",
    choices=("auto", "omit"),
)
MODELS = Option(
    "models",
    list(THINKING_MODELS),
    "Model-name patterns that think unless the request switches thinking off.",
)


def forced(choice: Any) -> str | None:
    """``required`` or ``function`` for a choice thinking mode refuses, else ``None``."""
    if choice == "required":
        return "required"
    if isinstance(choice, dict):
        return "function"
    return None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    request = ctx.request
    kind = forced(request.get("tool_choice"))
    if kind is None or not thinking_enabled(request, MODELS.of(ctx)):
        return Outcome(messages)
    replacement = REPLACEMENT.of(ctx)
    fields = with_fields(request, {"tool_choice": "auto" if replacement == "auto" else DROP})
    change = Change(NAME, -1, "replaced_tool_choice", {"was": kind, "now": replacement})
    return Outcome(messages, (change,), request=fields)


RULE = Rule(
    name=NAME,
    summary="In thinking mode, turn a forced tool_choice into auto.",
    defect="request level, in thinking mode (an explicit switch, `thinking.type: enabled`, "
    "`reasoning`, `reasoning_effort`, or a model matching option `models`): `tool_choice` "
    '`"required"` or a named function: DeepSeek V4 "Thinking mode does not support this '
    'tool_choice" '
    "(deepseek-ai/DeepSeek-V3#1376, BerriAI/litellm#37470; docs/providers.md#deepseek-reasoning); "
    "Kimi K2.5/K2.6 \"tool_choice 'specified' is incompatible with thinking enabled\" "
    "(bestruirui/octopus#251, can1357/oh-my-pi#827; docs/providers.md#kimi-request)",
    repair='it becomes `"auto"` (option `replacement`, or `omit` to remove it). Unsafe: the '
    "model may answer without the tool the client forced (logged with the original kind)",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(
        REPLACEMENT,
        MODELS,
    ),
    reads_request=True,
    woken_by=fields("tool_choice"),
)
