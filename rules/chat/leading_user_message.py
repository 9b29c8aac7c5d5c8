"""leading-user-message: the conversation opens with a user message.

What: the first message that is not a system (or ``developer``) message must be a user message.
If it is anything else (an assistant, with or without tool calls, a tool result, another role),
a user message with the option ``content`` (default ".") is inserted right before it. If there is
no such message at all (only system messages), one is appended. Entries that are no message (not
an object, or without a string role) are passed over: they neither open the conversation nor
stand in for a user, and no placement of a user message would make them valid (the provider's
request schema rejects them on its own). An empty ``messages`` list is left alone: a request
with no conversation is a different rejection ("Conversation must have at least one message",
mistral-common), and answering a lone placeholder would invent one.
Why: deepseek-reasoner answers 400 "The first message (except the system message) of
deepseek-reasoner must be a user message, but an assistant message detected."
(docs/providers.md#deepseek-roles, ChatGPTNextWeb/NextChat#6343); Gemini "Please ensure that
function call turn comes immediately after a user turn or after a function response turn." for a
history opening with a function call (docs/providers.md#gemini-roles,
google-gemini/gemini-cli#11814); Qwen DashScope "The input messages do not contain elements with the
role of user" (docs/providers.md#qwen-roles, agentscope-ai/agentscope-java#613) and Zhipu GLM 1214
(anomalyco/opencode#2557) for a request without a user message; chat templates that must start with
user (docs/providers.md#chat-templates-roles, "Conversation roles must alternate"). The placeholder
"." is what langchain4j inserts for Anthropic's "first message must use the user role"
(docs/providers.md#anthropic-roles, langchain4j/langchain4j#1197): short, neutral, and no
instruction. Safety: safe. Nothing is removed or changed; the model sees one extra, empty-meaning
user turn.
"""

from __future__ import annotations

from typing import Any

from rules import vocabulary
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, carried

NAME = "leading-user-message"

#: Roles that may precede the first user message.
SYSTEM_ROLES = vocabulary.SYSTEM_ROLES
#: Roles reported by name in a change; any other role string is reported as "other".
KNOWN_ROLES = frozenset({"assistant", "tool", "function"})

#: The placeholder langchain4j inserts (langchain4j/langchain4j#1197).
DEFAULT_CONTENT = "."


#: The rule's options (the record below lists them; read them through these).
CONTENT = Option(
    "content",
    DEFAULT_CONTENT,
    "the inserted user message's content: fixed text, so the same request always gives "
    "the same bytes",
)


def resume(
    messages: list[Any], ctx: RuleContext, opened: bool | None
) -> tuple[Outcome, bool] | None:
    """The rule over ``messages`` after others, ``opened`` if one of those opens the
    conversation (``None``: the list's start); and the same after them. Its decision is made at
    the opening message: ``None`` while none came before (``Horizon``, rules/engine/resume.py)."""
    if opened is None:
        return apply(messages, ctx), opening(messages) is not None
    if opened or not messages:
        return Outcome(messages), opened
    return None


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    at = opening(messages)
    if at is not None and messages[at]["role"] == "user":
        return Outcome(messages)  # the common case: the first message after the system prompt
    if not messages:
        return Outcome(messages)
    inserted = {"role": "user", "content": CONTENT.of(ctx)}
    if at is None:
        detail = {"role": "user", "reason": "no_conversation_message"}
        return Outcome(
            [*messages, inserted], (Change(NAME, len(messages), "inserted_message", detail),)
        )
    role = messages[at]["role"]
    detail = {"role": "user", "before": role if role in KNOWN_ROLES else "other"}
    return Outcome(
        [*messages[:at], inserted, *messages[at:]],
        (Change(NAME, at, "inserted_message", detail),),
    )


def opening(messages: list[Any]) -> int | None:
    """Index of the message that opens the conversation: the first one with a string role that
    is not a system role (entries without one are passed over), or ``None``."""
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if isinstance(role, str) and role not in SYSTEM_ROLES:
            return index
    return None


RULE = Rule(
    name=NAME,
    summary="Insert a placeholder user message when the conversation does not open with one.",
    defect="the first non-system message is not a user message, or there is none: "
    'deepseek-reasoner "The first message (except the system message) of deepseek-reasoner must '
    'be a user message" (ChatGPTNextWeb/NextChat#6343), Gemini "Please ensure that function call '
    'turn comes immediately after a user turn" (google-gemini/gemini-cli#11814), Qwen "do not '
    'contain elements with the role of user" (agentscope-ai/agentscope-java#613; '
    "docs/providers.md#roles)",
    repair="insert a user message with option `content` (langchain4j's placeholder) right before "
    "it, or append one; an empty list is left alone. One neutral user turn is added, nothing is "
    "changed",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # decided once the conversation opens
    options=(CONTENT,),
)
