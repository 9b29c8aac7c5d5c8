"""responses-orphan-outputs: every ``function_call_output`` answers a call before it, once.

What: a ``function_call_output`` is dropped when no ``function_call`` with its ``call_id`` comes
before it, when that call already has its output (a second answer), or when it has no usable
``call_id``. Logged with the call_id, the reason and the output's length (never its text).
Why: OpenAI Responses answers "No tool call found for function call output with call_id
call_uelfkqtHfJDC4Btqeoozq82e." (docs/providers.md#openai-responses, continuedev/continue#10092,
microsoft/vscode#320060, leookun/cursor-byok#307: orphans produced by trimming); DeepSeek's
Responses endpoint "No tool call found for tool output with call_id" (deepseek-ai/DeepSeek-V3#1611).
Safety: unsafe: the dropped output no longer reaches the model (it answered no call it could see).
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext
from rules.engine.messages import rewrite_at
from rules.responses.items import call_id, is_call, is_output, output_length

NAME = "responses-orphan-outputs"


def apply(items: list[Any], ctx: RuleContext) -> Outcome:
    open_calls: dict[str, int] = {}  # call_id -> calls still waiting for their output
    drops: list[tuple[int, str]] = []
    for index, item in enumerate(items):
        if is_call(item):
            cid = call_id(item)
            if cid is not None:
                open_calls[cid] = open_calls.get(cid, 0) + 1
        elif is_output(item):
            cid = call_id(item)
            if cid is None:
                drops.append((index, "no_call_id"))
            elif open_calls.get(cid, 0) > 0:
                open_calls[cid] -= 1
            else:
                drops.append((index, "answered" if cid in open_calls else "no_call"))
    if not drops:
        return Outcome(items)
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


RULE = Rule(
    name=NAME,
    summary="Drop a function_call_output that answers no function_call before it (or a second).",
    defect="a `function_call_output` with no `function_call` before it, a second output for one "
    'call, or one without `call_id`: "No tool call found for function call output with call_id '
    '..." (continuedev/continue#10092, leookun/cursor-byok#307; '
    "docs/providers.md#openai-responses)",
    repair="drop it, logging its call_id, the reason and its length (the text with `log_content: "
    "true`). Unsafe: the dropped output no longer reaches the model, but it answered no call the "
    "model could see",
    safety="unsafe",
    default=True,
    apply=apply,
)
