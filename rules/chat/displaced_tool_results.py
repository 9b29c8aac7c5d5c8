"""displaced-tool-results: a result that strayed past another message goes back to its call.

What: a tool message that answers a call of an earlier block but sits after some other message
(a user, system or assistant message came between, so it is outside every block or in a later
assistant's block) is moved back into its call's block, right after the results already there.
It moves only if its id names exactly one call before it, in another block, and that call is
still unanswered in its block (and no earlier displaced result claimed it); a result sent before
its call (no call before it names its id, exactly one after it does) moves forward
into that call's block the same way. Results moving into
one block keep their order. Anything else stays where it is for orphan-tool-results: a second
result for an answered call, an id no earlier call has, an id two earlier calls share. When the
moved messages stood between two assistants and the first has no call left to answer, the two
are merged as consecutive-assistant-messages merges them (that rule already ran).
Why: strict providers need every result directly after its call. DeepSeek and OpenAI reject the
stray result with 400 "Messages with role 'tool' must be a response to a preceding message with
'tool_calls'" and its call with "An assistant message with 'tool_calls' must be followed by tool
messages responding to each 'tool_call_id'. (insufficient tool messages following tool_calls
message)" (docs/providers.md#pairing; a user message between calls and results, ogx-ai/ogx#6367).
Context compressors move results past a user turn (hermes #84481, #94704); hermes drops and
stubs them (E5), which replaces a result that exists by a placeholder.
Safety: safe. Nothing is dropped or rewritten: one message changes place, to the only place a
strict provider accepts it, now before the message that had separated it (both positions are
logged). It moves only to the single call its id names, so it never answers a call it did not.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from rules.chat import scan
from rules.chat.apart import TURNS
from rules.chat.tool_turns import analyse, is_paired, rebuild, rejoin
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried

NAME = "displaced-tool-results"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if is_paired(messages):
        return Outcome(messages)  # the common case: every block answers exactly its calls
    pairing = analyse(messages)
    blocks = pairing.blocks
    #: Call id -> (block number, position in its ids) of every call carrying it, in order.
    calls: dict[str, list[tuple[int, int]]] = {}
    for number, block in enumerate(blocks):
        for pos, cid in enumerate(block.ids):
            calls.setdefault(cid, []).append((number, pos))
    # Results that answer nothing where they are, with the block they sit in (-1: none).
    loose = [(j, number) for number, block in enumerate(blocks) for j in block.extra]
    loose += [(j, -1) for j in pairing.strays]
    loose.sort()
    claimed: set[tuple[int, int]] = set()
    inserts: dict[int, list[tuple[int, Any]]] = {}
    targets: dict[int, int] = {}  # moved index -> its call's assistant index
    for j, own in loose:
        rid = messages[j].get("tool_call_id")
        hits = calls.get(rid) if type(rid) is str else None
        if not hits:
            continue
        before = bisect_left(hits, j, key=lambda hit: blocks[hit[0]].start)
        if before == 1:
            hit = hits[0]
        elif before == 0 and len(hits) == 1:
            hit = hits[0]  # sent before its call, the only one its id names: moved after it
        else:
            continue  # two calls its id names: not this rule's to guess
        number, pos = hit
        if number == own or hit in claimed or blocks[number].answers[pos] is not None:
            continue  # a second answer: orphan-tool-results decides
        claimed.add(hit)
        inserts.setdefault(blocks[number].end, []).append((j, messages[j]))
        targets[j] = blocks[number].start
    if not targets:
        return Outcome(messages)
    out, seams, placed = rebuild(messages, set(targets), inserts)
    changes: list[Change] = []
    merges: list[Change] = []
    if seams:
        out = rejoin(out, seams, NAME, merges)
        placed = _positions(out, messages, targets)
    for j, assistant in sorted(targets.items()):
        rid = messages[j]["tool_call_id"]
        detail = {"tool_call_id": rid, "call_at": assistant, "to": placed[j]}
        changes.append(Change(NAME, j, "moved_result", detail))
    return Outcome(out, (*changes, *merges))


def _positions(out: list[Any], messages: list[Any], moved: dict[int, int]) -> dict[int, int]:
    """Output position of each moved message, found by identity (after a merge shifted them)."""
    where = {id(message): pos for pos, message in enumerate(out)}
    return {j: where[id(messages[j])] for j in moved}


RULE = Rule(
    name=NAME,
    summary="Move a tool result that strayed past another message back into its call's block.",
    defect="a tool result separated from its call's block by a user, system or assistant message "
    "(compression, late results): \"Messages with role 'tool' must be a response to a preceding "
    "message with 'tool_calls'\" (FoundationAgents/OpenManus#744, ogx-ai/ogx#6367; "
    "docs/providers.md#openai-pairing)",
    repair="move it back, after the block's results, when its id names exactly one earlier call "
    "still unanswered there (or forward, when it stands before the only call its id names); two "
    "assistants it stood between are merged. Nothing is dropped: one message changes place, to "
    "the only place a strict provider accepts it",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
    scan=scan.scan,
    woken_by=scan.on(scan.UNPAIRED),
)
