"""messages-trailing-prefill: the conversation ends with a user message where prefill is refused.

What: request level and messages. When the model matches option ``models`` (shell-style globs,
case-insensitive; default the Claude 4.6 and later families) and the last message is an
assistant message (a prefill), a user message with the option ``content`` (default
"Continue.") is appended. The assistant turn is kept, unless it is empty (an empty prefill says
nothing, and followed by a user message it would be an empty message): then it is removed.
Why: Anthropic answers 400 "This model does not support assistant message prefill. The
conversation must end with a user message." for Claude 4.6+ (smallmain/vscode-unify-chat-provider
#249, #250, which appends a user message rather than deleting the turn;
NousResearch/hermes-agent#50055; docs/providers.md, Anthropic).
Safety: safe: nothing is removed; the model continues from the assistant turn it would have
been asked to extend.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Final

from rules import vocabulary
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, TextOption, carried
from rules.messages.blocks import is_empty, role

NAME = "messages-trailing-prefill"

DEFAULT_CONTENT: Final = "Continue."
#: Claude 4.6 and later (the 4.6 breaking changes, agenticloops-ai/agentic-ai-engineering#43).
PREFILL_REFUSED: Final = vocabulary.PREFILL_REFUSED_MODELS


#: The rule's options (the record below lists them; read them through these).
CONTENT = TextOption("content", DEFAULT_CONTENT, "The text of the appended user message.")
MODELS = Option("models", list(PREFILL_REFUSED), "Models that refuse a prefill (globs).")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not messages or role(messages[-1]) != "assistant":
        return Outcome(messages)
    model = ctx.request.get("model")
    patterns = MODELS.of(ctx)
    if type(model) is not str or not isinstance(patterns, list | tuple):
        return Outcome(messages)
    lowered = model.lower()
    if not any(type(p) is str and fnmatchcase(lowered, p.lower()) for p in patterns):
        return Outcome(messages)
    if is_empty(messages[-1]):
        change = Change(NAME, len(messages) - 1, "dropped_empty_prefill", {"role": "assistant"})
        return Outcome(messages[:-1], (change,))
    appended = {"role": "user", "content": CONTENT.of(ctx)}
    change = Change(NAME, len(messages), "appended_user", {"after": "assistant"})
    return Outcome([*messages, appended], (change,))


def resume(
    messages: list[Any], ctx: RuleContext, acted: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after others, ``acted`` if it changed the end of those
    (``None``: the list's start); and the same after them. It reads the last message only: a
    list that goes on is decided anew, unless the end before was changed (``None``: ``Horizon``,
    rules/engine/resume.py)."""
    if not messages:
        return Outcome(messages), bool(acted)
    if acted:
        return None
    outcome = apply(messages, ctx)
    return outcome, bool(outcome.changes)


RULE = Rule(
    name=NAME,
    summary="Append a user message after a trailing assistant prefill for models that refuse it.",
    defect='a final assistant message (prefill) for Claude 4.6+: Anthropic "This model does not '
    'support assistant message prefill. The conversation must end with a user message."',
    repair='append a user message with the text of option `content` ("Continue.") when the '
    "model matches option `models`",
    safety={
        "dropped_empty_prefill": "safe",
        "appended_user": "unsafe",
    },
    default=False,
    apply=apply,
    horizon=carried(resume),  # reads the end of the list only
    options=(CONTENT, MODELS),
    reads_request=True,
)
