"""Tool-call blocks, shared by the four pairing rules: who answers which call, read-only.

A *block* is an assistant message whose ``tool_calls`` is a list, with the tool messages directly
after it (any other entry ends it). Its *calls* are the object entries with a usable id (a
non-empty string); an object entry without one can never be answered (hermes E26), and
non-object entries are not calls at all (empty-tool-calls drops them). Inside a block the k-th
tool message carrying id X answers the k-th call with id X, the same reading as
duplicate-tool-call-ids; a tool message that answers no call of its block is *extra*. A tool
message outside every block is a *stray*. A request is *paired* when every call is answered in
its block and no tool message is extra or stray: what strict providers require
(docs/providers.md#pairing, "Dangling tool call" and "Orphan tool result" rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rules.chat.merge import merge_assistants
from rules.engine.base import Change
from rules.engine.memo import per_run


@per_run  # the four pairing rules ask it of the same list on a clean request
def is_paired(messages: list[Any]) -> bool:
    """True if every block answers exactly its calls and no tool message is outside a block.

    The pairing rules' shared prescan: one tight pass that allocates nothing while each block's
    results come in call order (the common shape); anything else (results out of order, junk
    among the calls or the messages, a real defect) is decided by an exact check.
    """
    calls: list[Any] = []  # the calls of the block being read
    k = n = 0  # results read in call order so far, number of entries in ``calls``
    try:  # a non-object message or call has no ``get``: cheaper to catch than to test each one
        for message in messages:
            role = message.get("role")
            if role == "tool":
                if k < n:
                    rid = message.get("tool_call_id")
                    if calls[k].get("id") == rid and rid and type(rid) is str:
                        k += 1
                        continue
                return _exactly_paired(messages)
            if k != n:
                return _exactly_paired(messages)
            if role == "assistant":
                found = message.get("tool_calls")
                if type(found) is list:
                    calls = found
                    n = len(found)
                    k = 0
                    continue
            k = n = 0
    except AttributeError:
        return _exactly_paired(messages)
    return k == n or _exactly_paired(messages)


def _exactly_paired(messages: list[Any]) -> bool:
    """``is_paired`` for any shape: each block checked with one small dict when out of order."""
    count = len(messages)
    i = 0
    while i < count:
        message = messages[i]
        i += 1
        role = message.get("role") if type(message) is dict else None
        if role == "tool":
            return False  # outside every block
        calls = message.get("tool_calls") if role == "assistant" else None
        if type(calls) is not list:
            continue
        end = _block_end(messages, i)
        if not _answers_exactly(calls, messages, i, end):
            return False
        i = end
    return True


def _block_end(messages: list[Any], index: int) -> int:
    """Index of the first entry at or after ``index`` that is not a tool message."""
    count = len(messages)
    while index < count:
        message = messages[index]
        if type(message) is not dict or message.get("role") != "tool":
            break
        index += 1
    return index


def _answers_exactly(calls: list[Any], messages: list[Any], start: int, end: int) -> bool:
    """True if ``messages[start:end]`` answer each object call of ``calls`` once, in any order."""
    wanted: dict[str, int] = {}
    for call in calls:
        if type(call) is not dict:
            continue  # not a call: empty-tool-calls drops it
        cid = call.get("id")
        if type(cid) is not str or not cid:
            return False  # a call without an id can never be answered (E26)
        wanted[cid] = wanted.get(cid, 0) + 1
    for index in range(start, end):
        rid = messages[index].get("tool_call_id")
        left = wanted.get(rid, 0) if type(rid) is str else 0
        if not left:
            return False
        wanted[rid] = left - 1
    return not any(wanted.values())


@dataclass(slots=True, eq=False)
class Block:
    """One assistant's calls and how the tool messages right after it answer them."""

    #: Index of the assistant message; its tool messages are ``start + 1 .. end - 1``.
    start: int
    end: int
    #: Usable ids of its calls, in call order (repeats kept: the k-th result answers the k-th).
    ids: list[str] = field(default_factory=list)
    #: Object calls without a usable id (E26): no result can be matched to them.
    unpairable: int = 0
    #: Per entry of ``ids``: the index of the tool message answering it, or ``None``.
    answers: list[int | None] = field(default_factory=list)
    #: Tool messages of the block that answer none of its calls, in order.
    extra: list[int] = field(default_factory=list)

    def unanswered(self) -> list[int]:
        """Positions in ``ids`` of the calls no tool message of the block answers."""
        return [pos for pos, answer in enumerate(self.answers) if answer is None]


