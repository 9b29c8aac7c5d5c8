"""duplicate-tool-call-ids: no tool-call id appears twice, in the calls or in the results.

What: inside one assistant message, a call that repeats an earlier call's id with the same
function name and the same arguments (compared as parsed JSON: key order and whitespace do not
count, numbers compare by their literal) is an exact replay and is dropped. Any other call whose
id is already taken (by an earlier call of the request, or by an earlier tool message) is
renamed to ``<id>_d<n>``, and the tool result answering it in its block (the contiguous tool
messages after the assistant) is renamed with it. Inside a block the k-th result carrying id X
answers the k-th kept call that had id X. A result that answers no call of its block (a later
turn's, or sent before its call) answers, by the pairing law (``rules/engine/pairing.py``: the
k-th naming X answers the k-th naming X), the first call with its id that its own block left
unanswered, before or after it, and is renamed with it (displaced-tool-results moves it home); a
call after such a result keeps the id. A result no call claims that way and whose id a call
carries is a second answer and is dropped. Calls and results without a usable id are left
alone.
Why: DeepSeek checks tool_call_id uniqueness across the whole ``messages[]`` and answers 400
"Duplicate value for 'tool_call_id' of in message[4]" (docs/providers.md#deepseek-pairing,
craft-ai-agents/craft-agents-oss#630; OpenAI says "Duplicate value for 'tool_call_id' of
'call_…', in messages[7] and messages[8]", agno-agi/agno#5116). Yet Kimi (``terminal:0``,
``functions.Bash:0``), per-turn ``call_00_…`` counters and llama.cpp reuse ids across turns on
purpose, so deleting every id seen before throws away real rounds (hermes E6, #70734, #79221).
Same-turn replays with reordered JSON keys were executed twice (hermes E21, #86887).
Safety: safe. Only an exact replay of a call in the same turn and a second answer to one call
are removed; a reused id is renamed in the call and its result alike, so no result is lost.
New ids are deterministic (never random) and collide with no id already in the request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

import orjson

from rules.chat import scan
from rules.chat.apart import TURNS
from rules.chat.message_fields import function_name
from rules.chat.tool_turns import is_assistant, rejoin
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.vocabulary import EMPTY_KINDS

NAME = "duplicate-tool-call-ids"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if not _has_collision(messages):
        return Outcome(messages)  # the common case: every id is used once, calls before results
    state = _State(taken=_all_ids(messages))
    block: _Block | None = None  # the block of the latest assistant, while its results run

    def fix(index: int, message: Any) -> Any:
        nonlocal block
        role = message.get("role") if type(message) is dict else None
        if role == "tool":
            return state.fix_result(message, block, index)
        if block is not None:
            state.close(block)
        if role == "assistant" and type(message.get("tool_calls")) is list:
            fixed, block = state.fix_calls(message, index)
            return fixed
        block = None
        return message

    out: list[Any] = []
    origin: list[int] = []  # input index of each kept message
    for index, message in enumerate(messages):
        fixed = fix(index, message)
        if fixed is not None or message is None:  # None removes, unless it was the junk itself
            out.append(fixed)
            origin.append(index)
    if block is not None:
        state.close(block)
    out, origin = _settle_early(messages, out, origin, state)
    if not state.changes:
        return Outcome(messages)
    # A dropped result that stood between two assistants must not leave a split turn behind.
    seams = [
        i
        for i in range(1, len(out))
        if origin[i] - origin[i - 1] > 1 and is_assistant(out[i - 1]) and is_assistant(out[i])
    ]
    if seams:
        out = rejoin(out, seams, NAME, state.changes)
    return Outcome(out, tuple(state.changes))


def _settle_early(
    messages: list[Any], out: list[Any], origin: list[int], state: _State
) -> tuple[list[Any], list[int]]:
    """Results sent before their call, renamed with the call they answer; a held result no call
    claimed (a further answer, surplus, or one sent before a call with its id that its own
    block answered) is a second answer, and goes. One whose id names no call stays, for
    orphan-tool-results."""
    unclaimed = {
        i
        for old, held in state.early.items()
        for i in held
        if i in state.surplus or old in state.call_ids
    }
    if not state.early_new and not unclaimed:
        return out, origin
    kept_out: list[Any] = []
    kept_origin: list[int] = []
    for position, index in enumerate(origin):
        if index in unclaimed:
            detail = {"tool_call_id": messages[index].get("tool_call_id")}
            state.changes.append(Change(NAME, index, "dropped_duplicate_result", detail))
            continue
        new = state.early_new.get(index)
        kept_out.append(out[position] if new is None else {**out[position], "tool_call_id": new})
        kept_origin.append(index)
    state.changes.sort(key=lambda change: change.index)  # in input order, as logged
    return kept_out, kept_origin


class _Block:
    """An assistant's kept calls, for pairing the tool messages that follow it."""

    __slots__ = ("answered", "slots")

    def __init__(self) -> None:
        #: Original id -> the final ids of the kept calls that had it, in call order.
        self.slots: dict[str, list[str]] = {}
        #: Original id -> how many results carrying it the block has seen so far.
        self.answered: dict[str, int] = {}


