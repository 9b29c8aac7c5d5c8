"""responses-call-ids: every ``function_call`` has its own ``call_id``, at most 64 characters.

What: a ``call_id`` longer than ``max_length`` (64) is shortened deterministically: its first
characters, ``_`` and 16 hex digits of its sha256, ``max_length`` in all; and a ``function_call``
that reuses the ``call_id`` of an earlier call is renamed ``<call_id>_d<n>``. One map reaches a
call and the outputs that answer it (those after it, up to the next call with that id), so
pairs stay pairs.
Why: OpenAI Responses (Codex backend) answers "Invalid 'input[95].call_id': string too long.
Expected a string with maximum length 64, but got a string with length 116 instead."
(docs/providers.md#openai-pairing, AnswerDotAI/fastllm#45); a reused call_id (Kimi-style counters,
merged histories) leaves one call's output answering two calls, and the pairing below could not
tell them apart (issue 5: "call_id over 64 characters: shortened deterministically,
consistently on both sides").
Safety: safe: ids are opaque; the same id always maps to the same new id.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext
from rules.responses.items import call_id, is_call, is_output

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
    taken = {cid for item in items if (cid := call_id(item)) is not None}
    uses: dict[str, int] = {}
    current: dict[str, str] = {}  # original call_id -> what its latest call became
    out: list[Any] = []
    changes: list[Change] = []
    for index, item in enumerate(items):
        cid = call_id(item)
        new = cid
        if cid is not None and is_call(item):
            uses[cid] = uses.get(cid, 0) + 1
            new = cid
            if uses[cid] > 1:
                n = uses[cid]
                while f"{cid}_d{n}" in taken:
                    n += 1
                new = f"{cid}_d{n}"
                taken.add(new)
            new = shorten(new, limit)
            current[cid] = new
        elif cid is not None and is_output(item):
            new = current.get(cid, shorten(cid, limit))
        if new == cid or cid is None:
            out.append(item)
            continue
        out.append({**item, "call_id": new})
        changes.append(
            Change(NAME, index, "renamed_call_id", {"from": cid, "to": new, "length": len(cid)})
        )
    if not changes:
        return Outcome(items)
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Shorten call_ids over 64 characters and rename reused ones, calls and outputs alike.",
    defect="a `call_id` over 64 characters: \"Invalid 'input[95].call_id': string too long. "
    'Expected a string with maximum length 64, but got a string with length 116 instead." '
    "(AnswerDotAI/fastllm#45; docs/providers.md#openai-pairing); a `call_id` reused by a later "
    "call, which leaves one output answering two calls",
    repair="shorten deterministically to option `max_length` (a prefix, `_`, 16 hex digits of its "
    "sha256); a reused one becomes `<call_id>_d<n>`; one map for a call and its outputs. Ids are "
    "opaque, and the same id always maps to the same new id",
    safety="safe",
    default=True,
    apply=apply,
    options=(MAX_LENGTH_OPTION,),
)
