"""Content shape (docs/providers.md#content, docs/providers.md#question-6,
docs/providers.md#question-18): the type and emptiness of each message's ``content`` that DeepSeek,
OpenAI, Groq, Kimi, xAI, Moonshot and DashScope reject.

Every check takes option ``roles`` (the roles it applies to), so one profile can say "system
only" (Groq) and another "every role" (DeepSeek). Texts hold indices, roles and positions, never
content.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rules.providers.contract.base import Check, Example, Found, role_of
from rules.providers.contract.chat_shapes import (
    calls_listed,
    content_set,
    empty_content_kind,
    empty_kinds,
    listed_strings,
    text_parts_only,
)
from rules.providers.contract.examples import AFTER, IMAGE, USER, calls_turn, tool_call, tool_result
from rules.vocabulary import CHAT_ROLES as ROLES
from rules.vocabulary import EMPTY_KINDS as KINDS
from rules.vocabulary import REDACTED_THINKING_PART as REDACTED
from rules.vocabulary import THINKING_PART as THINKING

THINKING_TYPES = (THINKING, REDACTED)
#: docs/providers.md#xai-content, xAI (nocmt/LLMSearchPlus#2): a list holding more than one element;
#: goes with ``thinking_part`` for xAI.
XAI_SINGLE_TEXT = (
    '{{"code":"Client specified an invalid argument","error":"The model expects a single '
    '`text` element per message."}}'
)

#: The roles whose messages DeepSeek deserializes with a required ``content`` (an assistant's is
#: optional: one with neither content nor calls gets "content or tool_calls must be set").
REQUIRED_CONTENT_ROLES = ("system", "developer", "user", "tool")


def _in_roles(
    messages: list[Any], options: Mapping[str, Any], default: tuple[str, ...] = ROLES
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(index, role, message) of every dict message whose role the check's ``roles`` names."""
    roles = listed_strings(options.get("roles", list(default)))
    for index, message in enumerate(messages):
        role = role_of(message)
        if role is not None and role in roles:
            yield index, role, message


