"""consecutive-user-messages: directly adjacent user messages merge into one.

What: a run of user messages with no other message between them becomes one user message at the
position of the first. Non-empty contents are combined as folding them pairwise in order would:
two strings join with "\\n\\n" (unstripped); a part list and anything else give a part list
(a string becomes a text part: leading if it came first, appended if it came later; lists are
concatenated). Empty contents (null, "", [], only empty text parts) give way to the others; with
no content anywhere the first's value (or absence) stays. A content that is neither a string, a
list nor null (junk the provider rejects anyway) is carried as one element of the part list, so
nothing is lost and no two users stay adjacent. Every other key keeps the first message's value
(``name`` included); keys only a later message has are added. A tool, assistant, system or
unrecognised entry ends the run: nothing is merged across another message.
Why: deepseek-reasoner answers 400 "deepseek-reasoner does not support successive user or
assistant messages (messages[1] and messages[2] in your input). You should interleave the
user/assistant messages in the message sequence." (docs/providers.md#deepseek-roles, deepseek-ai/
DeepSeek-R1#21, BerriAI/litellm#8018), and HF chat templates on vLLM/TGI/llama.cpp raise
"Conversation roles must alternate user/assistant/user/assistant/..."
(docs/providers.md#chat-templates-roles, microsoft/autogen#1037,
huggingface/text-generation-inference#3198). The join follows hermes R6/R23 (str + str with
"\\n\\n", lists concatenated, a string as a text part). Safety: safe. No text is dropped and the
order is kept; what goes is an empty content, or a later message's value for a key the first already
sets (a later ``name`` gives way to the first's).
"""

from __future__ import annotations

from typing import Any

from rules.chat.merge import merge_messages, runs
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried

NAME = "consecutive-user-messages"

#: What joins two string contents (hermes R6, docs/providers.md#roles "joining content with \n\n").
SEPARATOR = "\n\n"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    resumed = resume(messages, ctx, None)
    assert resumed is not None  # from the list's start, nothing before can change
    return resumed[0]


def resume(
    messages: list[Any], ctx: RuleContext, before: tuple[int, bool] | None
) -> tuple[Outcome, tuple[int, bool]] | None:
    """The rule over ``messages`` that follow ``before``: how many messages came before, and
    whether the last of them is a user message (``None``: the list's start); and the same
    after them. A merge looks one message back: ``None`` when a user message here would join
    one before (``Horizon``, rules/engine/resume.py)."""
    offset, user_last = (0, False) if before is None else before
    if not messages:
        return Outcome(messages), (offset, user_last)
    if user_last and _is_user(messages[0]):
        return None
    after = (offset + len(messages), _is_user(messages[-1]))
    found = runs(messages, "user")
    if not found:
        return Outcome(messages), after  # the common case, checked in one tight pass
    out: list[Any] = []
    changes: list[Change] = []
    done = 0  # messages[:done] are in ``out``
    for start, end in found:
        out.extend(messages[done:start])
        out.append(merge_messages(messages[start:end], SEPARATOR))
        merged = list(range(offset + start, offset + end))  # counted in the whole list
        changes.append(
            Change(NAME, start, "merged", {"merged_indices": merged, "count": end - start})
        )
        done = end
    out.extend(messages[done:])
    return Outcome(out, tuple(changes)), after


def _is_user(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "user"


RULE = Rule(
    name=NAME,
    summary="Merge directly adjacent user messages into the first one.",
    defect='two or more user messages in a row: deepseek-reasoner "does not support successive '
    'user or assistant messages" (deepseek-ai/DeepSeek-R1#21), chat templates "Conversation '
    'roles must alternate user/assistant/user/assistant/..." (microsoft/autogen#1037; '
    "docs/providers.md#deepseek-roles)",
    repair="merge them into the first: strings joined with a blank line, part lists concatenated "
    "(a string becomes a text part), the first's other fields kept; never across another message. "
    "No text is dropped and the order is kept",
    safety="safe",
    default=False,
    apply=apply,
    # A merge looks one message back (and its change counts the messages before).
    horizon=carried(resume),
)
