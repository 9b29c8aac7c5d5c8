"""blank-tool-call-ids: a tool call whose id is empty or blank gets one, and its result with it.

What: a call in an assistant's ``tool_calls`` whose ``id`` is a string with nothing visible in it
(``""``, ``" "``) gets the id ``call_<message>_<position>`` (``_d<n>`` added if that is taken),
and each tool message that answers it (its ``tool_call_id`` is the same string: the k-th result
naming it answers the k-th call naming it, ``rules.engine.pairing``) gets the same id. A result
naming a blank id no call names keeps it. The change names the new id and the results renamed.
Why: an empty id is an id: clients that convert from another API leave ``""`` when the other
side had none, and the call and its result then name the same empty string. DeepSeek refuses it
(400, the id too short: farion1231/cc-switch#7156, #7374; docs/providers.md#pairing), and every
pairing rule took the result for an orphan, dropped it, and left its call unanswered.
Safety: safe: the call and its result keep each other, under an id both carry.
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.apart import TURNS
from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.blank_ids import blank_renames, is_blank, string_ids

NAME = "blank-tool-call-ids"


def _events(messages: list[Any]) -> list[tuple[bool, Any, str, int, int]]:
    """(is_call, id, base, message index, call position) in document order."""
    events: list[tuple[bool, Any, str, int, int]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list):
            for position, call in enumerate(message["tool_calls"]):
                if isinstance(call, dict) and "id" in call:
                    events.append((True, call["id"], f"call_{index}_{position}", index, position))
        elif message.get("role") == "tool" and "tool_call_id" in message:
            events.append((False, message["tool_call_id"], "", index, -1))
    return events


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    events = _events(messages)
    if not any(is_call and is_blank(key) for is_call, key, *_ in events):
        return Outcome(messages)
    taken = string_ids(key for _, key, *_ in events)
    fresh = blank_renames(((c, k, b) for c, k, b, _, _ in events), taken)
    out = list(messages)
    results: dict[str, list[int]] = {}
    for number, new in fresh.items():
        is_call, _, _, index, position = events[number]
        message = out[index]
        if is_call:
            calls = list(message["tool_calls"])
            calls[position] = {**calls[position], "id": new}
            out[index] = {**message, "tool_calls": calls}
        else:
            out[index] = {**message, "tool_call_id": new}
            results.setdefault(new, []).append(index)
    changes = [
        Change(
            NAME,
            events[n][3],
            "renamed_blank_id",
            {"to": new, "position": events[n][4], "results": results.get(new, [])},
        )
        for n, new in fresh.items()
        if events[n][0]
    ]
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Give a tool call with an empty or blank id an id, and its result the same one.",
    defect="a tool call and its result that name the same empty id: refused (the id too short: "
    "farion1231/cc-switch#7156, #7374; docs/providers.md#pairing), and the result dropped as an "
    "orphan by the pairing rules",
    repair="the call gets `call_<message>_<position>`, each result that answers it (the k-th "
    "naming the same string answers the k-th call naming it) the same id. Nothing is dropped",
    safety="safe",
    default=True,
    apply=apply,
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
    scan=scan.scan,
    woken_by=scan.on(scan.UNPAIRED),
    introduces=frozenset(),  # fresh, unique ids: no signal a later rule reads is set
)
