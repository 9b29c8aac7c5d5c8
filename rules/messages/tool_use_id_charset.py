"""messages-tool-use-id-charset: every ``tool_use`` id matches ``^[a-zA-Z0-9_-]+$``.

What: a ``tool_use`` id holding a character outside ``[a-zA-Z0-9_-]`` (Kimi's
``functions.Bash:0``, OpenAI-style ids from a translated history, ``call.1``) has each such
character replaced by ``_``; an empty id becomes ``toolu_chatmend``. If the result is an id the
request already holds, ``_d<n>`` is appended. One original id always maps to the same new id,
and the ``tool_result`` blocks answering the call are renamed with it (``rules/messages/remap.py``).
A reused id stays reused: ``messages-duplicate-tool-use-ids`` (next) handles that.
Why: Anthropic answers 400 "messages.92.content.0.tool_use.id: String should match pattern
'^[a-zA-Z0-9_-]+$'" (docs/providers.md, Anthropic; BlockRunAI/ClawRouter#17, maximhq/bifrost#5097
for Kimi ids, BerriAI/litellm#21215; QwenLM/qwen-code#8160: an empty id is refused too).
Safety: safe: ids are opaque, renamed consistently in the call and its results.
"""

from __future__ import annotations

from typing import Any, Final

from rules.engine.base import Outcome, Rule, RuleContext, carried
from rules.engine.ids import Minter
from rules.engine.wake import on
from rules.messages import scan
from rules.messages.apart import TURNS
from rules.messages.blocks import sanitized_id, valid_id
from rules.messages.remap import all_ids, remap

NAME = "messages-tool-use-id-charset"

#: What an empty id becomes (Anthropic's own ids start ``toolu_``).
EMPTY_ID: Final = "toolu_chatmend"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    if scan.BAD_ID not in scan.signals(messages):
        return Outcome(messages)
    minter = Minter(all_ids(messages))
    mapped: dict[str, str] = {}

    def choose(old: str, kept: set[str]) -> str:
        if valid_id(old):
            return old
        new = mapped.get(old)
        if new is None:
            new = mapped[old] = minter.mint(sanitized_id(old) or EMPTY_ID)
        return new

    return remap(messages, choose, NAME)


RULE = Rule(
    name=NAME,
    summary="Replace characters outside `[a-zA-Z0-9_-]` in tool_use ids, in calls and results.",
    defect="a `tool_use` id outside `^[a-zA-Z0-9_-]+$` (Kimi `functions.Bash:0`, an empty id): "
    "Anthropic \"tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'\"",
    repair="each other character becomes `_` (empty: `toolu_chatmend`), `_d<n>` if taken; the "
    "same map renames the results",
    safety="safe",
    default=False,
    apply=apply,
    scan=scan.signals,
    woken_by=on(scan.BAD_ID),
    horizon=carried(TURNS.apart(apply)),  # a new turn apart from the history
)
