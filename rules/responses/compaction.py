"""responses-compaction: an ``input`` holding compaction checkpoints is sent as the server reads it.

What: when ``input`` holds one or more ``compaction`` items (OpenAI's server-side compaction
checkpoints), it is rebuilt the way the server reads it: the newest contiguous run of
checkpoints first; then the user messages from before that run, chosen newest-first while they
fit a token budget (option ``user_budget_tokens``; tokens estimated as text characters / 4) and
kept in their original order; then every item after the run, unchanged. Everything else before
the run (older checkpoints, assistant messages, calls and outputs the checkpoint summarizes) is
left out, as the server leaves it out.
Why: a client that keeps appending to a compacted history sends the whole pre-checkpoint history
next to the checkpoint that replaces it: the upstream pays for it twice, and an upstream that
does not read checkpoints sees a transcript the model never saw (docs/providers.md#request
and docs/providers.md#question-16: compaction and ``context_management`` are understood by direct
OpenAI routes only). Safety: unsafe: items before the checkpoint are no longer sent (the checkpoint
stands for them); what was left out is logged by count.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.responses.items import COMPACTION, is_message, item_type

NAME = "responses-compaction"

DEFAULT_BUDGET = 20000


#: The rule's options (the record below lists them; read them through these).
USER_BUDGET_TOKENS = Option(
    "user_budget_tokens",
    DEFAULT_BUDGET,
    "Tokens (text characters / 4) of pre-checkpoint user messages kept, newest first.",
)


def _text_chars(content: Any) -> int:
    """The characters of a message's text: a string, or the text of its parts."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            len(part["text"])
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return 0


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    last = next(
        (i for i in range(len(items) - 1, -1, -1) if item_type(items[i]) == COMPACTION), None
    )
    if last is None:
        return Outcome(items)
    first = last
    while first > 0 and item_type(items[first - 1]) == COMPACTION:
        first -= 1
    if first == 0:
        return Outcome(items)  # nothing before the checkpoints: already as the server reads it
    budget = USER_BUDGET_TOKENS.of(ctx)
    budget = budget if isinstance(budget, int) and not isinstance(budget, bool) else DEFAULT_BUDGET
    users = [i for i in range(first) if is_message(items[i]) and items[i].get("role") == "user"]
    kept: list[int] = []
    spent = 0
    for index in reversed(users):  # newest first
        tokens = _text_chars(items[index].get("content")) // 4
        if spent + tokens > budget:
            break
        spent += tokens
        kept.append(index)
    kept.reverse()
    rebuilt = [*items[first : last + 1], *(items[i] for i in kept), *items[last + 1 :]]
    detail = {
        "checkpoints": last - first + 1,
        "left_out": first - len(kept),
        "kept_users": len(kept),
        "users_over_budget": len(users) - len(kept),
        "est_user_tokens": spent,
        "budget_tokens": budget,
    }
    return Outcome(rebuilt, (Change(NAME, first, "rebuilt_from_checkpoint", detail),))


def resume(items: list[Any], ctx: RuleContext, before: bool | None) -> tuple[Outcome, bool] | None:
    """The rule over ``items`` after others (``before``: ``None`` at the list's start); what
    it rebuilt from the last checkpoint stands while no new checkpoint comes: ``None`` when
    one does (it reads the items before it: ``Horizon``, rules/engine/resume.py)."""
    if before is None:
        return apply(items, ctx), True
    if any(item_type(item) == COMPACTION for item in items):
        return None
    return Outcome(items), True


RULE = Rule(
    name=NAME,
    summary="Rebuild an input holding compaction checkpoints the way the server reads it.",
    defect="`compaction` checkpoints sent after the whole history they replace: the upstream pays "
    "for it twice, and one that does not read checkpoints sees a transcript the model never saw "
    "(docs/providers.md#question-16)",
    repair="rebuild `input` as the server reads it: the newest contiguous run of checkpoints, then "
    "the user messages from before it chosen newest-first within option `user_budget_tokens` (text "
    "characters / 4) and kept in order, then everything after the run unchanged. Unsafe: the items "
    "a checkpoint stands for are no longer sent (counted in the log)",
    safety="lossy",
    default=True,
    apply=apply,
    horizon=carried(resume),  # decided by the last checkpoint
    options=(USER_BUDGET_TOKENS,),
)
