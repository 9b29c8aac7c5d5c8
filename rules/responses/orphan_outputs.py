"""responses-orphan-outputs: every ``function_call_output`` answers a call, once.

What: by the pairing law (``rules.engine.pairing``: the k-th output naming call_id X answers the
k-th call naming X, wherever each stands), a ``function_call_output`` that answers no call is
dropped: its ``call_id`` names no ``function_call`` in ``input`` at all (``no_call``), it has no
usable ``call_id`` (``no_call_id``), or every call naming it already has its output before this
one (``answered``: a second answer). An output placed before its call answers it and is kept
(``responses-early-outputs`` moves it). Logged with the call_id, the reason and the output's
length (never its text). With option ``action: text`` the output is not dropped but becomes a
user message in its place, its output under the heading of option ``heading`` (``{id}``: its
call_id), which ``responses-displaced-messages`` then moves out from between a call and its
output if it stands there.
Why: OpenAI Responses answers "No tool call found for function call output with call_id
call_uelfkqtHfJDC4Btqeoozq82e." (docs/providers.md#openai-responses, continuedev/continue#10092,
microsoft/vscode#320060, leookun/cursor-byok#307: orphans produced by trimming); DeepSeek's
Responses endpoint "No tool call found for tool output with call_id" (deepseek-ai/DeepSeek-V3#1611).
Safety: by action: a dropped output is ``lossy`` (it no longer reaches the model; it answered no
call it could see, or a call whose answer it already has); an output kept as text is ``unsafe``
(chatmend's heading above the client's text, in a user turn).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, TextOption, carried
from rules.engine.messages import rewrite_at
from rules.engine.text import result_text
from rules.responses.items import (
    answer_map,
    call_id,
    is_call,
    output_length,
    outputs_in_place,
    resume_in_place,
)

NAME = "responses-orphan-outputs"

ACTION = Option(
    "action",
    "drop",
    "What happens to an output that answers no call: `drop`, or `text` (a user message in its "
    "place).",
    choices=("drop", "text"),
)
HEADING = TextOption(
    "heading",
    "[chatmend] The result of tool call {id}, whose call is not in this conversation:",
    "The line above an output kept as text (`action: text`); `{id}` is its call_id.",
)


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    if outputs_in_place(items):  # the clean path: one walk
        return Outcome(items)
    named = {cid for item in items if is_call(item) and (cid := call_id(item)) is not None}
    drops: list[tuple[int, str]] = []
    for index, call in answer_map(items).items():
        if call is not None:
            continue  # it answers a call, before or after it (responses-early-outputs moves it)
        cid = call_id(items[index])
        reason = "no_call_id" if cid is None else "answered" if cid in named else "no_call"
        drops.append((index, reason))
    if not drops:
        return Outcome(items)
    if ACTION.of(ctx) == "text":
        return _as_text(items, drops, HEADING.of(ctx))
    changes: list[Change] = []
    for index, reason in drops:
        item = items[index]
        detail: dict[str, Any] = {
            "call_id": item.get("call_id"),
            "reason": reason,
            "length": output_length(item),
        }
        if ctx.log_content:
            detail["output"] = item.get("output")
        changes.append(Change(NAME, index, "dropped_item", detail))
    return Outcome(rewrite_at(items, [i for i, _ in drops], lambda _i, _x: None), tuple(changes))


def _as_text(items: list[Any], drops: list[tuple[int, str]], heading: str) -> Outcome:
    """Each orphan output as a user message in its place, under ``heading``."""
    changes: list[Change] = []

    def render(index: int, item: Any) -> Any:
        cid = item.get("call_id")
        shown = cid if isinstance(cid, str) and cid.strip() else "(no call_id)"
        text = heading.replace("{id}", shown) + "\n" + result_text(item.get("output"))
        return {"role": "user", "content": text}

    for index, reason in drops:
        detail = {"call_id": items[index].get("call_id"), "reason": reason}
        changes.append(Change(NAME, index, "rendered_output", detail))
    return Outcome(rewrite_at(items, [i for i, _ in drops], render), tuple(changes))


def resume(
    items: list[Any], ctx: RuleContext, before: dict[str, int] | bool | None
) -> tuple[Outcome, dict[str, int] | bool] | None:
    """The rule over ``items`` after others (``resume_in_place``): it changes nothing while
    every output is in place, and reads the whole list otherwise."""
    return resume_in_place(items, lambda given: apply(given, ctx), before)


RULE = Rule(
    name=NAME,
    summary="Drop a function_call_output that answers no function_call (or a second answer).",
    defect="a `function_call_output` whose `call_id` names no `function_call`, a second output "
    "for one "
    'call, or one without `call_id`: "No tool call found for function call output with call_id '
    '..." (continuedev/continue#10092, leookun/cursor-byok#307; '
    "docs/providers.md#openai-responses)",
    repair="drop it, logging its call_id, the reason and its length (the text with `log_content: "
    "true`). Outputs pair by the law the k-th output naming X answers the k-th call naming X, so "
    "an output before its call is kept (and moved). Lossy: the dropped output no longer reaches "
    "the model, but it answered no call the model could see; with `action: text` it stays as a "
    "user message under a heading (unsafe)",
    safety={
        "rendered_output": "unsafe",
        "dropped_item": "lossy",
    },
    default=True,
    apply=apply,
    horizon=carried(resume),  # nothing to do while every output is in place
    options=(ACTION, HEADING),
)
