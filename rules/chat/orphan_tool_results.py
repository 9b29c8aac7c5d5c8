"""orphan-tool-results: a tool message that answers no call of its block is dropped.

What: a tool message is dropped when it sits outside every block (before any assistant with
calls, or after a user, system or plain assistant message), has no usable ``tool_call_id``, has
an id no call of its block has, or repeats an id whose calls in the block are all answered
already. The change records its id, why it was dropped and its content length (characters of a
string, of the JSON text otherwise); the content itself only with ``log_content``. When the
dropped messages stood between two assistants and the first has no call to answer, the two are
merged as consecutive-assistant-messages merges them (that rule already ran). With option
``action: text`` the result is not dropped but kept as text the model reads: its content, under
the heading of option ``heading`` (``{id}``: its tool_call_id), goes at the start of the user
message right after its block, or in a new user message there.
Why: DeepSeek and OpenAI answer 400 "Messages with role 'tool' must be a response to a preceding
message with 'tool_calls'" (docs/providers.md#openai-pairing, FoundationAgents/OpenManus#23 and
#744; Qwen, MiniMax, Mistral and Gemini reject the same), and the older OpenAI wording names the
orphan at messages[0] left by context truncation (run-llama/llama_index#10493). It runs after
displaced-tool-results and missing-tool-call-ids, so only what neither could pair is dropped
(hermes R4, R19, R20).
Safety: by action: a dropped result is ``lossy`` (its text no longer reaches the model; no call it
answers is in the request any more, or the call is answered already; its id and length are
logged, and the text with ``log_content: true``); a result kept as text is ``unsafe`` (chatmend's
heading above the client's text, in a user turn).
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.chat.apart import TURNS
from rules.chat.tool_turns import analyse, is_paired, rebuild, rejoin
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, TextOption, carried
from rules.engine.messages import dropped_content
from rules.engine.text import result_text

NAME = "orphan-tool-results"

ACTION = Option(
    "action",
    "drop",
    "What happens to a result that answers no call: `drop`, or `text` (kept as text in the "
    "user message after its block).",
    choices=("drop", "text"),
)
HEADING = TextOption(
    "heading",
    "[chatmend] The result of tool call {id}, whose call is not in this conversation:",
    "The line above a result kept as text (`action: text`); `{id}` is its tool_call_id.",
)


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
    if ACTION.of(ctx) == "text":
        return _as_text(messages, reasons, HEADING.of(ctx))
    out, seams, _ = rebuild(messages, set(reasons), {})
    changes = [
        Change(NAME, j, "dropped_result", _detail(messages[j], reasons[j], ctx))
        for j in sorted(reasons)
    ]
    if seams:
        out = rejoin(out, seams, NAME, changes)
    return Outcome(out, tuple(changes))


def _as_text(messages: list[Any], reasons: dict[int, str], heading: str) -> Outcome:
    """The orphan results out of their blocks, their texts (each under ``heading``) at the start
    of the user message right after the block, or in a new one there."""
    texts: dict[int, list[str]] = {}
    changes: list[Change] = []
    for j in sorted(reasons):
        end = j + 1
        while end < len(messages) and _is_tool(messages[end]):
            end += 1
        rid = messages[j].get("tool_call_id")
        shown = rid if type(rid) is str and rid.strip() else "(no id)"
        texts.setdefault(end, []).append(
            heading.replace("{id}", shown) + "\n" + result_text(messages[j].get("content"))
        )
        detail = {
            "tool_call_id": rid if type(rid) is str else None,
            "reason": reasons[j],
            "at": end,
        }
        changes.append(Change(NAME, j, "rendered_result", detail))
    inserts: dict[int, list[tuple[int, Any]]] = {}
    out_messages = list(messages)
    for end, parts in texts.items():
        text = "\n\n".join(parts)
        after = messages[end] if end < len(messages) else None
        if type(after) is dict and after.get("role") == "user":
            out_messages[end] = _prepended(after, text)
        else:
            inserts[end] = [(end, {"role": "user", "content": text})]
    out, seams, _ = rebuild(out_messages, set(reasons), inserts)
    if seams:
        out = rejoin(out, seams, NAME, changes)
    return Outcome(out, tuple(changes))


def _is_tool(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "tool"


def _prepended(message: dict[str, Any], text: str) -> dict[str, Any]:
    """A user message with ``text`` before its own content."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [{"type": "text", "text": text}, *content]}
    if isinstance(content, str) and content:
        return {**message, "content": text + "\n\n" + content}
    return {**message, "content": text}


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
    "`log_content: true`): lossy, the dropped result no longer reaches the model, but it answered "
    "no call the model can see; with `action: text`, keep its text under a heading in the user "
    "message after its block (unsafe: chatmend's heading)",
    safety={
        "merged_assistants": "safe",
        "rendered_result": "unsafe",
        "dropped_result": "lossy",
    },
    default=True,
    apply=apply,
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
    options=(ACTION, HEADING),
    scan=scan.scan,
    woken_by=scan.on(scan.UNPAIRED),
)
