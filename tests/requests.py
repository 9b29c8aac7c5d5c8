"""Hypothesis strategy for whole chat requests broken the ways provider profiles repair.

``broken_requests()`` starts from ``strategies.broken_transcripts()`` (pairing, ids, arguments,
junk keys) and adds the defects of the sequence, shape, id and request-level rules: a
``developer`` message, split user turns, a system message mid-conversation, a conversation that
opens with the assistant, images and null contents in tool results, over-long ids, dotted function
names, ``tools: []`` and a forced ``tool_choice``, and the request-level refusals of issue 25 (a
tool defined twice or without a schema, a choice without tools, a temperature). The draw records
what it injected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from hypothesis import strategies as st

from tests.strategies import Broken, broken_transcripts

#: Models the requests name: one per profile family, so model-based selection is exercised.
MODELS: Final = (
    "deepseek-chat",
    "deepseek-reasoner",
    "deepseek-v4-flash",
    "kimi-k2.5",
    "kimi-k3",
    "~deepseek/deepseek-v4-flash-latest",
    "gemini-3.1-pro-preview",
    "mistral-large-latest",
    "gpt-5",
    None,
)

EXTRA_DEFECTS: Final = (
    "developer",
    "split_user",
    "mid_system",
    "leading_assistant",
    "image_in_tool",
    "null_content",
    "long_id",
    "dotted_name",
    "empty_tools",
    "forced_tool_choice",
    "duplicate_tools",
    "tool_without_parameters",
    "choice_without_tools",
    "hot_temperature",
)


@dataclass(frozen=True)
class BrokenRequest:
    payload: dict[str, Any]
    broken: Broken
    extra: tuple[str, ...]


def _roles(messages: list[Any]) -> list[Any]:
    return [m.get("role") if isinstance(m, dict) else None for m in messages]


@st.composite
def broken_requests(draw: st.DrawFn) -> BrokenRequest:
    broken = draw(broken_transcripts())
    messages: list[Any] = [dict(m) if isinstance(m, dict) else m for m in broken.messages]
    chosen = draw(st.lists(st.sampled_from(EXTRA_DEFECTS), unique=True, max_size=6))
    done: list[str] = []
    payload: dict[str, Any] = {}
    model = draw(st.sampled_from(MODELS))
    if model is not None:
        payload["model"] = model
    roles = _roles(messages)
    if "developer" in chosen and "system" in roles:
        index = roles.index("system")
        messages[index] = {**messages[index], "role": "developer"}
        done.append("developer")
    if "split_user" in chosen and "user" in roles:
        index = roles.index("user")
        messages.insert(index + 1, {"role": "user", "content": "and one more thing"})
        done.append("split_user")
    roles = _roles(messages)
    if "mid_system" in chosen and roles.count("user") > 1:
        index = len(roles) - 1 - roles[::-1].index("user")
        messages.insert(index, {"role": "system", "content": "Be brief from now on."})
        done.append("mid_system")
    roles = _roles(messages)
    if "leading_assistant" in chosen and "user" in roles:
        first = roles.index("user")
        if first + 1 < len(messages) and roles[first + 1] == "assistant":
            del messages[first]
            done.append("leading_assistant")
    roles = _roles(messages)
    if "image_in_tool" in chosen and "tool" in roles:
        index = roles.index("tool")
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        text = {"type": "text", "text": "screenshot attached"}
        messages[index] = {**messages[index], "content": [text, image]}
        done.append("image_in_tool")
    if "null_content" in chosen and "tool" in roles:
        index = len(roles) - 1 - roles[::-1].index("tool")
        messages[index] = {**messages[index], "content": None}
        done.append("null_content")
    if "long_id" in chosen:
        done += _long_id(messages)
    tools = None
    if "dotted_name" in chosen:
        tools = _dotted_name(messages)
        if tools:
            done.append("dotted_name")
    if "empty_tools" in chosen and tools is None:
        payload["tools"] = []
        payload["tool_choice"] = "auto"
        done.append("empty_tools")
    elif tools:
        payload["tools"] = tools
    if "forced_tool_choice" in chosen and payload.get("tools"):
        payload["tool_choice"] = "required"
        done.append("forced_tool_choice")
    # The request's own fields (docs/providers.md#request): a tool defined twice (DeepSeek), a
    # tool without a schema (MiniMax), a choice and no tools (xAI), a temperature a thinking
    # Kimi model refuses.
    if "duplicate_tools" in chosen and payload.get("tools"):
        payload["tools"] = [*payload["tools"], payload["tools"][0]]
        done.append("duplicate_tools")
    if "tool_without_parameters" in chosen:
        payload["tools"] = [
            *(payload.get("tools") or []),
            {"type": "function", "function": {"name": "cron_list"}},
        ]
        done.append("tool_without_parameters")
    if "choice_without_tools" in chosen and "tools" not in payload:
        payload["tool_choice"] = "auto"
        done.append("choice_without_tools")
    if "hot_temperature" in chosen:
        payload["temperature"] = 0.7
        done.append("hot_temperature")
    payload["messages"] = messages
    return BrokenRequest(payload, broken, tuple(done))


def _long_id(messages: list[Any]) -> list[str]:
    """The first call with a string id, and every result naming it, get a 60-character id."""
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not isinstance(calls, list):
            continue
        for position, call in enumerate(calls):
            old = call.get("id") if isinstance(call, dict) else None
            if not isinstance(old, str) or not old:
                continue
            new = ("fc_" + old + "_" * 60)[:60]
            new_calls = list(calls)
            new_calls[position] = {**call, "id": new}
            messages[index] = {**message, "tool_calls": new_calls}
            for later, other in enumerate(messages):
                if isinstance(other, dict) and other.get("tool_call_id") == old:
                    messages[later] = {**other, "tool_call_id": new}
            return ["long_id"]
    return []


def _dotted_name(messages: list[Any]) -> list[dict[str, Any]]:
    """Every function name gets a namespace dot (``fs.read_file``), in history and in tools."""
    names: dict[str, str] = {}
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not isinstance(calls, list):
            continue
        new_calls = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(function, dict) and isinstance(name, str) and name:
                names[name] = "fs." + name
                new_calls.append({**call, "function": {**function, "name": names[name]}})
            else:
                new_calls.append(call)
        messages[index] = {**message, "tool_calls": new_calls}
    return [
        {
            "type": "function",
            "function": {"name": dotted, "parameters": {"type": "object", "properties": {}}},
        }
        for dotted in names.values()
    ]