@dataclass(slots=True, eq=False)
class Pairing:
    """Every block of a request, and the tool messages outside all of them."""

    blocks: list[Block]
    strays: list[int]


def analyse(messages: list[Any]) -> Pairing:
    """Read the blocks of ``messages`` and pair each block's results with its calls (linear)."""
    blocks: list[Block] = []
    strays: list[int] = []
    count = len(messages)
    i = 0
    while i < count:
        message = messages[i]
        role = message.get("role") if type(message) is dict else None
        if role == "tool":
            strays.append(i)
            i += 1
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        if type(calls) is not list:
            i += 1
            continue
        block = Block(start=i, end=_block_end(messages, i + 1))
        slots: dict[str, list[int]] = {}  # id -> its positions in ``block.ids``, in call order
        for call in calls:
            if type(call) is not dict:
                continue
            cid = call.get("id")
            if type(cid) is str and cid:
                slots.setdefault(cid, []).append(len(block.ids))
                block.ids.append(cid)
            else:
                block.unpairable += 1
        block.answers = [None] * len(block.ids)
        taken: dict[str, int] = {}
        for index in range(block.start + 1, block.end):
            rid = messages[index].get("tool_call_id")
            positions = slots.get(rid) if type(rid) is str else None
            nth = taken.get(rid, 0) if positions else 0
            if positions and nth < len(positions):
                taken[rid] = nth + 1
                block.answers[positions[nth]] = index
            else:
                block.extra.append(index)
        blocks.append(block)
        i = block.end
    return Pairing(blocks, strays)


def has_usable_calls(message: Any) -> bool:
    """True if ``message`` is an assistant with at least one call that has a usable id."""
    if type(message) is not dict or message.get("role") != "assistant":
        return False
    calls = message.get("tool_calls")
    if type(calls) is not list:
        return False
    for call in calls:
        cid = call.get("id") if type(call) is dict else None
        if type(cid) is str and cid:
            return True
    return False


def rebuild(
    messages: list[Any], removed: set[int], inserts: dict[int, list[tuple[int, Any]]]
) -> tuple[list[Any], list[int], dict[int, int]]:
    """A new list: ``messages`` without the indices in ``removed``, with the ``(key, message)``
    pairs of ``inserts[i]`` placed before index ``i`` (``inserts[len(messages)]`` at the end).

    Returns the list; the *seams*, output positions where a removal put two assistants next to
    each other while the first has no usable call (so no stub will ever separate them); and the
    output position of each inserted message by its key.
    """
    out: list[Any] = []
    seams: list[int] = []
    placed: dict[int, int] = {}
    gap = False  # something was removed since the last message kept or inserted
    for index, message in enumerate(messages):
        for key, inserted in inserts.get(index, ()):
            placed[key] = len(out)
            out.append(inserted)
            gap = False
        if index in removed:
            gap = True
            continue
        last = out[-1] if gap and out else None
        if is_assistant(message) and is_assistant(last) and not has_usable_calls(last):
            seams.append(len(out))
        gap = False
        out.append(message)
    for key, inserted in inserts.get(len(messages), ()):
        placed[key] = len(out)
        out.append(inserted)
    return out, seams, placed


def is_assistant(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "assistant"


def rejoin(out: list[Any], seams: list[int], rule: str, changes: list[Change]) -> list[Any]:
    """Merge the assistants a removal put next to each other (``seams``), in place in ``out``.

    Dropping or moving the tool messages that stood between two assistants must not leave a
    split turn behind: consecutive-assistant-messages already ran, and providers reject adjacent
    assistants (docs/providers.md#roles). The run around each seam is merged by that rule's own
    ``apply``, so the merge is the same one; the change is reported under ``rule``.
    """
    runs: list[tuple[int, int]] = []
    for seam in seams:
        if runs and seam < runs[-1][1]:
            continue  # inside the run found for an earlier seam
        start = seam - 1
        while start > 0 and is_assistant(out[start - 1]):
            start -= 1
        end = seam + 1
        while end < len(out) and is_assistant(out[end]):
            end += 1
        runs.append((start, end))
    merged: list[Change] = []
    for start, end in reversed(runs):  # from the back, so earlier positions stay valid
        messages, merges = merge_assistants(out[start:end], rule)
        if merges:
            out[start:end] = messages
            detail = {"merged": end - start, "into": len(messages)}
            merged.append(Change(rule, start, "merged_assistants", detail))
    changes.extend(reversed(merged))
    return out
