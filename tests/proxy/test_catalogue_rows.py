"""One case per catalogued rejection a profile applies: ``chatmend emulate --profile P`` rejects
the raw case with that provider's status and quoted text, and the proxy under the same profile
gets it accepted (docs/providers.md rows are cited next to each check's text)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.app import create_app
from proxy.config import parse_config
from proxy.emulate import create_emulator
from rules.providers.contract import violations
from rules.providers.profiles import PROFILES
from tests.builders import call, result, turn

USER = {"role": "user", "content": "Read the file."}
AFTER = {"role": "user", "content": "Thanks."}
SYSTEM = {"role": "system", "content": "You are a coding agent."}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]

#: check code -> a request that breaks that rule (and as little else as it can).
CASES: dict[str, dict[str, Any]] = {
    "arguments_not_string": {"messages": [USER, turn(call(arguments={"a": 1})), result(), AFTER]},
    "content_missing": {
        "messages": [{"role": "user"}, {"role": "assistant", "content": "?"}, AFTER]
    },
    "content_not_string": {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
            {"role": "user", "content": [{"type": "text", "text": "Read it."}]},
        ]
    },
    "content_null": {
        "messages": [
            USER,
            {"role": "assistant", "content": "Ok."},
            {"role": "user", "content": None},
        ]
    },
    "content_object": {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]},
    "conversation_start": {"messages": [{"role": "assistant", "content": "Hello."}]},
    "duplicate_tool_call_id": {
        "messages": [USER, turn(call()), result(), AFTER, turn(call()), result(), AFTER]
    },
    "duplicate_tool_result": {"messages": [USER, turn(call()), result(), result(), AFTER]},
    "empty_assistant": {"messages": [USER, {"role": "assistant", "content": ""}, AFTER]},
    "empty_tool_calls": {
        "messages": [USER, {"role": "assistant", "content": "Hm.", "tool_calls": []}, AFTER]
    },
    "empty_tools": {"messages": [USER], "tools": [], "tool_choice": "auto"},
    "first_not_user": {"messages": [turn(call()), result(), AFTER]},
    "function_name_invalid": {
        "messages": [USER, turn(call(name="read file")), result(), AFTER],
        "tools": [{"type": "function", "function": {"name": "read file", "parameters": {}}}],
    },
    "image_not_user": {"messages": [USER, turn(call()), result(content=[IMAGE]), AFTER]},
    "image_unsupported": {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "?"}, IMAGE]}]
    },
    "invalid_arguments": {
        "messages": [USER, turn(call(arguments='{"path": "a"')), result(), AFTER]
    },
    "missing_tool_call_id": {
        "messages": [USER, turn(call()), {"role": "tool", "content": "ok"}, AFTER]
    },
    "missing_tool_call_type": {
        "messages": [
            USER,
            turn({"id": "abcDEF123", "function": {"name": "read_file", "arguments": "{}"}}),
            result(),
            AFTER,
        ]
    },
    "multiple_system": {"messages": [SYSTEM, {"role": "system", "content": "Be terse."}, USER]},
    "no_content_element": {"messages": [USER, turn(call(), content=None), result(), AFTER]},
    "multiple_text_elements": {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}],
            }
        ]
    },
    "bookkeeping_field": {
        "messages": [USER, turn(call()), {**result(), "tool_name": "read_file"}, AFTER]
    },
    "no_user_message": {"messages": [SYSTEM, {"role": "assistant", "content": "Hello."}]},
    "orphan_tool_result": {
        "messages": [USER, result("zzzZZZ999"), {"role": "assistant", "content": "?"}, AFTER]
    },
    "reasoning_content_missing": {
        "thinking": {"type": "enabled"},
        "messages": [USER, turn(call()), result(), AFTER],
    },
    "roles_not_alternating": {"messages": [USER, {"role": "user", "content": "Also the tests."}]},
    "successive_assistant": {
        "messages": [
            USER,
            {"role": "assistant", "content": "A."},
            {"role": "assistant", "content": "B."},
            AFTER,
        ]
    },
    "successive_user": {"messages": [USER, {"role": "user", "content": "Also the tests."}]},
    "system_not_first": {
        "messages": [USER, {"role": "assistant", "content": "Ok."}, SYSTEM, AFTER]
    },
    "thinking_tool_choice": {
        "model": "deepseek-v4-pro",
        "thinking": {"type": "enabled"},
        "messages": [USER],
        "tools": TOOLS,
        "tool_choice": "required",
    },
    "thinking_temperature": {
        "model": "kimi-k2.5",
        "thinking": {"type": "enabled"},
        "messages": [USER],
        "temperature": 0.7,
    },
    "tool_choice_without_tools": {"messages": [USER], "tool_choice": "auto"},
    "tool_parameters_empty": {
        "messages": [USER],
        "tools": [{"type": "function", "function": {"name": "cron_list"}}],
    },
    "duplicate_tool_names": {"messages": [USER], "tools": TOOLS + TOOLS},
    # openJiuwen-ai/jiuwenswarm#3942: a typed schema beside anyOf
    "tool_schema_anyof_type": {
        "messages": [USER],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "ask_user",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "options": {"type": "array", "anyOf": [{"items": {"type": "string"}}]}
                        },
                    },
                },
            }
        ],
    },
    # CherryHQ/cherry-studio#16247: MiniMax-M3 refuses the type M1/M2 take
    "thinking_type": {"model": "MiniMax-M3", "messages": [USER], "thinking": {"type": "enabled"}},
    # Simpleyyt/ai-manus#101: the JSON mode beside function tools (Gemini)
    "json_mode_with_tools": {
        "messages": [USER],
        "tools": TOOLS,
        "response_format": {"type": "json_object"},
    },
    # justrach/codegraff#812: an empty text part beside an image
    "empty_text_part": {
        "messages": [{"role": "user", "content": [{"type": "text", "text": ""}, IMAGE]}]
    },
    "thought_signature_missing": {
        "model": "gemini-3.1-pro-preview",
        "messages": [USER, turn(call()), result()],
    },
    "tool_call_content_empty": {"messages": [USER, turn(call(), content=""), result(), AFTER]},
    "tool_call_id_format": {
        "messages": [USER, turn(call("call_" + "x" * 50)), result("call_" + "x" * 50), AFTER]
    },
    "tool_message_name": {
        "messages": [USER, turn(call()), {**result(), "name": "write_file"}, AFTER]
    },
    "trailing_assistant": {"messages": [USER, {"role": "assistant", "content": "Sure, I"}]},
    "unanswered_tool_call": {"messages": [USER, turn(call()), AFTER]},
    "unexpected_role_order": {"messages": [USER, turn(call()), result(), AFTER]},
    "unknown_field": {"messages": [{**USER, "timestamp": 1700000000}]},
    # `developer` for the providers that know only `system`, an agent's record for all of them
    "unknown_role": {
        "messages": [
            {"role": "developer", "content": "Be terse."},
            {"role": "session_meta", "content": {"session_id": "s1"}},
            USER,
        ]
    },
    "thinking_part": {
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Read it first.", "signature": "sig"},
                    {"type": "text", "text": "Done."},
                ],
            },
            AFTER,
        ]
    },
}

ROWS = sorted((name, code) for name, profile in PROFILES.items() for code in profile.contract)


def test_every_check_a_profile_applies_has_a_case() -> None:
    assert {code for _, code in ROWS} <= set(CASES)


Start = Callable[[str], Awaitable[tuple[TestClient[Any, Any], TestClient[Any, Any]]]]


@pytest.fixture
def start(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> Start:
    async def start(profile: str) -> tuple[TestClient[Any, Any], TestClient[Any, Any]]:
        upstream = await aiohttp_server(create_emulator(profile=profile))
        url = str(upstream.make_url("")).rstrip("/")
        config = parse_config({"profile": profile}, default_upstream=url)
        proxy = await aiohttp_client(create_app(config))
        direct = await aiohttp_client(create_emulator(profile=profile))
        return direct, proxy

    return start


@pytest.mark.parametrize("profile", sorted({name for name, _ in ROWS}))
async def test_each_catalogued_rejection_is_emulated_and_repaired(
    profile: str, start: Start
) -> None:
    direct, proxy = await start(profile)
    contract = PROFILES[profile].contract
    for code in contract:
        payload = {"model": "some-model", **CASES[code]}
        found = violations(payload, contract)
        assert code in {v.code for v in found}, (profile, code, found)
        body = orjson.dumps(payload)
        response = await direct.post("/v1/chat/completions", data=body)
        answer = await response.json()
        message = answer["message"] if "object" in answer else answer["error"]["message"]
        assert (response.status, message) == (found[0].status, found[0].message), (profile, code)
        with capture_logs() as logs:
            response = await proxy.post("/v1/chat/completions", data=body)
        assert response.status == 200, (profile, code, await response.text())
        assert not [e for e in logs if e["event"] == "contract_violation"], (profile, code)