@dataclass
class _State:
    """What the walk has kept so far, and the changes it made."""

    #: Every id in the request (input ids and the ids this run minted): a new id avoids them all.
    taken: set[str]
    #: Final ids of the calls kept so far, and of the tool messages kept so far.
    call_ids: set[str] = field(default_factory=set)
    result_ids: set[str] = field(default_factory=set)
    #: Per original id, the smallest suffix that may still be free (``taken`` only grows).
    next_suffix: dict[str, int] = field(default_factory=dict)
    #: Per original id, the new ids of calls whose block ended without their result.
    waiting: dict[str, list[str]] = field(default_factory=dict)
    #: Per id, the input indices of results kept outside any block before any call carried
    #: the id (sent before their call), not yet given a call.
    early: dict[str, list[int]] = field(default_factory=dict)
    #: Input index of an early result -> the id of the call it answers (when it differs).
    early_new: dict[int, str] = field(default_factory=dict)
    #: Input indices of further results of a block held in ``early``: dropped if none claims.
    surplus: set[int] = field(default_factory=set)
    changes: list[Change] = field(default_factory=list)

    def fix_calls(self, message: dict[str, Any], index: int) -> tuple[Any, _Block]:
        """Drop same-turn replays and rename reused ids; return the message and its block."""
        calls: list[Any] = message["tool_calls"]
        block = _Block()
        kept: list[Any] = []
        changed = False
        replays = _Replays()
        for call in calls:
            old = call.get("id") if type(call) is dict else None
            if type(old) is not str or not old:  # no usable id: nothing to compare or rename
                kept.append(call)
                continue
            if replays.seen(old, call):
                changed = True
                detail = {"id": old, "function": function_name(call)}
                self.changes.append(Change(NAME, index, "dropped_replayed_call", detail))
                continue
            new = old
            if old not in self.call_ids and self.early.get(old):
                # A result sent before any call with this id carries it: the first such call
                # keeps the id; the early result answers a call left unanswered in its block
                # (``close``), and displaced-tool-results moves it there.
                pass
            elif old in self.call_ids or old in self.result_ids:
                new = self._mint(old)
                changed = True
                self.changes.append(Change(NAME, index, "renamed_id", {"from": old, "to": new}))
            self.call_ids.add(new)
            block.slots.setdefault(old, []).append(new)
            kept.append(call if new == old else {**call, "id": new})
        return ({**message, "tool_calls": kept} if changed else message), block

    def fix_result(self, message: dict[str, Any], block: _Block | None, index: int) -> Any:
        """Return the tool message, renamed to its call's new id, or ``None`` to drop it."""
        old = message.get("tool_call_id")  # a tool message: the test of result_id(), inlined
        if type(old) is not str or not old:  # no usable id: pairing is another rule's job
            return message
        in_block = block is not None and old in block.slots
        if block is not None and in_block:
            nth = block.answered.get(old, 0)
            block.answered[old] = nth + 1
            finals = block.slots[old]
            if nth < len(finals):
                new = finals[nth]
                self.result_ids.add(new)
                if new == old:
                    return message
                self.changes.append(Change(NAME, index, "renamed_id", {"from": old, "to": new}))
                return {**message, "tool_call_id": new}
        waiting = self.waiting.get(old)
        if waiting:
            # A result strayed from its block (a later block, or a further result of this one):
            # by the pairing law (rules/engine/pairing.py) the k-th such result naming X answers
            # the k-th earlier call naming X still waiting for one. Renamed to it, it is
            # displaced-tool-results' to move home, not a duplicate.
            new = waiting.pop(0)
            self.result_ids.add(new)
            if new == old:
                return message
            self.changes.append(Change(NAME, index, "renamed_id", {"from": old, "to": new}))
            return {**message, "tool_call_id": new}
        if not in_block and old not in self.result_ids:
            # Not this block's (or outside any block): pairing it is another rule's job. One
            # whose id no call carried yet stands before its call: that call keeps its id.
            self.result_ids.add(old)
            if old not in self.call_ids:
                self.early.setdefault(old, []).append(index)
            return message
        # A further answer to a call of the block, or an id an earlier tool message carries:
        # it may answer a later call with its id, sent before it (the pairing law; ``close``
        # decides); if none claims it, it is a second answer, dropped at the end of the walk.
        self.early.setdefault(old, []).append(index)
        self.surplus.add(index)
        return message

    def close(self, block: _Block) -> None:
        """The block's results are over: its calls that got none are answered by the results
        sent before them, in order (the pairing law), or wait for a later one."""
        for old, finals in block.slots.items():
            for new in finals[block.answered.get(old, 0) :]:
                early = self.early.get(old)
                if early:
                    index = early.pop(0)
                    if new != old:
                        self.early_new[index] = new
                        detail = {"from": old, "to": new}
                        self.changes.append(Change(NAME, index, "renamed_id", detail))
                    continue
                self.waiting.setdefault(old, []).append(new)

    def _mint(self, old: str) -> str:
        suffix = self.next_suffix.get(old, 2)
        while f"{old}_d{suffix}" in self.taken:
            suffix += 1
        new = f"{old}_d{suffix}"
        self.taken.add(new)
        self.next_suffix[old] = suffix + 1
        return new


