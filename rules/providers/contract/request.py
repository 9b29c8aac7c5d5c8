"""Request-level fields: the request's own ``tools``, ``tool_choice`` and sampling parameters
(docs/providers.md#request), judged as the providers word their refusals. These checks read the
request on their own (never through the rules' predicates)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from rules.engine.thinking import THINKING_MODELS
from rules.providers.contract.base import Check, Example, Found
from rules.providers.contract.examples import TOOLS, USER
from rules.providers.contract.thinking import in_thinking_mode


def _empty_tools(messages: list[Any], request: Mapping[str, Any], options: Any) -> Iterator[Found]:
    if "tools" in request and request["tools"] in ([], None):
        yield Found(None)


def _thinking_tool_choice(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    choice = request.get("tool_choice")
    # DeepSeek refuses "required" and a named function; Kimi words them 'required' and
    # 'specified' (can1357/oh-my-pi#827).
    kind = "required" if choice == "required" else "specified" if isinstance(choice, dict) else None
    if kind is not None and in_thinking_mode(request, options["models"]):
        yield Found(None, {"choice": kind})


def _tool_choice_without_tools(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    tools = request.get("tools")
    if "tool_choice" in request and not (isinstance(tools, list) and tools):
        yield Found(None)


def _functions(request: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    tools = request.get("tools")
    for position, tool in enumerate(tools if isinstance(tools, list) else []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and tool.get("type", "function") == "function":
            yield position, function


def _parameters_empty(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    for position, function in _functions(request):
        if function.get("parameters") in (None, {}):  # absent, null or {}: "is empty"
            yield Found(None, {"position": position})


def _duplicate_tool_names(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    names = [f.get("name") for _, f in _functions(request) if isinstance(f.get("name"), str)]
    if len(set(names)) < len(names):
        yield Found(None)


def _thinking_sampling(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    value = request.get("temperature")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return
    if value != options["temperature"] and in_thinking_mode(request, options["models"]):
        yield Found(None, {"temperature": options["temperature"]})


def _schemas(value: Any, path: str, depth: int) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema object in a tool's ``parameters``, with its dotted path (``root`` for the
    top), as Moonshot names the place (at most 64 levels deep)."""
    if depth > 64:
        return
    if isinstance(value, dict):
        yield path or "root", value
        for key, inner in value.items():
            yield from _schemas(inner, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list):
        for inner in value:
            yield from _schemas(inner, path, depth + 1)


