"""Tool-call id formats, function names and tool-message names (docs/providers.md#mistral-pairing;
docs/providers.md#providers; docs/providers.md#question-4, docs/providers.md#question-10,
docs/providers.md#question-11): what Mistral, OpenAI, Anthropic and Gemini reject about the
identifiers of calls, functions and results.

Each check's default text is one provider's; the module also exports the other providers'
wordings of the same rejection, for the profiles' ``text`` overrides. The fields a check yields
cover every one of these templates.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from rules.providers.contract.base import Check, Example, Found, role_of
from rules.providers.contract.examples import AFTER, USER, calls_turn, tool_call, tool_result

# --- tool_call_id_format -------------------------------------------------------------------------

#: docs/providers.md#mistral-pairing, Mistral API and mistral-common V3+
#: (langchain-ai/langchain#24668, vllm-project/vllm#12332).
MISTRAL_ID_TEXT: Final = "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."
#: docs/providers.md#openai-pairing, OpenAI Chat Completions (agno-agi/agno#5382); ``{field}`` is
#: ``tool_calls[{position}].id`` for a call (the quoted text exactly) and ``tool_call_id`` for a
#: tool message (inferred).
OPENAI_ID_LENGTH_TEXT: Final = (
    "Invalid 'messages[{index}].{field}': string too long. Expected a string with maximum "
    "length 40, but got a string with length {length} instead."
)
#: docs/providers.md#anthropic-pairing, Anthropic native (BlockRunAI/ClawRouter#17,
#: maximhq/bifrost#5097); ``{block}`` is ``content.{position}.tool_use.id`` for a call (the quoted
#: text exactly, with the chat index) and ``content.0.tool_result.tool_use_id`` for a tool message
#: (inferred).
ANTHROPIC_ID_TEXT: Final = (
    "messages.{index}.{block}: String should match pattern '^[a-zA-Z0-9_-]+$'"
)
#: The text that goes with each ``format`` (a profile passes it as the ``text`` override).
ID_TEXTS: Final[Mapping[str, str]] = {
    "mistral9": MISTRAL_ID_TEXT,
    "max40": OPENAI_ID_LENGTH_TEXT,
    "anthropic": ANTHROPIC_ID_TEXT,
}

_ID_FORMATS: Final[Mapping[str, re.Pattern[str]]] = {
    # docs/providers.md#mistral-pairing, mistral-common's regex
    "mistral9": re.compile(r"^[a-zA-Z0-9]{9}\Z"),
    # docs/providers.md#openai-pairing, "maximum length 40"
    "max40": re.compile(r"^.{0,40}\Z", re.DOTALL),
    # docs/providers.md#anthropic-pairing, Anthropic's pattern
    "anthropic": re.compile(r"^[a-zA-Z0-9_-]+\Z"),
}


def _id_format(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """Every call id and tool_call_id (a non-empty string: missing ids are other checks') that
    does not match ``format``; ``preserve`` accepts any."""
    pattern = _ID_FORMATS.get(options.get("format", "mistral9"))
    if pattern is None:
        return
    for index, message in enumerate(messages):
        role = role_of(message)
        if role == "assistant":
            calls = message.get("tool_calls")
            for position, call in enumerate(calls if isinstance(calls, list) else ()):
                cid = call.get("id") if isinstance(call, dict) else None
                if isinstance(cid, str) and cid and not pattern.match(cid):
                    where = {
                        "position": position,
                        "field": f"tool_calls[{position}].id",
                        "block": f"content.{position}.tool_use.id",
                    }
                    yield Found(index, {"id": cid, "length": len(cid), **where})
        elif role == "tool":
            rid = message.get("tool_call_id")
            if isinstance(rid, str) and rid and not pattern.match(rid):
                where = {
                    "position": None,
                    "field": "tool_call_id",
                    "block": "content.0.tool_result.tool_use_id",
                }
                yield Found(index, {"id": rid, "length": len(rid), **where})


# --- function_name_invalid -----------------------------------------------------------------------

#: docs/providers.md#mistral-pairing, mistral-common validator (the only text covering both the
#: characters and the length).
MISTRAL_NAME_TEXT: Final = (
    "Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores and dashes, "
    "with a maximum length of 64."
)
#: docs/providers.md#openai-pairing, OpenAI (mcp-use/mcp-use#90, CherryHQ/cherry-studio#2895);
#: ``{field}`` is ``messages[N].tool_calls[K].function.name`` or ``tools[K].function.name`` (both
#: quoted).
OPENAI_NAME_TEXT: Final = (
    "Invalid '{field}': string does not match pattern. Expected a string that matches the "
    "pattern '^[a-zA-Z0-9_-]+$'."
)
#: docs/providers.md#gemini-pairing, Gemini (google-gemini/gemini-cli#7878), with option ``pattern:
#: gemini``.
GEMINI_NAME_TEXT: Final = (
    "Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, "
    "or contain underscores, dots and dashes, with a maximum length of 64."
)

_NAME_PATTERNS: Final[Mapping[str, re.Pattern[str]]] = {
    "strict": re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z"),  # docs/providers.md#mistral, OpenAI
    "gemini": re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}\Z"),  # docs/providers.md#gemini
}


def _function_name(holder: Any) -> Any:
    function = holder.get("function") if isinstance(holder, dict) else None
    return function.get("name") if isinstance(function, dict) else None


def _function_names(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """Every string function name, in ``tools``, ``tool_choice`` (index ``None``) and the
    history's tool calls, that does not match ``pattern``. A missing or non-string name is
    another defect."""
    pattern = _NAME_PATTERNS.get(options.get("pattern", "strict"))
    if pattern is None:
        return
    tools = request.get("tools")
    for position, tool in enumerate(tools if isinstance(tools, list) else ()):
        name = _function_name(tool)
        if isinstance(name, str) and not pattern.match(name):
            field = f"tools[{position}].function.name"
            yield Found(None, {"name": name, "field": field, "position": position})
    for index, message in enumerate(messages):
        if role_of(message) != "assistant":
            continue
        calls = message.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else ()):
            name = _function_name(call)
            if isinstance(name, str) and not pattern.match(name):
                field = f"messages[{index}].tool_calls[{position}].function.name"
                yield Found(index, {"name": name, "field": field, "position": position})
    name = _function_name(request.get("tool_choice"))
    if isinstance(name, str) and not pattern.match(name):  # (inferred: named like the tools)
        yield Found(None, {"name": name, "field": "tool_choice.function.name", "position": None})


# --- tool_message_name ---------------------------------------------------------------------------

#: docs/providers.md#gemini-pairing, Gemini OpenAI-compat (pydantic/pydantic-ai#1879,
#: NousResearch/hermes-agent#16482). Gemini groups a block's tool messages into one content:
#: ``{index}`` is the chat index (its contents index differs, inferred), ``{part}`` the message's
#: place in its run of tool messages. The same text for a name that differs from its call's is
#: inferred (hermes #72089 quotes no text).
GEMINI_TOOL_NAME_TEXT: Final = (
    "* GenerateContentRequest.contents[{index}].parts[{part}].function_response.name: "
    "Name cannot be empty.\n"
)


def _tool_names(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    """Tool messages (with a usable tool_call_id) whose ``name`` differs from the function name
    of their call (found in the block's assistant, else any earlier call), or is empty, or is
    missing when ``missing`` is set or no call gives a name to derive."""
    missing_fails = bool(options.get("missing", True))
    block: dict[str, Any] = {}
    anywhere: dict[str, Any] = {}
    part = 0
    for index, message in enumerate(messages):
        role = role_of(message)
        if role != "tool":
            block, part = {}, 0
            calls = message.get("tool_calls") if role == "assistant" else None
            for call in calls if isinstance(calls, list) else ():
                cid = call.get("id") if isinstance(call, dict) else None
                if isinstance(cid, str) and cid:
                    block.setdefault(cid, _function_name(call))
                    anywhere[cid] = _function_name(call)
            continue
        at, part = part, part + 1
        rid = message.get("tool_call_id")
        if not isinstance(rid, str) or not rid:
            continue  # missing_tool_call_id's
        expected = block[rid] if rid in block else anywhere.get(rid)
        if not isinstance(expected, str) or not expected:
            expected = None
        name = message.get("name")
        if name is None:
            wrong = missing_fails or expected is None
        elif expected is None:
            wrong = not isinstance(name, str) or not name
        else:
            wrong = name != expected
        if wrong:
            yield Found(index, {"id": rid, "part": at})


CHECKS: tuple[Check, ...] = (
    Check(
        "tool_call_id_format",
        "tool-call ids match the provider's format (option format: mistral9, max40, anthropic, "
        "preserve)",
        _id_format,
        # docs/providers.md#mistral-pairing, Mistral (langchain-ai/langchain#24668); ID_TEXTS holds
        # OpenAI's and Anthropic's
        MISTRAL_ID_TEXT,
        options={"format": "mistral9"},
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call("call_" + "x" * 50)),
                        tool_result("call_" + "x" * 50),
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"tool-call-ids": {"format": "mistral9"}},
    ),
    Check(
        "function_name_invalid",
        "function names in tools, tool_choice and tool calls match ^[a-zA-Z0-9_-]{1,64}$ "
        "(option pattern: strict, gemini)",
        _function_names,
        # docs/providers.md#mistral-pairing, mistral-common validator; OPENAI_NAME_TEXT and
        # GEMINI_NAME_TEXT are the others
        MISTRAL_NAME_TEXT,
        options={"pattern": "strict"},
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call(name="read file")),
                        tool_result(),
                        AFTER,
                    ],
                    "tools": [
                        {"type": "function", "function": {"name": "read file", "parameters": {}}}
                    ],
                }
            ),
        ),
        repair={"function-names": {"pattern": "strict"}},
    ),
    Check(
        "tool_message_name",
        "a tool message's name is its call's function name (option missing: a missing name "
        "fails too)",
        _tool_names,
        # docs/providers.md#gemini-pairing, Gemini OpenAI-compat (pydantic/pydantic-ai#1879)
        GEMINI_TOOL_NAME_TEXT,
        options={"missing": True},
        examples=(
            Example(
                {
                    "messages": [
                        USER,
                        calls_turn(tool_call()),
                        {**tool_result(), "name": "write_file"},
                        AFTER,
                    ]
                }
            ),
        ),
        repair={"tool-message-name": {"add_missing": True}},
    ),
)