class _Replays:
    """The kept calls of one assistant message, by original id, for spotting exact replays."""

    __slots__ = ("_first", "_signatures")

    def __init__(self) -> None:
        self._first: dict[str, Any] = {}
        #: Canonical forms of the kept calls per id; built only once an id repeats (E22).
        self._signatures: dict[str, set[bytes]] = {}

    def seen(self, old: str, call: dict[str, Any]) -> bool:
        """True if an earlier kept call with id ``old`` is this same call; else remember it."""
        if old not in self._first:
            self._first[old] = call
            return False
        known = self._signatures.get(old)
        if known is None:
            first = _signature(self._first[old])
            known = self._signatures[old] = set() if first is None else {first}
        signature = _signature(call)
        if signature is None:
            return False
        if signature in known:
            return True
        known.add(signature)
        return False


def _has_collision(messages: list[Any]) -> bool:
    """True if some call id or tool_call_id is taken already where it appears (what ``apply``
    would drop or rename); one pass, no allocation beyond two sets."""
    calls_seen: set[str] = set()
    results_seen: set[str] = set()
    for message in messages:
        if type(message) is not dict:
            continue
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls")
            if type(calls) is list:
                for call in calls:
                    cid = call.get("id") if type(call) is dict else None
                    if type(cid) is str and cid:  # the test of call_id(), inlined
                        if cid in calls_seen or cid in results_seen:
                            return True
                        calls_seen.add(cid)
        elif role == "tool":
            rid = message.get("tool_call_id")
            if type(rid) is str and rid:  # the test of result_id(), inlined
                if rid in results_seen:
                    return True
                results_seen.add(rid)
    return False


