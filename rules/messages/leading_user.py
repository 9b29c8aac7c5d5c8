"""messages-leading-user: the conversation opens with a user message.

What: if the first message is an assistant message (a history cut after a compaction, or an
agent that stored its greeting), a user message with the option ``content`` (default ".") is
inserted before it. An empty list, or a first entry that is no message, is left alone (the
provider's schema refuses those on its own, and no placeholder would make them valid).
Why: Anthropic answers 400 'messages: first message must use the "user" role'
(docs/providers.md, Anthropic; lobehub/lobehub#1601, langchain4j/langchain4j#1197, which inserts
the same "." user message).
Safety: safe: nothing is removed; the model sees one extra user turn with no instruction in it.
"""

from __future__ import annotations

from typing import Any, Final

from rules.engine.base import Change, Outcome, Rule, RuleContext, TextOption, carried
from rules.messages.blocks import role

NAME = "messages-leading-user"

DEFAULT_CONTENT: Final = "."

#: The rule's options (the record below lists them; read them through these).
CONTENT = TextOption("content", DEFAULT_CONTENT, "The text of the inserted user message.")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not messages or role(messages[0]) != "assistant":
        return Outcome(messages)
    inserted = {"role": "user", "content": CONTENT.of(ctx)}
    change = Change(NAME, 0, "inserted_user", {"before": "assistant"})
    return Outcome([inserted, *messages], (change,))


def resume(
    messages: list[Any], ctx: RuleContext, opened: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after others, ``opened`` if there were any (``None``: the
    list's start); and the same after them. It reads the first message only: once there is one,
    nothing after it changes what was decided (``Horizon``, rules/engine/resume.py)."""
    if opened:
        return Outcome(messages), True
    return apply(messages, ctx), bool(messages)


RULE = Rule(
    name=NAME,
    summary="Insert a placeholder user message before a leading assistant message.",
    defect='the first message is an assistant message: Anthropic "messages: first message must '
    'use the \\"user\\" role"',
    repair='insert a user message with the text of option `content` (".") before it',
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # decided by the first message
    options=(CONTENT,),
)
