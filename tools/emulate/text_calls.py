"""``chatmend emulate --text-calls FORMAT``: the emulated model writes its tool call as text in
``content``, in one of the markups models really use (``rules.replies.formats``), with
``finish_reason: "stop"``, as the reports show DeepSeek, Kimi, MiniMax, Mistral, Qwen and GLM
doing. A client behind chatmend (``response-text-tool-calls`` on under the profile) then gets a
real ``tool_calls`` entry; a client in front of the emulator alone gets the markup.

Each writer follows the format as its serving stack documents it (docs/replies.md); they are
written here, apart from the parsers in ``rules/replies/formats.py``, so the tests check one
against the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

#: The lead-in text before the call (the reports show one: "I'll check.").
LEAD: Final = "Let me check that.\n\n"
_DSML: Final = "｜DSML｜"


def _json(arguments: Mapping[str, Any]) -> str:
    return orjson.dumps(arguments).decode()


def _value(value: Any) -> str:
    """An XML parameter's text: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _dsml(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    params = "".join(
        f'<{_DSML}parameter name="{key}" string="{"true" if isinstance(v, str) else "false"}">'
        f"{_value(v)}</{_DSML}parameter>\n"
        for key, v in arguments.items()
    )
    return (
        f'<{_DSML}tool_calls>\n<{_DSML}invoke name="{name}">\n{params}'
        f"</{_DSML}invoke>\n</{_DSML}tool_calls>"
    )


def _v3(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    return (
        f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n"
        f"```json\n{_json(arguments)}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    )


def _kimi(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    return (
        f"<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0"
        f"<|tool_call_argument_begin|>{_json(arguments)}<|tool_call_end|>"
        "<|tool_calls_section_end|>"
    )


def _minimax(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    params = "".join(
        f'<parameter name="{key}">{_value(v)}</parameter>\n' for key, v in arguments.items()
    )
    return f'<minimax:tool_call>\n<invoke name="{name}">\n{params}</invoke>\n</minimax:tool_call>'


def _mistral(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    return f"[TOOL_CALLS]{name}[ARGS]{_json(arguments)}"


def _hermes(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {_json(arguments)}}}\n</tool_call>'


def _hermes_attr(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    return f'<tool_call id="{call_id}" name="{name}">\n{_json(arguments)}\n</tool_call>'


def _qwen3_coder(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    params = "".join(
        f"<parameter={key}>\n{_value(v)}\n</parameter>\n" for key, v in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _glm(name: str, arguments: Mapping[str, Any], call_id: str) -> str:
    params = "".join(
        f"<arg_key>{key}</arg_key>\n<arg_value>{_value(v)}</arg_value>\n"
        for key, v in arguments.items()
    )
    return f"<tool_call>{name}\n{params}</tool_call>"


#: format -> writer(name, arguments, id)
WRITERS: Final[dict[str, Callable[[str, Mapping[str, Any], str], str]]] = {
    "deepseek-dsml": _dsml,
    "deepseek-v3": _v3,
    "hermes-attr": _hermes_attr,
    "kimi-k2": _kimi,
    "minimax": _minimax,
    "mistral": _mistral,
    "hermes": _hermes,
    "qwen3-coder": _qwen3_coder,
    "glm": _glm,
}


def as_text(fmt: str, call: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    """The content the emulated model writes for ``call`` (an OpenAI tool call) in ``fmt``,
    with arguments for the tool's required parameters (one of each simple type)."""
    name = call["function"]["name"]
    return LEAD + WRITERS[fmt](name, example_arguments(request, name), call["id"])


def example_arguments(request: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Arguments for the declared tool ``name``: each required property a value of its type,
    strings with the characters markup must survive (quotes, angle brackets, a newline)."""
    examples = {"string": 'emulated "x" <y>\nz', "integer": 1, "number": 1.5, "boolean": True}
    for tool in request.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or function.get("name") != name:
            continue
        schema = function.get("parameters")
        props = schema.get("properties") if isinstance(schema, dict) else None
        required = schema.get("required") if isinstance(schema, dict) else None
        if not isinstance(props, dict) or not isinstance(required, list):
            return {}
        found = {
            key: examples[kind]
            for key in required
            if isinstance(key, str)
            and isinstance(props.get(key), dict)
            and isinstance(kind := props[key].get("type"), str)
            and kind in examples
        }
        return found
    return {}
