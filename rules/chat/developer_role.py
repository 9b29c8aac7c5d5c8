"""developer-role: a ``developer`` message leaves as a ``system`` message.

What: every message whose ``role`` is ``"developer"`` (OpenAI's name for system instructions to
reasoning models, sent by the Responses-era SDKs and agents) gets ``"role": "system"``; nothing
else in it changes. Other roles, and messages that are no object, are left alone.
Why: every non-OpenAI upstream knows only ``system``. DeepSeek answers 400 "Failed to
deserialize the JSON body into the target type: messages[0].role: unknown variant `developer`,
expected one of `system`, `user`, `assistant`, `tool`" (docs/providers.md#deepseek-roles,
earendil-works/pi#1048); Qwen (DashScope), and Kimi and others via OpenRouter or Kilo, answer
"developer is not one of ['system', 'assistant', 'user', 'tool', 'function']"
(docs/providers.md#kimi-roles, earendil-works/pi#5117, can1357/oh-my-pi#843). Section 2
(`normalize_roles`, DeepSeek, Qwen): map ``developer`` → ``system`` for every upstream but OpenAI.
It runs before the rules that place or merge system messages, so they see one role for instructions.
Safety: safe. OpenAI itself treats ``developer`` as the reasoning models' ``system``; the text
and its position are kept.
"""

from __future__ import annotations

from typing import Any

from rules.chat import scan
from rules.engine.base import Change, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at

NAME = "developer-role"


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    suspects = [
        index
        for index, message in enumerate(messages)
        if type(message) is dict and message.get("role") == "developer"
    ]
    if not suspects:
        return Outcome(messages)  # the common case: one pass, nothing built
    changes = tuple(
        Change(NAME, index, "renamed_role", {"from": "developer", "to": "system"})
        for index in suspects
    )
    out = rewrite_at(messages, suspects, lambda index, message: {**message, "role": "system"})
    return Outcome(out, changes)


RULE = Rule(
    name=NAME,
    summary="Send developer messages as system messages.",
    defect='role `developer` where only `system` is known: DeepSeek "messages[0].role: unknown '
    'variant `developer`, expected one of `system`, `user`, `assistant`, `tool`" '
    "(earendil-works/pi#1048), Qwen and Kimi \"developer is not one of ['system', 'assistant', "
    "'user', 'tool', 'function']\" (earendil-works/pi#5117, can1357/oh-my-pi#843; "
    "docs/providers.md#deepseek-roles)",
    repair="the role becomes `system`; content, other keys and position are kept. `developer` is "
    "what OpenAI calls its reasoning models' system message",
    safety="safe",
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=scan.on(scan.ROLE + "developer"),
    introduces=frozenset({scan.NULL + "system"}),  # a developer message without content
)
