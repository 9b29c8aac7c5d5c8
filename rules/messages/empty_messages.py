"""messages-empty-messages: every message but a final assistant has content.

What: a message whose content is absent, ``null``, an empty or whitespace-only string, or an
empty block list: an assistant message is removed, unless it is the last message (Anthropic
allows an empty final assistant, the prefill slot); a user message gets the option ``content``
(default ".") as its text, so the user's turn keeps its place.
Why: Anthropic answers 400 "messages.0: all messages must have non-empty content except for the
optional final assistant message" (docs/providers.md, Anthropic; anthropics/claude-code#3196,
#6774, BerriAI/litellm#2549). The langchain maintainers replaced empty user text with a
placeholder rather than dropping the turn (langchain-ai/langchain#35504, #35676): a dropped user
turn would leave two assistants adjacent and lose the turn boundary.
Safety: safe: an empty assistant said nothing; an empty user turn gets a neutral placeholder.
"""

from __future__ import annotations

from typing import Any, Final

from rules.engine.base import Change, Outcome, Rule, RuleContext, TextOption, carried
from rules.engine.messages import rewrite_at
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.blocks import is_empty

NAME = "messages-empty-messages"

#: The placeholder langchain4j inserts for Anthropic (langchain4j/langchain4j#1197).
DEFAULT_CONTENT: Final = "."

#: The rule's options (the record below lists them; read them through these).
CONTENT = TextOption("content", DEFAULT_CONTENT, "The text an empty user message gets.")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if scan.EMPTY_MESSAGE not in scan.signals(messages):
        return Outcome(messages)
    last = len(messages) - 1
    suspects = [
        index
        for index, message in enumerate(messages)
        if is_empty(message) and not (index == last and message["role"] == "assistant")
    ]
    if not suspects:
        return Outcome(messages)
    placeholder = CONTENT.of(ctx)
    changes: list[Change] = []

    def fix(index: int, message: dict[str, Any]) -> Any:
        was = "absent" if "content" not in message else type(message["content"]).__name__
        if message["role"] == "assistant":
            changes.append(
                Change(NAME, index, "dropped_message", {"role": "assistant", "was": was})
            )
            return None
        changes.append(Change(NAME, index, "filled_content", {"role": "user", "was": was}))
        return {**message, "content": placeholder}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


def resume(
    messages: list[Any], ctx: RuleContext, open_end: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after others, ``open_end`` if the last of those is an empty
    assistant (let be as the final message; ``None``: the list's start); and the same after them.
    ``None`` when it is followed: it is then removed (``Horizon``, rules/engine/resume.py)."""
    if not messages:
        return Outcome(messages), bool(open_end)
    if open_end:
        return None
    last = messages[-1]
    return apply(messages, ctx), is_empty(last) and last["role"] == "assistant"


RULE = Rule(
    name=NAME,
    summary="Remove empty assistant messages (not a final one); fill empty user turns.",
    defect='a message with no content: Anthropic "all messages must have non-empty content except '
    'for the optional final assistant message"',
    repair="an empty assistant is removed (a final one is kept); an empty user message gets the "
    'text of option `content` (".")',
    safety={
        "dropped_message": "safe",
        "filled_content": "unsafe",
    },
    default=True,
    apply=apply,
    horizon=carried(resume),  # the final assistant is let be until another message follows it
    scan=scan.signals,
    woken_by=on(scan.EMPTY_MESSAGE),
    options=(CONTENT,),
)
