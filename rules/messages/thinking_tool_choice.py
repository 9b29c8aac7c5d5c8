"""messages-thinking-tool-choice: no forced tool choice reaches a model in thinking mode.

What: request level. In thinking mode (``thinking.type`` ``enabled`` or ``adaptive``, or no
``thinking`` and a model matching option ``models``, which think by default), a ``tool_choice``
of type ``any`` or ``tool`` (a named tool) becomes ``{"type": "auto"}``; its
``disable_parallel_tool_use`` is kept.
Why: Anthropic answers 400 "Thinking may not be enabled when tool_choice forces tool use."
(mastra-ai/mastra#7507, can1357/oh-my-pi#341, BerriAI/litellm#17129); DeepSeek's Anthropic
endpoint "deepseek-reasoner does not support this tool_choice" for ``deepseek-v4-pro`` and
``-flash`` (deepseek-ai/awesome-deepseek-integration#598, #606: Claude Code's WebSearch and
WebFetch force a tool; deepseek-ai/DeepSeek-R1#836).
Safety: unsafe: the model may answer without calling the tool the client forced (logged with
the original choice's type).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, fields_only
from rules.engine.thinking import THINKING_MODELS, thinking_enabled
from rules.engine.wake import fields

NAME = "messages-thinking-tool-choice"


#: The rule's option (the record below lists it; read it through this).
MODELS = Option(
    "models",
    list(THINKING_MODELS),
    "Models that think when the request has no `thinking` (globs).",
)


def forced(choice: Any) -> str | None:
    """``any`` or ``tool`` for a choice that forces tool use, else ``None``."""
    kind = choice.get("type") if type(choice) is dict else None
    return kind if kind in ("any", "tool") else None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    choice = ctx.request.get("tool_choice")
    kind = forced(choice)
    if (
        kind is None
        or not isinstance(choice, dict)
        or not thinking_enabled(ctx.request, MODELS.of(ctx))
    ):
        return Outcome(messages)
    auto: dict[str, Any] = {"type": "auto"}
    if "disable_parallel_tool_use" in choice:
        auto["disable_parallel_tool_use"] = choice["disable_parallel_tool_use"]
    change = Change(NAME, -1, "replaced_tool_choice", {"was": kind, "now": "auto"})
    return Outcome(messages, (change,), request={**ctx.request, "tool_choice": auto})


RULE = Rule(
    name=NAME,
    summary="In thinking mode, turn a forced tool_choice (`any`, `tool`) into `auto`.",
    defect='`tool_choice` `any` or `tool` in thinking mode: Anthropic "Thinking may not be '
    'enabled when tool_choice forces tool use.", DeepSeek "deepseek-reasoner does not support '
    'this tool_choice"',
    repair='`tool_choice` becomes `{"type": "auto"}` (`disable_parallel_tool_use` kept)',
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=fields_only(apply),  # reads the request's fields, no message
    options=(MODELS,),
    reads_request=True,
    woken_by=fields("tool_choice"),
)