def _all_ids(messages: list[Any]) -> set[str]:
    """Every usable call id and tool_call_id in the request."""
    ids: set[str] = set()
    for message in messages:
        if type(message) is not dict:
            continue
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls")
            if type(calls) is list:
                for call in calls:
                    cid = call.get("id") if type(call) is dict else None
                    if type(cid) is str and cid:
                        ids.add(cid)
        elif role == "tool":
            rid = message.get("tool_call_id")
            if type(rid) is str and rid:
                ids.add(rid)
    return ids


def _signature(call: Any) -> bytes | None:
    """The call's function name and canonical arguments as bytes; ``None`` if not comparable.

    String arguments are parsed and re-serialized with sorted keys, so key order and whitespace
    do not count (hermes E21). Numbers keep their literal text: a float parse would make two
    integers beyond 2**53 (or two long decimals) equal, and dropping a call that only looked
    like a replay loses it, where renaming a real replay loses nothing. Unparsable arguments
    compare as raw text; a call that cannot be serialized is never a replay.
    """
    function = call.get("function")
    if not isinstance(function, dict):
        return None
    arguments = function.get("arguments")
    form: list[Any] = ["value", arguments]
    if isinstance(arguments, str):
        try:
            form = ["json", json.loads(arguments, **_EXACT_NUMBERS)]
        except (ValueError, RecursionError):  # invalid JSON, NaN/Infinity, absurd nesting
            form = ["raw", arguments]
    try:
        return orjson.dumps(
            [function.get("name"), *form], default=_number, option=orjson.OPT_SORT_KEYS
        )
    except TypeError:  # orjson.JSONEncodeError: a value JSON cannot hold, or too deep
        return None


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


_EXACT_NUMBERS: Final[dict[str, Any]] = {
    "parse_int": Decimal,
    "parse_float": Decimal,
    "parse_constant": _reject_constant,
}


def _number(value: Any) -> Any:
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))  # the literal as sent: 1, 1.0 and 1E+0 stay apart
    raise TypeError


RULE = Rule(
    name=NAME,
    summary="Make every tool-call id unique: drop same-turn replays, rename reused ids.",
    defect="a tool-call id used by two calls, or a `tool_call_id` carried by two tool messages: "
    "OpenAI \"Duplicate value for 'tool_call_id' of '...', in messages[7] and messages[8].\" "
    "(agno-agi/agno#5116), DeepSeek \"Duplicate value for 'tool_call_id' of in message[4]\" "
    "(craft-ai-agents/craft-agents-oss#630; docs/providers.md#deepseek-pairing)",
    repair="an exact replay inside one turn is dropped with its duplicate result; an id reused by "
    "a later turn (Kimi's `terminal:0`) is renamed `<id>_d<n>` in the call and its result, a "
    "result sent in another turn or before its call too (the k-th result naming X answers the "
    "k-th call naming X its block left unanswered); a second result for one call gives way to "
    "the first. Only copies and second answers are dropped, so no result is lost",
    safety={
        "renamed_id": "safe",
        "merged_assistants": "safe",
        "dropped_replayed_call": "safe",
        "dropped_duplicate_result": "lossy",
    },
    default=True,
    apply=apply,
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
    scan=scan.scan,
    woken_by=scan.on(scan.DUP_CALL_ID, scan.UNPAIRED),
    # Fresh unique ids; a replay or a second answer dropped. Assistants a dropped answer left
    # side by side are merged as consecutive-assistant-messages merges them (calls beside an
    # empty content), or stay side by side when their contents cannot join.
    introduces=frozenset(scan.CALL_EMPTY + kind for kind in EMPTY_KINDS)
    | {scan.ADJACENT_ASSISTANTS},
)
