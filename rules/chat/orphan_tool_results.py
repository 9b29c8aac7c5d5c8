"""orphan-tool-results: a tool message that answers no call of its block is dropped.

What: a tool message is dropped when it sits outside every block (before any assistant with
calls, or after a user, system or plain assistant message), has no usable ``tool_call_id``, has
an id no call of its block has, or repeats an id whose calls in the block are all answered
already. The change records its id, why it was dropped and its content length (characters of a
string, of the JSON text otherwise); the content itself only with ``log_content``. When the
dropped messages stood between two assistants and the first has no call to answer, the two are
merged as consecutive-assistant-messages merges them (that rule already ran).
Why: DeepSeek and OpenAI answer 400 "Messages with role 'tool' must be a response to a preceding
message with 'tool_calls'" (docs/providers.md#openai-pairing, FoundationAgents/OpenManus#23 and
#744; Qwen, MiniMax, Mistral and Gemini reject the same), and the older OpenAI wording names the
orphan at messages[0] left by context truncation (run-llama/llama_index#10493). It runs after
displaced-tool-results and missing-tool-call-ids, so only what neither could pair is dropped
(hermes R4, R19, R20).
Safety: unsafe: the dropped result's text no longer reaches the model. No call it answers is in
the request any more (or the call is answered already), and the provider rejects the request as
long as it is there; its id and length are logged, and the text with ``log_content: true``.
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.tool_turns import analyse, is_paired, rebuild, rejoin
from rules.engine.base import Change, Outcome, Rule, RuleContext
from rules.engine.messages import dropped_content

NAME = "orphan-tool-results"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if is_paired(messages):
        return Outcome(messages)  # the common case: every block answers exactly its calls
    pairing = analyse(messages)
    reasons = dict.fromkeys(pairing.strays, "outside_block")
    for block in pairing.blocks:
        ids = set(block.ids) if block.extra else ()
        for j in block.extra:
            rid = messages[j].get("tool_call_id")
            if type(rid) is not str or not rid.strip():
                reasons[j] = "no_id"
            else:
                reasons[j] = "already_answered" if rid in ids else "unknown_id"
    if not reasons:
        return Outcome(messages)
    out, seams, _ = rebuild(messages, set(reasons), {})
    changes = [
        Change(NAME, j, "dropped_result", _detail(messages[j], reasons[j], ctx))
        for j in sorted(reasons)
    ]
    if seams:
        out = rejoin(out, seams, NAME, changes)
    return Outcome(out, tuple(changes))


def _detail(message: dict[str, Any], reason: str, ctx: RuleContext) -> dict[str, Any]:
    rid = message.get("tool_call_id")
    return {
        "tool_call_id": rid if type(rid) is str else None,
        "reason": reason,
        **dropped_content(message.get("content"), ctx),
    }


RULE = Rule(
    name=NAME,
    summary="Drop tool messages that answer no call of their block.",
    defect="a tool message that answers no call of its block (before any tool call, after a user "
    "message, an unknown or missing id, a second answer): \"Messages with role 'tool' must be a "
    "response to a preceding message with 'tool_calls'\" (FoundationAgents/OpenManus#23, "
    "run-llama/llama_index#10493; docs/providers.md#deepseek-pairing)",
    repair="drop it, logging its id, the reason and its content length (the text with "
    "`log_content: true`). Unsafe: the dropped result no longer reaches the model, but it answered "
    "no call the model can see",
    safety={
        "merged_assistants": "safe",
        "dropped_result": "lossy",
    },
    default=True,
    apply=apply,
    scan=scan.scan,
    woken_by=scan.on(scan.UNPAIRED),
)
