"""null-content: a message that must carry a string content gets one when it has ``null`` or none.

What: a message whose role is in option ``roles`` and whose ``content`` is ``null`` or absent
gets a string: option ``tool_content`` (default ``"(no output)"``) for a tool message, option
``content`` (default ``""``) for any other. An assistant with tool calls is never touched: its
empty content is tool-call-content's. Any other content (a string, a part list, junk) is left.
Why: OpenAI and Azure allow ``null`` only on an assistant with tool calls: "Invalid value for
'content': expected a string, got null." (docs/providers.md#azure-content,
langchain-ai/langchainjs#4153, run-llama/llama_index#17555 where a tool returned None,
docker/docker-agent#63); DeepSeek refuses a message without it: "Failed to deserialize the JSON body
into the target type: messages[1]: missing field `content`" (docs/providers.md#deepseek-content,
pig-mesh/deepseek4j#40/#41); older OpenAI "'content' is a required property"
(docs/providers.md#openai-content, openinterpreter/openinterpreter#251). The catalogue's repair:
``""`` elsewhere, and a placeholder such as "(no output)" for tool results that were None
(docs/providers.md#openai-content, inferred): an empty string would read as a tool that printed
nothing, and Anthropic-translating layers refuse empty text (hermes E9). An assistant left with
``""`` and no calls is then removed by empty-tool-calls, as one with ``null`` would be. Safety:
safe. Nothing is removed; a tool result that was None says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.chat import scan
from rules.chat.message_fields import ROLES, has_calls, role_set
from rules.engine.base import Change, Option, Outcome, Rule, RuleContext, per_message
from rules.engine.messages import rewrite_at

NAME = "null-content"

#: The roles chat completions defines; the default of every content rule and check.


#: The rule's options (the record below lists them; read them through these).
CONTENT = Option("content", "", "the content a message with null or no content gets")
TOOL_CONTENT = Option(
    "tool_content",
    "(no output)",
    "the content a tool message with null or no content gets (a tool that returned None)",
)
ROLES_OPTION = Option("roles", list(ROLES), "the roles whose messages are filled")


def apply(messages: list[Any], ctx: RuleContext) -> Outcome:
    roles = role_set(ROLES_OPTION.of(ctx))
    suspects = [
        index
        for index, message in enumerate(messages)
        if type(message) is dict and message.get("content") is None and _targeted(message, roles)
    ]
    if not suspects:
        return Outcome(messages)
    content = CONTENT.of(ctx)
    tool_content = TOOL_CONTENT.of(ctx)
    changes: list[Change] = []

    def fix(index: int, message: Any) -> Any:
        role = message["role"]
        was = "null" if "content" in message else "absent"
        # a tool message gets words of chatmend's ("(no output)"): its own action (``unsafe``)
        action = "filled_tool_content" if role == "tool" else "filled_content"
        changes.append(Change(NAME, index, action, {"role": role, "was": was}))
        return {**message, "content": tool_content if role == "tool" else content}

    return Outcome(rewrite_at(messages, suspects, fix), tuple(changes))


def _targeted(message: dict[str, Any], roles: frozenset[str]) -> bool:
    role = message.get("role")
    if type(role) is not str or role not in roles:
        return False
    return role != "assistant" or not has_calls(message)


def _wakes(options: Mapping[str, Any]) -> frozenset[str]:
    """A null or missing content of one of the rule's roles."""
    return frozenset(scan.NULL + role for role in role_set(ROLES_OPTION.of(options)))


RULE = Rule(
    name=NAME,
    summary="Give messages with null or no content a string (tool results a placeholder).",
    defect="`content: null` or no `content` where a string is required (any message but an "
    "assistant with tool calls): OpenAI and Azure \"Invalid value for 'content': expected a "
    'string, got null." (langchain-ai/langchainjs#4153), DeepSeek "missing field `content`" '
    "(pig-mesh/deepseek4j#40; docs/providers.md#deepseek-content)",
    repair='option `content` (`""`); a tool message gets option `tool_content` (a tool that '
    "returned None); option `roles` limits it; an assistant with tool calls is left to "
    '`tool-call-content`, and one left with `""` and no calls is removed by `empty-tool-calls`. '
    "Nothing is removed; the placeholder says the tool returned nothing",
    safety={
        "filled_content": "safe",
        "filled_tool_content": "unsafe",
    },
    default=False,
    apply=apply,
    horizon=per_message(apply),  # each message is decided by itself
    scan=scan.scan,
    woken_by=_wakes,
    introduces=frozenset(),  # a content only becomes a string
    options=(
        CONTENT,
        TOOL_CONTENT,
        ROLES_OPTION,
    ),
)
