"""Message shape (docs/providers.md#roles ``developer`` role, docs/providers.md#content images,
docs/providers.md#reasoning and docs/providers.md#fields unknown fields): what DeepSeek, Qwen, Groq,
Azure, Mistral, Cerebras and OpenAI reject about a message's role, keys and image parts.

Each check's default text is one provider's; the module also exports the other providers'
wordings of the same rejection, for the profiles' ``text`` overrides. The fields a check yields
cover every one of these templates. The checks are written apart from the rules that satisfy
them (``developer-role``, ``unknown-roles``, ``unknown-message-fields``, ``image-parts``) and share
only their data (the role lists, the key allowlist, the roles that may not carry images).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from rules.providers.contract.base import Check, Example, Found, role_of
from rules.providers.contract.chat_shapes import bookkeeping_paths
from rules.providers.contract.examples import AFTER, IMAGE, USER, calls_turn, tool_call, tool_result
from rules.vocabulary import CHAT_CALL_FIELDS as CALL_KEYS
from rules.vocabulary import CHAT_FIELDS as ALLOWED
from rules.vocabulary import CHAT_FUNCTION_FIELDS as FUNCTION_KEYS
from rules.vocabulary import DEEPSEEK_ROLES
from rules.vocabulary import IMAGE_PART_TYPES as DEFAULT_TYPES
from rules.vocabulary import NOT_USER_ROLES as NOT_USER

# --- unknown_role ---------------------------------------------------------------------------------

#: docs/providers.md#deepseek-roles, DeepSeek (earendil-works/pi#1048): the serde error for a role
#: outside its enum.
DEEPSEEK_ROLE_TEXT: Final = (
    "Failed to deserialize the JSON body into the target type: messages[{index}].role: unknown "
    "variant `{role}`, expected one of `system`, `user`, `assistant`, `tool`"
)
#: docs/providers.md#qwen-roles, Qwen (DashScope), and Kimi and others via OpenRouter or Kilo
#: (earendil-works/pi#5117, can1357/oh-my-pi#843); goes with ``roles:
#: rules.chat.unknown_roles.QWEN_ROLES``.
QWEN_ROLE_TEXT: Final = "{role} is not one of ['system', 'assistant', 'user', 'tool', 'function']"
#: OpenAI's invalid_value at ``messages[N].role`` for a role outside its list; goes with
#: ``roles: OPENAI_ROLES`` (rules.chat.unknown_roles), for the providers that copy OpenAI's schema.
OPENAI_UNKNOWN_ROLE_TEXT: Final = (
    "Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', "
    "'tool', and 'developer'."
)
#: Mistral (mistral-common's messages are a union tagged by ``role``; pydantic's wording for an
#: unknown tag, inferred), status 422.
MISTRAL_ROLE_TEXT: Final = (
    "Input tag '{role}' found using 'role' does not match any of the expected tags: 'system', "
    "'user', 'assistant', 'tool'"
)
#: docs/providers.md#openai-roles, OpenAI o1-preview / o1-mini (lobehub/lobehub#5704): ``developer``
#: refused per model.
OPENAI_ROLE_TEXT: Final = (
    "Unsupported value: 'messages[{index}].role' does not support '{role}' with this model."
)


def _unknown_roles(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A message whose role is a string outside ``roles`` (a missing or non-string role is a
    different deserialization error)."""
    roles = _strings(options.get("roles"))
    for index, message in enumerate(messages):
        role = role_of(message)
        if role is not None and role not in roles:
            yield Found(index, {"role": role})


# --- bookkeeping_field ----------------------------------------------------------------------------

#: Moonshot/Kimi and Fireworks, for an agent's ``tool_name`` or ``timestamp``
#: (NousResearch/hermes-agent#47868).
BOOKKEEPING_TEXT: Final = "Extra inputs are not permitted, field: 'messages[{index}].{field}'"


