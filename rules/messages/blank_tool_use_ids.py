"""messages-blank-tool-use-ids: a ``tool_use`` whose id is empty or blank gets one, and its
``tool_result`` with it.

What: a ``tool_use`` block whose ``id`` is a string with nothing visible in it (``""``, ``" "``)
gets ``toolu_<message>_<position>`` (``_d<n>`` added if that is taken: the id fits Anthropic's
``^[a-zA-Z0-9_-]+$``), and each ``tool_result`` that answers it (its ``tool_use_id`` is the same
string: the k-th result naming it answers the k-th call naming it, ``rules.engine.pairing``) gets
the same one. A result naming a blank id no call names keeps it. The change names the new id
and the results renamed.
Why: an empty id is an id: a client converting from another API writes ``""`` on a call and its
result alike when the other side had none (farion1231/cc-switch#7374: ``tool_use_id: ""`` from
the Responses-to-Anthropic bridge); Anthropic's pattern refuses it ("String should match pattern
'^[a-zA-Z0-9_-]+$'", docs/providers.md#anthropic-pairing), and ``messages-tool-result-pairing``
took the result for an orphan and dropped it.
Safety: safe: the call and its result keep each other, under an id both carry.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, carried
from rules.engine.blank_ids import blank_renames, is_blank, string_ids
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.apart import TURNS
from rules.messages.blocks import content_list

NAME = "messages-blank-tool-use-ids"

#: (is_call, id, base, message index, block position)
Event = tuple[bool, Any, str, int, int]


def _events(messages: list[Any]) -> list[Event]:
    events: list[Event] = []
    for index, message in enumerate(messages):
        for position, block in enumerate(content_list(message) or ()):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and "id" in block:
                events.append((True, block["id"], f"toolu_{index}_{position}", index, position))
            elif block.get("type") == "tool_result" and "tool_use_id" in block:
                events.append((False, block["tool_use_id"], "", index, position))
    return events


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    events = _events(messages)
    if not any(call and is_blank(key) for call, key, *_ in events):
        return Outcome(messages)
    taken = string_ids(key for _, key, *_ in events)
    fresh = blank_renames(((c, k, b) for c, k, b, _, _ in events), taken)
    out = list(messages)
    contents: dict[int, list[Any]] = {}
    results: dict[str, list[int]] = {}
    for number, new in fresh.items():
        call, _, _, index, position = events[number]
        content = contents.setdefault(index, list(messages[index]["content"]))
        key = "id" if call else "tool_use_id"
        content[position] = {**content[position], key: new}
        if not call:
            results.setdefault(new, []).append(index)
    for index, content in contents.items():
        out[index] = {**messages[index], "content": content}
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
    summary="Give a tool_use with an empty or blank id one, and its tool_result the same.",
    defect='a `tool_use` and its `tool_result` that name the same empty id (`""`): refused by the '
    "id pattern, and the result dropped as an orphan by the pairing rule "
    "(farion1231/cc-switch#7374; docs/providers.md#anthropic-pairing)",
    repair="the call gets `toolu_<message>_<position>`, each result that answers it (the k-th "
    "naming the same string answers the k-th call naming it) the same id. Nothing is dropped",
    safety="safe",
    default=True,
    apply=apply,
    scan=scan.signals,
    woken_by=on(scan.BAD_ID),  # a blank id is outside the id pattern
    # a fresh id in the pattern, unique; the call it names is now one the pairing must answer,
    # and a tool-use turn the thinking rules must judge (an empty id made it none)
    introduces=frozenset({scan.UNPAIRED, scan.BARE_TOOL_USE}),
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
)
