"""tool-user-bridge: no user message right after a tool message.

What: where a tool message is directly followed by a user message, an assistant message with the
option ``content`` is inserted between them. Only ``user`` is bridged: a system message after a
tool message is rejected by Mistral's order table whatever stands before it (system may only
follow system or user: "Unexpected role 'system' after role 'assistant'"), so it is
system-messages' to move (``later: hoist``) or turn into a user message (``later: user``, which
this rule, running after it, then bridges). Entries that are no message (not an object, or
another role) are left alone: there is nothing to bridge, and the provider's request schema
rejects them on its own.
Why: Mistral answers 400 "Unexpected role 'user' after role 'tool'"
(invalid_request_message_order, code 3230), also via OpenRouter, NVIDIA NIM and vLLM
``--tokenizer-mode mistral`` (docs/providers.md#mistral-roles, avante-corp/avante.nvim#2562/#2695,
datapizza-labs/datapizza-ai#98, NousResearch/hermes-agent#20154, mistralai/mistral-vibe#454); the
mistral-common order table ("Mistral full order table", docs/providers.md#mistral-roles,
mistral-common ``validator.py``) allows only assistant or tool after tool. Mistral/Devstral chat
templates count the user after the tool results as a second user turn ("After the optional system
message, conversation roles must alternate user and assistant roles except for tool calls and
results.", docs/providers.md#chat-templates-roles, ggml-org/llama.cpp#19851). The bridge cannot be
empty: Mistral rejects an assistant with neither content nor tool calls ("Assistant message must
have either content or tool_calls, but not none.", docs/providers.md#mistral-content,
OpenHands/OpenHands#8685), so the empty bridge suggested in hermes-agent#20154 does not work. The
default text is the one pi-ai inserts for ``requiresAssistantAfterToolResult`` (badlogic/pi-mono
``packages/ai/src/providers/openai-completions.ts``, copied by its many forks): it states only
what happened, asks nothing and agrees to nothing (avante's "Ok, I understand." reads as assent
to the user turn that follows).
Safety: safe. Nothing is removed or changed; the model sees one extra assistant turn that says
the tool results were received.
"""

from __future__ import annotations

from typing import Any

from rules.engine.base import Change, Outcome, Rule, RuleContext, TextOption, carried

NAME = "tool-user-bridge"

#: pi-ai's bridge text (badlogic/pi-mono, ``requiresAssistantAfterToolResult``).
DEFAULT_CONTENT = "I have processed the tool results."


#: The rule's options (the record below lists them; read them through these).
CONTENT = TextOption(
    "content",
    DEFAULT_CONTENT,
    "the bridge's text: fixed, so the same request always gives the same bytes; never "
    "empty (Mistral rejects an assistant with neither content nor tool calls)",
)


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    return _bridged(messages, ctx, _gaps(messages))


def resume(messages: list[Any], ctx: RuleContext, before: bool | None) -> tuple[Outcome, bool]:
    """The rule over ``messages`` after a list that ended on a tool message or not (``before``;
    ``None``: the list's start), and whether they end on one: a bridge looks one message back."""
    gaps = _gaps(messages, after_tool=before is True)
    ends = _role(messages[-1]) == "tool" if messages else before is True
    return _bridged(messages, ctx, gaps), ends


def _bridged(messages: list[Any], ctx: RuleContext, gaps: list[int]) -> Outcome:
    if not gaps:
        return Outcome(messages)  # the common case, found in one pass
    content = CONTENT.of(ctx)
    out: list[Any] = []
    changes: list[Change] = []
    start = 0
    for at in gaps:
        out.extend(messages[start:at])
        out.append({"role": "assistant", "content": content})
        # ``at`` is the position of the message the bridge goes before, in the received list.
        detail = {"role": "assistant", "after": "tool", "before": "user"}
        changes.append(Change(NAME, at, "inserted_message", detail))
        start = at
    out.extend(messages[start:])
    return Outcome(out, tuple(changes))


def _role(message: Any) -> Any:
    return message.get("role") if type(message) is dict else None


def _gaps(messages: list[Any], *, after_tool: bool = False) -> list[int]:
    """Indices of the user messages that directly follow a tool message (``after_tool``: the
    list is the rest of one whose last message before it is a tool message)."""
    gaps: list[int] = []
    for index, message in enumerate(messages):
        role = _role(message)
        if after_tool and role == "user":
            gaps.append(index)
        after_tool = role == "tool"
    return gaps


RULE = Rule(
    name=NAME,
    summary="Insert an assistant message between a tool message and a user message.",
    defect="a user message right after a tool message: Mistral (also vLLM's mistral mode, NVIDIA "
    "NIM, OpenRouter) \"Unexpected role 'user' after role 'tool'\" "
    '(datapizza-labs/datapizza-ai#98), Mistral and Devstral chat templates "conversation roles '
    'must alternate user and assistant roles except for tool calls and results" '
    "(ggml-org/llama.cpp#19851; docs/providers.md#mistral-roles)",
    repair="insert an assistant message with option `content` (pi-ai's bridge) between them; never "
    "empty, since Mistral rejects an assistant with neither content nor tool calls. A system "
    "message after a tool is `system-messages`'. One assistant turn saying the results were "
    "received is added",
    safety="unsafe",
    default=False,
    apply=apply,
    horizon=carried(resume),  # a bridge looks one message back
    options=(CONTENT,),
)
