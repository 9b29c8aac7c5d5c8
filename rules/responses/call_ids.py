"""responses-call-ids: every ``function_call`` has its own ``call_id``, at most 64 characters.

What: a ``call_id`` longer than ``max_length`` (64) is shortened deterministically: its first
characters, ``_`` and 16 hex digits of its sha256, ``max_length`` in all; and a ``function_call``
that reuses the ``call_id`` of an earlier call is renamed ``<call_id>_d<n>``, and so is the output
that answers it: by the pairing law (``rules.engine.pairing``) the k-th output naming X answers
the k-th call naming X, wherever each stands, so two parallel calls ``call_1`` keep one output
each and pairs stay pairs. An output beyond the calls naming its id keeps its id (a second
answer: ``responses-orphan-outputs``).
Why: OpenAI Responses (Codex backend) answers "Invalid 'input[95].call_id': string too long.
Expected a string with maximum length 64, but got a string with length 116 instead."
(docs/providers.md#openai-pairing, AnswerDotAI/fastllm#45); a reused call_id (Kimi-style counters,
merged histories) leaves one call's output answering two calls, and the pairing below could not
tell them apart ("call_id over 64 characters: shortened deterministically,
consistently on both sides").
Safety: safe: ids are opaque; the same id always maps to the same new id.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.ids import Minter
from rules.responses.items import answer_map, call_id, is_call

NAME = "responses-call-ids"

MAX_LENGTH = 64


#: The rule's options (the record below lists them; read them through these).
MAX_LENGTH_OPTION = Option("max_length", MAX_LENGTH, "Longest call_id the upstream accepts.")


def shorten(value: str, max_length: int) -> str:
    """``value`` cut to ``max_length``: a prefix, ``_`` and 16 hex digits of its sha256."""
    if len(value) <= max_length:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    keep = max_length - len(digest) - 1
    return f"{value[:keep]}_{digest}" if keep > 0 else digest[:max_length]


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    limit = MAX_LENGTH_OPTION.of(ctx)
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else MAX_LENGTH
    # Prescan: any id too long, or any call id twice?
    calls: set[str] = set()
    needed = False
    for item in items:
        cid = call_id(item)
        if cid is None:
            continue
        if len(cid) > limit or (is_call(item) and cid in calls):
            needed = True
            break
        if is_call(item):
            calls.add(cid)
    if not needed:
        return Outcome(items)
    # The pairing law: the k-th output naming X answers the k-th call naming X, so it leaves
    # with the name that call leaves with. The first call naming X keeps X; a later one gets a
    # fresh ``X_d<n>`` no id in the request holds.
    minter = Minter({cid for item in items if (cid := call_id(item)) is not None})
    seen: set[str] = set()
    new_ids: dict[int, str] = {}
    for index, item in enumerate(items):
        cid = call_id(item)
        if cid is not None and is_call(item):
            new_ids[index] = cid if cid not in seen else minter.mint(cid)
            seen.add(cid)
    for output, call in answer_map(items).items():
        if call is not None:
            new_ids[output] = new_ids[call]
    out: list[Any] = []
    changes: list[Change] = []
    for index, item in enumerate(items):
        cid = call_id(item)
        if cid is None:
            out.append(item)
            continue
        new = shorten(new_ids.get(index, cid), limit)
        if new == cid:
            out.append(item)
            continue
        out.append({**item, "call_id": new})
        changes.append(
            Change(NAME, index, "renamed_call_id", {"from": cid, "to": new, "length": len(cid)})
        )
    if not changes:
        return Outcome(items)
    return Outcome(out, tuple(changes))


def resume(
    items: list[Any], ctx: RuleContext, before: frozenset[str] | bool | None
) -> tuple[Outcome, frozenset[str] | bool] | None:
    """The rule over ``items`` after others, ``before`` holding their calls' call_ids when none
    was too long or repeated (``False`` otherwise, ``None`` at the list's start); and the same
    after them. ``None`` when one is here or was before: the new names read the whole list
    (``Horizon``, rules/engine/resume.py)."""
    if before is None:
        outcome = apply(items, ctx)
        seen = _clean_calls(items, frozenset(), _limit(ctx))
        return outcome, False if seen is None else seen
    if before is False or before is True:
        return None
    seen = _clean_calls(items, before, _limit(ctx))
    return None if seen is None else (Outcome(items), seen)


def _limit(ctx: RuleContext) -> int:
    limit = MAX_LENGTH_OPTION.of(ctx)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else MAX_LENGTH


def _clean_calls(items: list[Any], before: frozenset[str], limit: int) -> frozenset[str] | None:
    """The calls' call_ids of the items before and ``items``, or ``None`` if one is too long or
    a call's is repeated (the rule's prescan, going on)."""
    calls: set[str] = set()
    for item in items:
        cid = call_id(item)
        if cid is None:
            continue
        if len(cid) > limit or (is_call(item) and (cid in calls or cid in before)):
            return None
        if is_call(item):
            calls.add(cid)
    return before | calls if calls else before


RULE = Rule(
    name=NAME,
    summary="Shorten call_ids over 64 characters and rename reused ones, calls and outputs alike.",
    defect="a `call_id` over 64 characters: \"Invalid 'input[95].call_id': string too long. "
    'Expected a string with maximum length 64, but got a string with length 116 instead." '
    "(AnswerDotAI/fastllm#45; docs/providers.md#openai-pairing); a `call_id` reused by a later "
    "call, which leaves one output answering two calls",
    repair="shorten deterministically to option `max_length` (a prefix, `_`, 16 hex digits of its "
    "sha256); a reused one becomes `<call_id>_d<n>`, in the call and in the output that answers "
    "it (the k-th output naming X answers the k-th call naming X). Ids are opaque, and the same "
    "id always maps to the same new id",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(resume),  # nothing to do while call_ids are short and unique
    options=(MAX_LENGTH_OPTION,),
)
