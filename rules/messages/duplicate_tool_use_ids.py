"""messages-duplicate-tool-use-ids: no two ``tool_use`` blocks share an id.

What: a ``tool_use`` block whose id an earlier ``tool_use`` of the request already carries (in
the same assistant turn or an earlier one) is renamed ``<id>_d<n>`` (the smallest n >= 2 no id
of the request holds), and the ``tool_result`` answering it is renamed with it: in the next user
turn the k-th result with that id answers the k-th call that had it
(``rules/messages/remap.py``). No call and no result is dropped: a copied call without its own
result is answered by ``messages-tool-result-pairing``'s stub.
Why: Anthropic answers 400 "messages.43.content.2: tool_use ids must be unique"
(anthropics/claude-code#28515, anthropics/anthropic-sdk-csharp#53, trycua/cua#524) and DeepSeek's
Anthropic endpoint "messages.135.content.3: `tool_use` ids must be unique" (vastsa/PI-Desktop#718);
servers reuse ids across turns on purpose (Kimi ``terminal:0``; Grok ``call_0``,
NVIDIA-NeMo/Switchyard#502), so dropping a repeat would lose a real round (docs/providers.md).
Safety: safe: ids are opaque; every call and result is kept and pairs stay pairs.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Outcome, Rule, RuleContext, carried
from rules.engine.ids import Minter
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.apart import TURNS
from rules.messages.remap import all_ids, remap

NAME = "messages-duplicate-tool-use-ids"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if scan.DUP_ID not in scan.signals(messages):
        return Outcome(messages)
    minter = Minter(all_ids(messages))

    def choose(old: str, kept: set[str]) -> str:
        return old if old not in kept else minter.mint(old)

    return remap(messages, choose, NAME)


RULE = Rule(
    name=NAME,
    summary="Rename a reused tool_use id to `<id>_d<n>`, in the call and its result.",
    defect='two `tool_use` blocks with one id: Anthropic "tool_use ids must be unique", DeepSeek '
    '"`tool_use` ids must be unique"',
    repair="the later call becomes `<id>_d<n>`; its result in the next user turn is renamed "
    "with it; nothing is dropped",
    safety="safe",
    default=True,
    apply=apply,
    scan=scan.signals,
    woken_by=on(scan.DUP_ID),
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
)
