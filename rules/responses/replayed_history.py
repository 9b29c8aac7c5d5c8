"""responses-replayed-history: a Responses ``input`` stored twice reaches the upstream once.

What: the chat rule's detection (``rules/chat/replayed_history.py``) over ``input`` items: a block
replayed right after itself is collapsed, keeping the replay. Items compare on meaning: type,
role, content with whitespace normalized, ``call_id``, ``name``, canonical ``arguments``,
``output``; item ``id`` and ``status`` (identifiers an agent may regenerate) and the chat sidecar
fields are ignored. Only a block that repeats a ``function_call``'s ``call_id`` is collapsed.
Why: agents chaining ``/v1/responses`` turns store their history twice after reshaping a prefix
item: the replay repeats every item id and call_id, "Duplicate item found with id ..."
(docs/providers.md#responses, continuedev/continue#10723), and multiplies the cost.
Safety: safe, as the chat rule: the signal is a repeated call_id, a user's repeated question is
never collapsed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext, carried
from rules.engine.replay import (
    SIDECAR_FIELDS,
    ReplayState,
    canonical_arguments,
    collapse_replays,
    is_signal,
    meaning_key,
    normalize_content,
    normalize_text,
    resume_replays,
)
from rules.responses.items import is_call

NAME = "responses-replayed-history"

#: Identifiers and state, not meaning: a replayed item may carry new ones.
_IGNORED = SIDECAR_FIELDS | {"id", "status"}


_NORMALIZE: Mapping[str, Callable[[Any], Any]] = {
    "content": normalize_content,
    "arguments": canonical_arguments,
    "output": normalize_content,
    "text": normalize_text,
}


def item_key(item: Any) -> bytes:
    """What an input item means, as bytes."""
    return meaning_key(item, _IGNORED, _NORMALIZE)


def item_anchors(item: Any) -> list[str]:
    """A function call's call_id, when it can signal a replay."""
    if is_call(item) and is_signal(item.get("call_id")):
        return [item["call_id"]]
    return []


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    return collapse_replays(items, NAME, item_key, item_anchors, ctx)


def resume(
    items: list[Any], ctx: RuleContext, before: ReplayState | None
) -> tuple[Outcome, ReplayState] | None:
    """The rule over ``items`` after others (``resume_replays``): a replayed block is decided
    when it ends, and a call with a new call_id cannot pair with one before."""
    return resume_replays(items, NAME, item_key, item_anchors, ctx, before=before)


RULE = Rule(
    name=NAME,
    summary="Collapse a block of input items replayed right after itself (a doubled history).",
    defect='an `input` stored twice: every item id and `call_id` repeats, "Duplicate item found '
    'with id ..." (continuedev/continue#10723; docs/providers.md#openai-responses)',
    repair="the detection of `replayed-history` over items (item `id` and `status` ignored too): a "
    "block replayed whole right after itself, repeating a `function_call` `call_id`, is collapsed "
    "to the replay. A user's repeated question repeats no call_id and is never collapsed",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # decided when a block ends; new call_ids pair with none before
)
