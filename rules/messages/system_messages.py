"""messages-system-messages: a ``system`` message inside ``messages`` goes to the top-level
``system``.

What: request level. Each message whose ``role`` is ``system`` is taken out of ``messages`` and
its content appended, in order, to the request's ``system`` (a string joined with a blank line;
a block list gets its text as blocks, a string content as one text block; created if absent).
Its text is kept, and read as the system instruction it was written as. The change names its
index and its length, never the text.
Why: the Messages API has no system role inside ``messages``; Anthropic-format endpoints refuse
the one Claude Code and its hooks inject (skills, session context): DeepSeek "messages[1].role:
unknown variant `system`, expected `user` or `assistant`" (deepseek-ai/awesome-deepseek-agent#167),
vLLM "Input should be 'user' or 'assistant'" (vllm-project/vllm#44000), MiniMax "invalid
params, chat content has invalid message role: system (2013)" (MiniMax-AI/MiniMax-M2.7#43;
docs/providers.md#anthropic-roles).
Safety: unsafe: a mid-conversation instruction moves to the start and reads as part of the
opening one; no text is dropped.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.request import with_fields
from rules.messages.blocks import as_blocks

NAME = "messages-system-messages"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "\n".join(
        b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)
    )


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    found = [
        index
        for index, message in enumerate(messages)
        if isinstance(message, dict) and message.get("role") == "system"
    ]
    if not found:
        return Outcome(messages)
    system = ctx.request.get("system")
    changes: list[Change] = []
    for index in found:
        content = messages[index].get("content")
        if isinstance(system, list) or (not isinstance(system, str) and isinstance(content, list)):
            system = (
                [*as_blocks(system), *as_blocks(content)]
                if system is not None
                else as_blocks(content)
            )
        else:
            text = _text(content)
            system = f"{system}\n\n{text}" if isinstance(system, str) and system else text
        changes.append(Change(NAME, index, "hoisted_system", {"length": len(_text(content))}))
    kept = [message for index, message in enumerate(messages) if index not in set(found)]
    fields = with_fields(ctx.request, {"system": system})
    return Outcome(kept, tuple(changes), request=fields)


def resume(
    messages: list[Any], ctx: RuleContext, hoisted: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after others, ``hoisted`` if it moved a message of those into
    ``system`` (``None``: the list's start); and the same after them. What it moved is a change
    of the request's fields, which the next request brings anew: ``None`` when it moved any
    (``Horizon``, rules/engine/resume.py)."""
    if hoisted:
        return None
    outcome = apply(messages, ctx)
    return outcome, bool(outcome.changes)


RULE = Rule(
    name=NAME,
    summary="Move `system` messages out of `messages` into the top-level `system`.",
    defect='a message with role `system` inside `messages`: DeepSeek "unknown variant `system`, '
    'expected `user` or `assistant`" (deepseek-ai/awesome-deepseek-agent#167), vLLM, MiniMax '
    "(vllm-project/vllm#44000, MiniMax-AI/MiniMax-M2.7#43; docs/providers.md#anthropic-roles)",
    repair="take it out of `messages` and append its content to the top-level `system`, in "
    "order. No text is dropped; the instruction reads as part of the opening one",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # a request's fields change with what it moved
    reads_request=True,
)
