"""responses-displaced-messages: nothing said sits between a function call and its output.

What: a message item (a user, developer, system or assistant message) that stands between a
``function_call`` and that call's output is moved to right after the output; with parallel
calls, after the last output of the calls it interrupted. Calls, outputs and reasoning items stay
where they are, and moved messages keep their order.
Why: DeepSeek's Responses endpoint pairs a call with its output only when no message comes
between them: a developer message placed there gives "No tool call found for tool output with
call_id" (docs/providers.md#deepseek-responses, deepseek-ai/DeepSeek-V3#1588, #1611); the repair
column asks to "move any message items out from between a call and its output".
Safety: safe: nothing is dropped; a message moves past the output of a call made before it.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext
from rules.responses.items import call_id, is_call, is_message, is_output, pair_calls

NAME = "responses-displaced-messages"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    if not any(is_output(item) for item in items):
        return Outcome(items)
    answered, _ = pair_calls(items)
    pending: dict[str, int] = {}  # call_id -> calls answered later, not yet
    held: list[tuple[int, Any]] = []
    out: list[Any] = []
    changes: list[Change] = []
    for index, item in enumerate(items):
        if is_call(item) and index in answered:
            cid = call_id(item)
            assert cid is not None
            pending[cid] = pending.get(cid, 0) + 1
        elif is_output(item) and pending.get(call_id(item) or "", 0) > 0:
            cid = call_id(item)
            assert cid is not None
            pending[cid] -= 1
            if not pending[cid]:
                del pending[cid]
            out.append(item)
            if not pending and held:
                for origin, message in held:
                    changes.append(
                        Change(NAME, origin, "moved_item", {"to": len(out), "after": cid})
                    )
                    out.append(message)
                held = []
            continue
        elif pending and is_message(item):
            held.append((index, item))
            continue
        out.append(item)
    if not changes:
        return Outcome(items)
    return Outcome(out, tuple(changes))


RULE = Rule(
    name=NAME,
    summary="Move message items standing between a function call and its output after it.",
    defect='a message item between a call and its output: DeepSeek "No tool call found for tool '
    'output with call_id" (deepseek-ai/DeepSeek-V3#1588, #1611; '
    "docs/providers.md#deepseek-responses)",
    repair="move it right after the output (after the last output of the parallel calls it "
    "interrupted), order kept. Nothing is dropped: a message moves past the output of a call made "
    "before it",
    safety="safe",
    default=True,
    apply=apply,
)
