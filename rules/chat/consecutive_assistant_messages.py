"""consecutive-assistant-messages: directly adjacent assistant messages merge into one.

What: a run of assistant messages with no other message between them becomes one assistant
message at the position of the first. Tool calls are concatenated in order (first's, then the
later's; not deduplicated here). Non-empty string contents are joined with "\\n", unstripped;
once a part list is involved the contents are concatenated as parts, a string becoming a text
part. Empty contents (null, "", [], only empty text parts) give way to the other side. The first
non-empty ``reasoning_content`` wins; every other key keeps the first message's value, and keys
only a later message has are added. A tool, user, system or unrecognised entry ends the run.
Why: a turn split in two (text, then the tool calls) leaves the first assistant unanswered, and
DeepSeek and Moonshot/Kimi answer 400 "An assistant message with 'tool_calls' must be followed
by tool messages responding to each 'tool_call_id'. (insufficient tool messages following
tool_calls message)" (docs/providers.md#kimi-pairing; hermes R3, #29148, #49147). deepseek-reasoner
and alternating chat templates reject successive assistant messages outright
(docs/providers.md#chat-templates-roles). It runs first, so the later rules see the union of the
turn's calls (hermes E1). Safety: safe. No text and no call is dropped: texts are joined without
stripping, and where hermes discarded the later content next to a part list (R3), the string becomes
a text part. What goes is empty (a null or empty content, a later ``tool_calls: []``) or a later
message's value for a key the first already sets (the first wins). Two assistants whose non-empty
contents it cannot combine (an object, a number) are left as they are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rules.chat import scan
from rules.chat.merge import merge_assistants
from rules.chat.tool_turns import is_assistant
from rules.engine.base import Outcome, Rule, RuleContext, carried
from rules.vocabulary import EMPTY_KINDS

NAME = "consecutive-assistant-messages"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    out, changes = merge_assistants(messages, NAME)
    return Outcome(out, tuple(changes))


def resume(
    messages: list[Any], ctx: RuleContext, before: tuple[int, bool] | None
) -> tuple[Outcome, tuple[int, bool]] | None:
    """The rule over ``messages`` that follow ``before``: how many messages came before, and
    whether the last of them is an assistant (``None``: the list's start); and the same after
    them. A merge looks one message back: ``None`` when an assistant here would join one before
    (``Horizon``, rules/engine/resume.py)."""
    offset, assistant_last = (0, False) if before is None else before
    if not messages:
        return Outcome(messages), (offset, assistant_last)
    if assistant_last and is_assistant(messages[0]):
        return None
    after = (offset + len(messages), is_assistant(messages[-1]))
    out, changes = merge_assistants(messages, NAME)
    if offset:  # the merged positions are counted in the whole list
        changes = [
            replace(
                c,
                detail={
                    **c.detail,
                    "merged_indices": [offset + i for i in c.detail["merged_indices"]],
                },
            )
            for c in changes
        ]
    return Outcome(out, tuple(changes)), after


RULE = Rule(
    name=NAME,
    summary="Merge directly adjacent assistant messages into the first one.",
    defect="two or more assistant messages in a row (a turn split into text and tool calls): "
    "DeepSeek and Kimi \"An assistant message with 'tool_calls' must be followed by tool messages "
    "responding to each 'tool_call_id'. (insufficient tool messages following tool_calls "
    'message)" (langgenius/dify#32222), deepseek-reasoner "does not support successive user or '
    'assistant messages" (deepseek-ai/DeepSeek-R1#21; docs/providers.md#deepseek-pairing)',
    repair="merge the run into its first message: tool calls concatenated in order, string "
    "contents joined with `\\n`, part lists concatenated, the first non-empty `reasoning_content` "
    "kept; never across a tool or user message. No text and no call is dropped",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # a merge looks one message back
    scan=scan.scan,
    woken_by=scan.on(scan.ADJACENT_ASSISTANTS),
    # A first message's empty content may end up beside a later one's calls: a new kind of
    # empty content on an assistant with calls. Keys, calls and their order only move.
    introduces=frozenset(scan.CALL_EMPTY + kind for kind in EMPTY_KINDS),
)
