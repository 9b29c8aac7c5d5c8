"""replayed-history: a transcript stored twice reaches the upstream once.

What: a block of messages immediately followed by a replay of itself (the same messages, compared
on meaning) is collapsed to one copy: the earlier copy is removed and the replay, the copy the
conversation continues from, is kept. Messages compare on their meaning: role, content with
whitespace normalized, tool calls (id, name, arguments as canonical JSON), tool results; the
sidecar fields agents stamp on a message (``api_content``, ``timestamp``, ``reasoning``,
``reasoning_content``, ``finish_reason``) are ignored. The scan goes on until no replay is left,
so a history doubled at every turn (6 -> 13 -> 27 -> 55 messages) comes back to its true length;
it collapses a run of k copies at once and resumes where the kept copy starts, so its work is
linear, and bounded by a budget per call (``WORK_PER_ITEM``, ``WORK_FLOOR``: past it the rule
raises ``WorkBudgetExceeded`` and is skipped).
A removed message's ``reasoning_content`` is not lost: a kept twin that has none (or a blank
one where the removed one has text) takes it, since thinking-mode providers need it back on
tool-call turns.
Why: agents that chain turns store their history twice after an in-place reshaping of a prefix
message: N messages become 2N+1 at every turn (one deployment stored 403 messages for a
59-message conversation). The replay repeats every tool-call id, so a strict provider
answers "Invalid parameter: Duplicate value for 'tool_call_id' ..." or, after a naive dedupe,
"Invalid 'messages[45].tool_calls': empty array" (docs/providers.md#pairing, agno-agi/agno#5116,
openai/openai-node#1341); before that it multiplies the cost and defeats the prompt cache.
Safety: safe. Only a block that repeats a tool-call id is collapsed (the strong signal: a
provider never issues one id twice), and only when it is replayed whole, right after itself; a
user who asks the same question twice repeats no id and is never collapsed. Per-turn counter ids
(Kimi's ``functions.ls:0``, which legitimately recur) are no signal. Each collapse is logged
with its position, length, the repeated ids and an estimate of the tokens saved (serialized
characters / 4).

The detection is shared with ``responses-replayed-history`` (``collapse_replays``), which runs
it over a Responses ``input`` list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rules.chat import scan
from rules.engine.base import Outcome, Rule, RuleContext, carried
from rules.engine.replay import (
    SIDECAR_FIELDS,
    ReplayState,
    canonical_arguments,
    collapse_replays,
    is_signal,
    meaning_key,
    normalize_content,
    resume_replays,
)

NAME = "replayed-history"


def _call_meaning(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if isinstance(function, dict) and "arguments" in function:
        function = {**function, "arguments": canonical_arguments(function["arguments"])}
        return {**call, "function": function}
    return call


def _calls_meaning(calls: Any) -> Any:
    return [_call_meaning(call) for call in calls] if isinstance(calls, list) else calls


_CHAT_NORMALIZE: Mapping[str, Callable[[Any], Any]] = {
    "content": normalize_content,
    "tool_calls": _calls_meaning,
}


def message_key(message: Any) -> bytes:
    """What a chat message means, as bytes: two messages with the same key say the same."""
    return meaning_key(message, SIDECAR_FIELDS, _CHAT_NORMALIZE)


def message_anchors(message: Any) -> list[str]:
    """The tool-call ids of an assistant message that can signal a replay."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c["id"] for c in calls if isinstance(c, dict) and is_signal(c.get("id"))]


def carry_reasoning(kept: Any, removed: Any) -> Any:
    """``kept`` with the removed twin's ``reasoning_content`` when that one says more: kept has
    none (or not a string, or ``""``), or a blank one where the twin's has text."""
    if type(kept) is not dict or type(removed) is not dict:
        return kept
    theirs, mine = removed.get("reasoning_content"), kept.get("reasoning_content")
    if not isinstance(theirs, str) or not theirs:
        return kept
    if isinstance(mine, str) and mine and (mine.strip() or not theirs.strip()):
        return kept
    return {**kept, "reasoning_content": theirs}


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return collapse_replays(
        messages, NAME, message_key, message_anchors, ctx, carry=carry_reasoning
    )


def resume(
    messages: list[Any], ctx: RuleContext, before: ReplayState | None
) -> tuple[Outcome, ReplayState] | None:
    """The rule over ``messages`` after others (``resume_replays``): a replayed block is decided
    when it ends, and a turn with new call ids cannot pair with one before."""
    return resume_replays(
        messages, NAME, message_key, message_anchors, ctx, before=before, carry=carry_reasoning
    )


RULE = Rule(
    name=NAME,
    summary="Collapse a block of messages replayed right after itself (a doubled history).",
    defect="a history the agent stored twice (N messages become 2N+1 every turn after an in-place "
    'reshaping of a prefix message): every tool-call id repeats, OpenAI "Duplicate value for '
    "'tool_call_id'\" (agno-agi/agno#5116), or after a naive dedupe \"Invalid "
    "'messages[45].tool_calls': empty array\" (openai/openai-node#1341; "
    "docs/providers.md#openai-pairing)",
    repair="a block replayed whole right after itself, compared on meaning (whitespace and sidecar "
    "fields such as `timestamp`, `api_content`, `reasoning_content` ignored), is collapsed to the "
    "replay, repeatedly; a kept message that lost its `reasoning_content` takes the removed "
    "copy's; logged with position, count, the repeated ids and the estimated tokens saved "
    "(serialized characters / 4). Only a block that repeats a tool-call id is collapsed (per-turn "
    "counters such as Kimi's `functions.ls:0` excepted), so a user asking the same question twice "
    "is never touched",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # decided when a block ends; new ids pair with none before
    scan=scan.scan,
    woken_by=scan.on(scan.DUP_CALL_ID),
)