def _content_not_string(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A content that is a list (a "sequence" to serde), images included unless option
    ``text_only`` (then only lists of text parts). ``position`` is the first part carrying a
    ``text`` field (0 if none), for GLM's "content[N] ... text"."""
    text_only = options.get("text_only") is True
    for index, role, message in _in_roles(messages, options):
        content = message.get("content")
        if type(content) is list and not (text_only and not text_parts_only(content)):
            position = next(
                (k for k, part in enumerate(content) if type(part) is dict and "text" in part), 0
            )
            yield Found(index, {"role": role, "position": position, "parts": len(content)})


def _content_null(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """``content: null`` on anything but an assistant with tool calls."""
    for index, role, message in _in_roles(messages, options):
        if "content" in message and message["content"] is None:
            if role == "assistant" and calls_listed(message):
                continue
            yield Found(index, {"role": role})


def _content_missing(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    for index, role, message in _in_roles(messages, options, REQUIRED_CONTENT_ROLES):
        if "content" not in message:
            yield Found(index, {"role": role})


def _tool_call_content_empty(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """An assistant with tool calls that sends a ``content`` key with nothing in it, in one of
    the empty shapes option ``kinds`` names."""
    kinds = empty_kinds(options.get("kinds", list(KINDS)))
    for index, role, message in _in_roles(messages, options, ("assistant",)):
        if (
            role == "assistant"
            and "content" in message
            and calls_listed(message)
            and not content_set(message)
            and empty_content_kind(message) in kinds
        ):
            yield Found(index, {"role": role})


def _no_content_element(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A message whose content is absent, ``null`` or ``[]`` (``""`` is accepted)."""
    for index, role, message in _in_roles(messages, options):
        content = message.get("content")
        if content is None or content == []:
            yield Found(index, {"role": role})


def _multiple_text_elements(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A content list of more than one part, all of them text (the report shows text-only
    lists; a list with an image is left to the image rules)."""
    for index, role, message in _in_roles(messages, options):
        content = message.get("content")
        if type(content) is list and len(content) > 1 and text_parts_only(content):
            yield Found(index, {"role": role, "parts": len(content)})


def _thinking_part(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A content list holding an Anthropic ``thinking`` or ``redacted_thinking`` part;
    ``position`` and ``type`` name the first one."""
    for index, role, message in _in_roles(messages, options):
        content = message.get("content")
        if type(content) is list:
            for position, part in enumerate(content):
                if type(part) is dict and part.get("type") in THINKING_TYPES:
                    yield Found(index, {"role": role, "position": position, "type": part["type"]})
                    break


def _content_object(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    for index, role, message in _in_roles(messages, options):
        if type(message.get("content")) is dict:
            yield Found(index, {"role": role})


def _empty_text_part(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A part list that holds a text part with no visible text next to another part."""
    for index, message in enumerate(messages):
        content = message.get("content") if type(message) is dict else None
        if type(content) is not list or len(content) < 2:
            continue
        for position, part in enumerate(content):
            text = part.get("text") if type(part) is dict and part.get("type") == "text" else None
            if type(text) is str and not text.strip():
                yield Found(index, {"position": position})
                break


#: The content repairs over every role, for a profile that reshapes only some (groq: system).
ALL_ROLES: dict[str, Any] = {"roles": list(ROLES)}
#: Every empty content shape next to tool calls, in the shape Kimi asks for
#: (docs/providers.md#kimi-content, kimi-cli#2621): every kind, over a profile that reshapes only
#: some (deepseek: lists).
CALL_CONTENT_OMIT: dict[str, Any] = {"shape": "omit", "kinds": list(KINDS)}


#: Schema checks (a provider deserializes before it validates), in the order of the
#: docs/providers.md#content rows.
CHECKS: tuple[Check, ...] = (
    Check(
        "content_missing",
        "every message of the given roles carries a content key",
        _content_missing,
        # docs/providers.md#deepseek-content, DeepSeek (pig-mesh/deepseek4j#40/#41); serde appends "
        # at line L column C", which a re-serialized body cannot tell.
        "Failed to deserialize the JSON body into the target type: messages[{index}]: missing "
        "field `content`",
        options={"roles": list(REQUIRED_CONTENT_ROLES)},
        examples=(
            Example({"messages": [{"role": "user"}, {"role": "assistant", "content": "?"}, AFTER]}),
        ),
        repair={"null-content": ALL_ROLES},
    ),
    Check(
        "content_null",
        "content is null only on an assistant with tool calls",
        _content_null,
        # docs/providers.md#openai-content, OpenAI / Azure (langchain-ai/langchainjs#4153,
        # run-llama/llama_index#17555)
        "Invalid value for 'content': expected a string, got null.",
        options={"roles": list(ROLES)},
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        {"role": "assistant", "content": "Ok."},
                        {"role": "user", "content": None},
                    ]
                }
            ),
        ),
        repair={"null-content": ALL_ROLES},
    ),
    Check(
        "content_not_string",
        "content is a string, not a list of parts",
        _content_not_string,
        # docs/providers.md#deepseek-content, DeepSeek (moeru-ai/airi#1222, BerriAI/litellm#9905);
        # serde appends " at line 1 column N", which a re-serialized body cannot tell.
        "Failed to deserialize the JSON body into the target type: messages[{index}]: invalid "
        "type: sequence, expected a string",
        options={"roles": list(ROLES), "text_only": False},
        examples=(
            Example(
                {
                    "messages": [
                        {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
                        {"role": "user", "content": [{"type": "text", "text": "Read it."}]},
                    ]
                }
            ),
        ),
        repair={
            "thinking-parts": {"action": "reasoning_content"},
            "text-part-arrays": {**ALL_ROLES, "lists": True, "min_parts": 1},
        },
    ),
    Check(
        "content_object",
        "content is a string or a list, never a bare object",
        _content_object,
        # docs/providers.md#qwen-content, DashScope / Volcano compat (felinics/Memoh#744)
        "Invalid type for 'messages.[{index}].content': expected one of a string or array of "
        "objects, but got an object instead.",
        options={"roles": list(ROLES)},
        examples=(
            Example({"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]}),
        ),
        repair={"text-part-arrays": ALL_ROLES},
    ),
    Check(
        "no_content_element",
        "every message has a content element (not absent, null or [])",
        _no_content_element,
        # docs/providers.md#xai-content, xAI (langchain-ai/langchain#34140,
        # AstrBotDevs/AstrBot#6447), the body as xAI returns it (braces doubled for str.format)
        '{{"code":"Client specified an invalid argument","error":"Invalid request content: Each '
        'message must have at least one content element."}}',
        options={"roles": list(ROLES)},
        examples=(
            Example(
                {"messages": [USER, calls_turn(tool_call(), content=None), tool_result(), AFTER]}
            ),
        ),
        repair={
            "null-content": ALL_ROLES,
            "tool-call-content": {"shape": "empty", "kinds": list(KINDS)},
        },
    ),
    Check(
        "multiple_text_elements",
        "a text-only content list holds one part at most",
        _multiple_text_elements,
        # docs/providers.md#xai-content, xAI 2025-02 (nocmt/LLMSearchPlus#2), the body as xAI
        # returns it
        XAI_SINGLE_TEXT,
        options={"roles": list(ROLES)},
        examples=(
            Example(
                {
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": "Hi"},
                                {"type": "text", "text": "!"},
                            ],
                        }
                    ]
                }
            ),
        ),
        repair={"text-part-arrays": {**ALL_ROLES, "lists": True}},
    ),
    Check(
        "thinking_part",
        "no Anthropic thinking or redacted_thinking part in a content list",
        _thinking_part,
        # docs/providers.md#openai-content, OpenAI unknown part type (aallam/openai-kotlin#320), its
        # wording for this type
        "Invalid value: '{type}'. Supported values are: 'text' and 'image_url'.",
        options={"roles": list(ROLES)},
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        {
                            "role": "assistant",
                            "content": [
                                {
                                    "type": "thinking",
                                    "thinking": "Read it first.",
                                    "signature": "sig",
                                },
                                {"type": "text", "text": "Done."},
                            ],
                        },
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"thinking-parts": {"action": "reasoning_content"}},
    ),
    Check(
        "tool_call_content_empty",
        "an assistant with tool calls sends no empty content",
        _tool_call_content_empty,
        # docs/providers.md#kimi-content, Moonshot / Kimi (MoonshotAI/kimi-cli#2621, #2035)
        "text content is empty",
        options={"roles": ["assistant"], "kinds": list(KINDS)},
        examples=(
            Example(
                {"messages": [USER, calls_turn(tool_call(), content=""), tool_result(), AFTER]}
            ),
        ),
        repair={"tool-call-content": CALL_CONTENT_OMIT},
    ),
    Check(
        "empty_text_part",
        "no empty text part in a content list that holds another part",
        _empty_text_part,
        # docs/providers.md#glm-content, Zhipu GLM's generic 1210 (justrach/codegraff#812)
        "Invalid API parameter, please check the documentation.",
        examples=(
            Example(
                {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}, IMAGE]}]}
            ),
        ),
        repair={"empty-text-parts": {}},
    ),
)