def _anyof_parent_type(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    for position, function in _functions(request):
        for path, schema in _schemas(function.get("parameters"), "", 0):
            if isinstance(schema.get("anyOf"), list) and "type" in schema:
                yield Found(None, {"position": position, "path": path})
                return


def _thinking_type(
    messages: list[Any], request: Mapping[str, Any], options: Mapping[str, Any]
) -> Iterator[Found]:
    thinking = request.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    model = request.get("model")
    if kind not in options["refused"] or not isinstance(model, str):
        return
    if any(fnmatchcase(model.lower(), str(p).lower()) for p in options["models"]):
        yield Found(None, {"type": kind})


def _json_mode_with_tools(
    messages: list[Any], request: Mapping[str, Any], options: Any
) -> Iterator[Found]:
    response_format = request.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind in ("json_object", "json_schema") and request.get("tools"):
        yield Found(None, {"type": kind})


CHECKS: tuple[Check, ...] = (
    Check(
        "empty_tools",
        "no empty or null tools list",
        _empty_tools,
        # docs/providers.md#deepseek-pairing, DeepSeek v3.1 (marimo-team/marimo#6108)
        "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty "
        "array instead.",
        examples=(Example({"messages": [USER], "tools": [], "tool_choice": "auto"}),),
        repair={"empty-tools": {"refused": "empty_tools"}},
    ),
    Check(
        "thinking_tool_choice",
        "no required or named tool_choice in thinking mode",
        _thinking_tool_choice,
        # docs/providers.md#deepseek-reasoning, DeepSeek V4 (deepseek-ai/DeepSeek-V3#1376)
        "Thinking mode does not support this tool_choice",
        options={"models": THINKING_MODELS},
        examples=(
            Example(
                {
                    "model": "deepseek-v4-pro",
                    "thinking": {"type": "enabled"},
                    "messages": [USER],
                    "tools": TOOLS,
                    "tool_choice": "required",
                }
            ),
        ),
        repair={"thinking-tool-choice": {"models": ["*"]}},
    ),
    Check(
        "tool_choice_without_tools",
        "no tool_choice without a non-empty tools list",
        _tool_choice_without_tools,
        # docs/providers.md#xai-request, xAI (router-for-me/CLIProxyAPI#3704, #4491)
        "Invalid request content: A tool_choice was set on the request but no tools were "
        "specified.",
        examples=(Example({"messages": [USER], "tool_choice": "auto"}),),
        repair={"empty-tools": {"refused": "tool_choice"}},
    ),
    Check(
        "tool_parameters_empty",
        "every function tool has a non-empty parameters schema",
        _parameters_empty,
        # docs/providers.md#minimax-request, MiniMax (QwenLM/qwen-code#11834)
        "invalid params, function parameters is empty (2013)",
        examples=(
            Example(
                {
                    "messages": [USER],
                    "tools": [{"type": "function", "function": {"name": "cron_list"}}],
                }
            ),
        ),
        repair={"empty-tool-parameters": {}},
    ),
    Check(
        "duplicate_tool_names",
        "no two tools with the same function name",
        _duplicate_tool_names,
        # docs/providers.md#deepseek-request, DeepSeek (decolua/9router PR#3333)
        "Tool names must be unique.",
        examples=(Example({"messages": [USER], "tools": TOOLS + TOOLS}),),
        repair={"duplicate-tool-names": {}},
    ),
    Check(
        "thinking_temperature",
        "in thinking mode, only the temperature the model accepts",
        _thinking_sampling,
        # docs/providers.md#kimi-request, Kimi thinking models (lsdefine/GenericAgent#30)
        "invalid temperature: only 1 is allowed for this model",
        options={"models": THINKING_MODELS, "temperature": 1},
        examples=(
            Example(
                {
                    "model": "kimi-k2.5",
                    "thinking": {"type": "enabled"},
                    "messages": [USER],
                    "temperature": 0.7,
                }
            ),
        ),
        repair={"thinking-sampling": {"fixed": {"temperature": 1.0}, "models": ["*"]}},
    ),
    Check(
        "tool_schema_anyof_type",
        "no schema of a tool's parameters has both anyOf and its own type",
        _anyof_parent_type,
        # docs/providers.md#kimi-request, Moonshot/Kimi (openJiuwen-ai/jiuwenswarm#3942,
        # openclaw/openclaw#113130)
        "tools.function.parameters is not a valid moonshot flavored json schema, details: <At "
        "path '{path}': when using anyOf, type should be defined in anyOf items instead of the "
        "parent schema>",
        examples=(
            Example(
                {
                    "messages": [USER],
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": "ask_user",
                                "parameters": {
                                    "type": "object",
                                    "properties": {
                                        "options": {
                                            "type": "array",
                                            "anyOf": [{"items": {"type": "string"}}],
                                        }
                                    },
                                },
                            },
                        }
                    ],
                }
            ),
        ),
        repair={"anyof-parent-types": {}},
    ),
    Check(
        "thinking_type",
        "thinking.type is one the model takes",
        _thinking_type,
        # docs/providers.md#minimax-request, MiniMax-M3 (CherryHQ/cherry-studio#16247)
        'invalid params, invalid thinking.type: "{type}" (allowed: adaptive, disabled) (2013)',
        options={"models": ["minimax-m3*"], "refused": ["enabled"]},
        examples=(
            Example({"model": "MiniMax-M3", "messages": [USER], "thinking": {"type": "enabled"}}),
        ),
        repair={
            "request-values": {
                "replace": {"thinking.type": {"enabled": "adaptive"}},
                "models": ["*"],
            }
        },
        # MiniMax-M3 refuses the type M1/M2 take
        probe_models=("minimax-m3*",),
    ),
    Check(
        "json_mode_with_tools",
        "no JSON response format beside function tools",
        _json_mode_with_tools,
        # docs/providers.md#gemini-request, Gemini's OpenAI endpoint (Simpleyyt/ai-manus#101)
        "Function calling with a response mime type: 'application/json' is unsupported",
        examples=(
            Example(
                {
                    "messages": [USER],
                    "tools": TOOLS,
                    "response_format": {"type": "json_object"},
                }
            ),
        ),
        repair={"unsupported-parameters": {"drop": ["response_format"]}},
    ),
)