def _bookkeeping_fields(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A message or tool call carrying an agent's bookkeeping key (option ``keep`` allows)."""
    keep = _strings(options.get("keep"))
    for index, message in enumerate(messages):
        for field in bookkeeping_paths(message, keep):
            yield Found(index, {"field": field})


# --- unknown_field --------------------------------------------------------------------------------

#: docs/providers.md#groq-fields, Groq (ServiceStack/llms#17); docs/providers.md#groq-reasoning for
#: reasoning fields (janhq/jan#8136). ``{field}`` is the key, or its path inside the message for a
#: key of a call (``tool_calls.0.index``).
GROQ_FIELD_TEXT: Final = (
    "'messages.{index}' : for 'role:{role}' the following must be satisfied[('messages.{index}' "
    ": property '{field}' is unsupported)]"
)
#: docs/providers.md#azure-fields, Azure OpenAI (microsoft/azurechat#503): jsonschema's wording;
#: ``{unexpected}`` is "'a' was" or "'a', 'b' were", every extra key of the message.
AZURE_FIELD_TEXT: Final = (
    "Additional properties are not allowed ({unexpected} unexpected) - 'messages.{index}'"
)
#: docs/providers.md#mistral-reasoning and docs/providers.md#mistral-fields, Mistral 422
#: ``extra_forbidden`` (charmbracelet/crush#1590, Gage-Technologies/mistral-go#2): one pydantic
#: error; ``{loc}`` is the key's location inside the message (``"name"``,
#: ``"tool_calls",0,"index"``). Status 422.
MISTRAL_FIELD_TEXT: Final = (
    '{{"type":"extra_forbidden","loc":["body","messages",{index},"{role}",{loc}],'
    '"msg":"Extra inputs are not permitted"}}'
)
#: docs/providers.md#cerebras-reasoning and docs/providers.md#cerebras-fields, Cerebras
#: (Kilo-Org/kilocode#10375; type invalid_request_error, code wrong_api_format).
CEREBRAS_FIELD_TEXT: Final = (
    "messages.{index}.{role}.{field}: property 'messages.{index}.{role}.{field}' is unsupported"
)

#: Never refused for being null: the role, and what other checks judge (content, tool_call_id).
_REQUIRED: Final = frozenset({"role", "content", "tool_call_id"})


def _unknown_fields(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A message with a key its role does not have (``allow`` adds keys at every level, ``deny``
    removes message keys; with ``drop_null`` an optional key set to null counts too), or a
    function call (or its ``function``) with a key outside ``id``/``type``/``function``
    (``name``/``arguments``). Messages with another role are other checks' business."""
    allow = _strings(options.get("allow"))
    deny = _strings(options.get("deny")) - _REQUIRED
    drop_null = bool(options.get("drop_null", True))
    for index, message in enumerate(messages):
        role = role_of(message)
        if role is None or role not in ALLOWED:
            continue
        keys = (ALLOWED[role] | allow) - deny
        paths: list[tuple[Any, ...]] = [
            (key,)
            for key, value in message.items()
            if key not in keys or (drop_null and value is None and key not in _REQUIRED)
        ]
        calls = message.get("tool_calls")
        if role == "assistant" and ("tool_calls",) not in paths and isinstance(calls, list):
            for position, call in enumerate(calls):
                paths.extend(_call_paths(call, position, allow))
        if paths:
            yield Found(index, _describe(role, paths))


def _call_paths(call: Any, position: int, allow: frozenset[str]) -> Iterator[tuple[Any, ...]]:
    if not isinstance(call, dict) or call.get("type") not in (None, "function"):
        return
    for key in call:
        if key not in CALL_KEYS and key not in allow:
            yield ("tool_calls", position, key)
    function = call.get("function")
    if isinstance(function, dict):
        for key in function:
            if key not in FUNCTION_KEYS and key not in allow:
                yield ("tool_calls", position, "function", key)


def _describe(role: str, paths: list[tuple[Any, ...]]) -> dict[str, Any]:
    names = [".".join(str(part) for part in path) for path in paths]
    quoted = ", ".join(f"'{name}'" for name in names)
    loc = ",".join(str(part) if isinstance(part, int) else f'"{part}"' for part in paths[0])
    return {
        "role": role,
        "field": names[0],
        "fields": quoted,
        "unexpected": f"{quoted} {'was' if len(names) == 1 else 'were'}",
        "loc": loc,
    }


# --- image_unsupported, image_not_user ------------------------------------------------------------

#: docs/providers.md#deepseek-content, DeepSeek (browser-use/web-ui#99): no vision, so no image part
#: deserializes.
DEEPSEEK_IMAGE_TEXT: Final = (
    "Failed to deserialize the JSON body into the target type: messages[{index}]: data did not "
    "match any variant of untagged enum ChatCompletionRequestContent"
)
#: docs/providers.md#openai-content, OpenAI (OpenHands/OpenHands#7700, openai/openai-node#1030).
OPENAI_IMAGE_ROLE_TEXT: Final = (
    "Invalid 'messages[{index}]'. Image URLs are only allowed for messages with role 'user', but "
    "this message with role '{role}' contains an image URL."
)


def _images(message: Any, types: frozenset[str]) -> int:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, dict) and part.get("type") in types)


