"""tool-message-name: a tool message's ``name`` is the function name of the call it answers.

What: for each tool message, its call is the call with its ``tool_call_id`` among the calls of
the assistant that opens its block (the assistant right before the run of tool messages it
stands in), or else the latest earlier call with that id anywhere. If that call has a non-empty
string function name, a ``name`` that differs from it (any other value, junk included) is
rewritten to it, and with option ``add_missing: true`` a tool message without ``name`` gets
it. A tool message whose call cannot be found, or whose call has no usable name, is left
alone. The default ``add_missing: false`` is hermes E17's stance (only a present and wrong name
changes, so clean requests stay byte-identical, as every rule's defaults must); the Gemini
profile sets it true (hermes-agent#16482: Gemini requires the name).
Why: Gemini's OpenAI-compatible endpoint turns a tool message into a ``function_response`` whose
name must be set and must match the call: "* GenerateContentRequest.contents[2].parts[0].
function_response.name: Name cannot be empty." (docs/providers.md#pairing, pydantic/pydantic-ai
#1879, NousResearch/hermes-agent#16482/#19728); docs/providers.md#question-11: setting ``name``
explicitly covers both the missing and the unmatched case; hermes E17 and R22 (#72089: Google
answers 400 on a name mismatch).
Safety: safe. The name is derived from the call the message answers; no text changes.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried
from rules.engine.messages import rewrite_at

NAME = "tool-message-name"


#: The rule's options (the record below lists them; read them through these).
ADD_MISSING = Option(
    "add_missing",
    False,
    "also give a tool message without `name` its call's name (Gemini); false: only a "
    "present and wrong name is rewritten (hermes E17)",
)


#: What the walk of ``call_names`` holds after a list: the calls of the block still open (``None``:
#: no block is open) and the latest call per id so far (never changed in place).
Walk = tuple[dict[str, str | None] | None, dict[str, str | None]]


def call_names(messages: list[Any]) -> list[tuple[int, str | None, str]]:
    """For each tool message with a usable ``tool_call_id``: (index, the function name of its
    call or ``None`` if no call or no string name is found, the id)."""
    return _call_names(messages, (None, {}))[0]


def _call_names(messages: list[Any], walk: Walk) -> tuple[list[tuple[int, str | None, str]], Walk]:
    """``call_names`` of ``messages`` going on from ``walk`` (the list before them), and the
    walk after them."""
    found: list[tuple[int, str | None, str]] = []
    block, earlier = walk  # the calls of the open block; every call seen so far, latest per id
    grown: dict[str, str | None] | None = None  # ``earlier`` copied once, when a call joins it
    for index, message in enumerate(messages):
        role = message.get("role") if type(message) is dict else None
        if role == "tool":
            rid = message.get("tool_call_id")
            if type(rid) is str and rid:
                if block is not None and rid in block:
                    found.append((index, block[rid], rid))
                else:
                    found.append((index, earlier.get(rid), rid))
            continue
        block = None
        calls = message.get("tool_calls") if role == "assistant" else None
        if type(calls) is not list:
            continue
        block = {}
        for call in calls:
            cid = call.get("id") if type(call) is dict else None
            if type(cid) is not str or not cid:
                continue
            function = call.get("function")
            name = function.get("name") if type(function) is dict else None
            name = name if type(name) is str and name else None
            block.setdefault(cid, name)  # the first call with an id, as the pairing rules read it
            if grown is None:
                earlier = grown = dict(earlier)
            grown[cid] = name
    return found, (block, earlier)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return _aligned(messages, ctx, call_names(messages))


def resume(messages: list[Any], ctx: RuleContext, before: Walk | None) -> tuple[Outcome, Walk]:
    """The rule over ``messages`` after the list ``before`` describes (``None``: its start): a
    tool message's name comes from the calls before it only, which the walk holds."""
    found, after = _call_names(messages, (None, {}) if before is None else before)
    return _aligned(messages, ctx, found), after


def _aligned(
    messages: list[Any], ctx: RuleContext, found: list[tuple[int, str | None, str]]
) -> Outcome:
    add_missing = ADD_MISSING.of(ctx) is True
    wanted: dict[int, tuple[str, str]] = {}
    for index, name, rid in found:
        if name is None:
            continue
        message = messages[index]
        if "name" in message:
            if message["name"] != name:
                wanted[index] = (name, rid)
        elif add_missing:
            wanted[index] = (name, rid)
    if not wanted:
        return Outcome(messages)
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        name, rid = wanted[index]
        if "name" in message:
            old = message["name"]
            was = old if type(old) is str else "null" if old is None else type(old).__name__
            detail = {"tool_call_id": rid, "from": was, "to": name}
            changes.append(Change(NAME, index, "aligned_name", detail))
        else:
            changes.append(Change(NAME, index, "added_name", {"tool_call_id": rid, "to": name}))
        return {**message, "name": name}

    return Outcome(rewrite_at(messages, sorted(wanted), fix), tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Set each tool message's name to the function name of the call it answers.",
    defect="a tool message whose `name` is missing or differs from its call's function name: "
    'Gemini "function_response.name: Name cannot be empty." (pydantic/pydantic-ai#1879, '
    "NousResearch/hermes-agent#16482; docs/providers.md#gemini-pairing)",
    repair="`name` becomes the function name of the call with its `tool_call_id` (in its block, "
    "else the latest earlier call): a present and wrong name always, a missing one too with option "
    "`add_missing` (Gemini). The name comes from the call the message answers",
    safety="safe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # the calls before each tool message
    options=(ADD_MISSING,),
)
