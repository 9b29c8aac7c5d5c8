"""thinking-tool-choice: no forced tool choice reaches a model in thinking mode.

What: in thinking mode (``thinking.type: enabled``, or a model that thinks by default, option
``models``), a ``tool_choice`` of ``"required"`` or a named function becomes ``"auto"`` (option
``replacement: auto``) or is removed (``omit``).
Why: DeepSeek V4 "Thinking mode does not support this tool_choice"
(docs/providers.md#deepseek-reasoning, deepseek-ai/DeepSeek-V3#1376, BerriAI/litellm#37470); the
same is reported as "tool_choice 'required' is incompatible with thinking enabled"
(suyiiyii/AutoGLM-GUI#396). Safety: unsafe: the model may answer without calling the tool the client
forced. The change is logged with the original choice's kind (``required`` or ``function``).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext
from rules.engine.thinking import THINKING_MODELS, thinking_enabled

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
    "Model-name patterns that think unless the request sets thinking.type: disabled.",
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
    fields = {key: value for key, value in request.items() if key != "tool_choice"}
    replacement = REPLACEMENT.of(ctx)
    if replacement == "auto":
        fields["tool_choice"] = "auto"
    change = Change(NAME, -1, "replaced_tool_choice", {"was": kind, "now": replacement})
    return Outcome(messages, (change,), request=fields)


RULE = Rule(
    name=NAME,
    summary="In thinking mode, turn a forced tool_choice into auto.",
    defect="request level, in thinking mode (`thinking.type: enabled`, or a model matching option "
    '`models` without `thinking.type: disabled`): `tool_choice` `"required"` or a named '
    'function: DeepSeek V4 "Thinking mode does not support this tool_choice" '
    "(deepseek-ai/DeepSeek-V3#1376, BerriAI/litellm#37470; docs/providers.md#deepseek-reasoning)",
    repair='it becomes `"auto"` (option `replacement`, or `omit` to remove it). Unsafe: the '
    "model may answer without the tool the client forced (logged with the original kind)",
    safety="unsafe",
    default=False,
    apply=apply,
    options=(
        REPLACEMENT,
        MODELS,
    ),
    reads_request=True,
)
