"""unanswered-tool-calls: every call with an id gets a result in its block, a stub if need be.

What: for each call (with a usable id) that no tool message of its block answers, a stub tool
message ``{"role": "tool", "tool_call_id": <id>, "content": <option content>}`` is inserted right
after the block's existing results, in call order: an assistant followed directly by another
message gets all its stubs, a block answering only some calls gets the rest (partial answers
completed). The stub text is fixed (option ``content``), so the same request always gives the
same bytes. A call without an id cannot be answered and is left alone (hermes E26).
Why: an assistant with ``tool_calls`` must be followed by a result for each: DeepSeek answers
400 "An assistant message with 'tool_calls' must be followed by tool messages responding to
each 'tool_call_id'. (insufficient tool messages following tool_calls message)", OpenAI and
Kimi name the missing ids, Mistral says "Not the same number of function calls and responses"
(docs/providers.md#mistral-pairing, "Dangling tool call" rows: langgenius/dify#32222,
aliasrobotics/cai#111, MoonshotAI/kimi-cli#1977). Sessions interrupted mid-call stay bricked (hermes
#56980). It runs after displaced-tool-results, missing-tool-call-ids and orphan-tool-results, so a
stub only stands where no result exists, after the real ones (hermes R20, E27).
Safety: safe. Nothing is removed and no result is invented: the stub says that no result was
recorded, which is what the client sent.
"""

from __future__ import annotations

from typing import Any, Final

from rules.chat import scan
from rules.chat.apart import TURNS
from rules.chat.tool_turns import analyse, is_paired, rebuild
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried

NAME = "unanswered-tool-calls"

DEFAULT_CONTENT: Final = "[chatmend] No result was recorded for this tool call."

#: The rule's option (the record below lists it; read it through this).
CONTENT = Option(
    "content",
    DEFAULT_CONTENT,
    "Text of the stub tool message that answers a call no result answered.",
)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if is_paired(messages):
        return Outcome(messages)  # the common case: every block answers exactly its calls
    content = CONTENT.of(ctx)
    inserts: dict[int, list[tuple[int, Any]]] = {}
    stubs: list[tuple[int, str]] = []  # (assistant index, call id), by key
    for block in analyse(messages).blocks:
        for pos in block.unanswered():
            cid = block.ids[pos]
            stub = {"role": "tool", "tool_call_id": cid, "content": content}
            inserts.setdefault(block.end, []).append((len(stubs), stub))
            stubs.append((block.start, cid))
    if not stubs:
        return Outcome(messages)
    out, _, placed = rebuild(messages, set(), inserts)
    changes = tuple(
        Change(NAME, assistant, "added_stub", {"tool_call_id": cid, "at": placed[key]})
        for key, (assistant, cid) in enumerate(stubs)
    )
    return Outcome(out, changes)


RULE = Rule(
    name=NAME,
    summary="Answer every call left without a result with a fixed stub, right after its block.",
    defect='a tool call with no tool message answering it in its block: "An assistant message '
    "with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'\" "
    '(aliasrobotics/cai#111, langgenius/dify#32222), Mistral "Not the same number of function '
    'calls and responses" (mistral-common; docs/providers.md#pairing)',
    repair="insert a stub tool message per missing result right after the block's results, in call "
    "order, with the fixed text of option `content` (the same request always gives the same "
    "bytes). The stub says no result was recorded",
    safety="unsafe",
    default=True,
    apply=apply,
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
    scan=scan.scan,
    woken_by=scan.on(scan.UNPAIRED),
    options=(CONTENT,),
)