def _image_unsupported(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A message (any role) whose content holds an image part."""
    types = _strings(options.get("types")) - {"text"}
    for index, message in enumerate(messages):
        count = _images(message, types)
        if count:
            yield Found(index, {"role": role_of(message), "count": count})


def _image_not_user(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """A system, developer, assistant, tool or function message whose content holds an image."""
    types = _strings(options.get("types")) - {"text"}
    for index, message in enumerate(messages):
        role = role_of(message)
        if role in NOT_USER:
            count = _images(message, types)
            if count:
                yield Found(index, {"role": role, "count": count})


def _strings(value: Any) -> frozenset[str]:
    if not isinstance(value, list | tuple | set | frozenset):
        return frozenset()
    return frozenset(item for item in value if isinstance(item, str))


CHECKS: tuple[Check, ...] = (
    Check(
        "unknown_role",
        "every role is one the provider knows",
        _unknown_roles,
        DEEPSEEK_ROLE_TEXT,
        options={"roles": list(DEEPSEEK_ROLES)},
        examples=(
            Example(
                {
                    "messages": [
                        {"role": "developer", "content": "Be terse."},
                        {"role": "session_meta", "content": {"session_id": "s1"}},
                        USER,
                    ]
                }
            ),
        ),
        repair={"developer-role": {}, "unknown-roles": {"action": "rename"}},
    ),
    Check(
        "bookkeeping_field",
        "no message or tool call carries an agent's bookkeeping key",
        _bookkeeping_fields,
        BOOKKEEPING_TEXT,
        options={"keep": []},
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call()),
                        {**tool_result(), "tool_name": "read_file"},
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"bookkeeping-keys": {}},
    ),
    Check(
        "unknown_field",
        "every message key is one its role has",
        _unknown_fields,
        GROQ_FIELD_TEXT,
        options={"allow": [], "deny": [], "drop_null": True},
        examples=(Example({"messages": [{**USER, "timestamp": 1700000000}]}),),
        repair={"unknown-message-fields": {}},
    ),
    Check(
        "image_unsupported",
        "no image part (a text-only model)",
        _image_unsupported,
        DEEPSEEK_IMAGE_TEXT,
        options={"types": list(DEFAULT_TYPES)},
        examples=(
            Example(
                {"messages": [{"role": "user", "content": [{"type": "text", "text": "?"}, IMAGE]}]}
            ),
        ),
        repair={"image-parts": {"action": "strip"}},
    ),
    Check(
        "image_not_user",
        "images only in user messages",
        _image_not_user,
        OPENAI_IMAGE_ROLE_TEXT,
        options={"types": list(DEFAULT_TYPES)},
        examples=(
            Example(
                {"messages": [USER, calls_turn(tool_call()), tool_result(content=[IMAGE]), AFTER]}
            ),
        ),
        repair={"image-parts": {"action": "relocate"}},
    ),
)
