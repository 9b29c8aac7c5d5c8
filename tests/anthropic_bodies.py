"""Claude-Code-shaped Anthropic Messages bodies: a clean session, and the same session carrying
every defect the Messages rules repair (each one a public report: docs/anthropic.md)."""

from __future__ import annotations

import copy
from typing import Any

SIGNATURE = "EqQBCkYIBxgCKkBsig0000000000000000000000000000000000000000"
SYSTEM = [
    {
        "type": "text",
        "text": "You are Claude Code, Anthropic's official CLI for Claude.",
        "cache_control": {"type": "ephemeral"},
    },
    {"type": "text", "text": "Working directory: /repo", "cache_control": {"type": "ephemeral"}},
]


def tool(name: str, prop: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool.",
        "input_schema": {
            "type": "object",
            "properties": {prop: {"type": "string"}},
            "required": [prop],
            "additionalProperties": False,
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
    }


TOOLS = [tool("Bash", "command"), tool("Read", "file_path"), tool("WebSearch", "query")]


def thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": SIGNATURE}


def clean_session(model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:
    """A Claude Code request as it goes out: system blocks with cache_control, tools with
    input_schema, metadata.user_id, thinking on, parallel tool calls, streaming."""
    return {
        "model": model,
        "max_tokens": 32000,
        "system": copy.deepcopy(SYSTEM),
        "tools": copy.deepcopy(TOOLS),
        "metadata": {
            "user_id": "user_4f2a9c_account__session_0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
        },
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>Be careful.</system-reminder>"},
                    {
                        "type": "text",
                        "text": "fix the failing test",
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    thinking("Run the tests and read the module."),
                    {"type": "text", "text": "I'll run the tests."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A",
                        "name": "Bash",
                        "input": {"command": "pytest -q"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_01B",
                        "name": "Read",
                        "input": {"file_path": "/repo/a.py"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A",
                        "content": "1 failed",
                        "is_error": True,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01B",
                        "content": [{"type": "text", "text": "def f(): return 1"}],
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    thinking("The fix is in f."),
                    {
                        "type": "tool_use",
                        "id": "toolu_01C",
                        "name": "Bash",
                        "input": {"command": "sed -i s/1/2/ a.py"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01C",
                        "content": "ok",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
    }


#: The user texts, tool results and tool inputs of ``broken_session`` that must reach the
#: upstream (results: the contents of results that answered a call).
KEPT_USER_TEXTS = ("fix the failing test", "now search the docs", "and tell me", "cut \ufffd")
KEPT_RESULTS = ("1 failed", "def f(): return 1", "search hits", "second run ok")
KEPT_INPUTS = (
    {"command": "pytest -q"},
    {"file_path": "/repo/a.py"},
    {"query": "pytest docs"},
    {"command": "pytest -q -x"},
)


def broken_session(model: str = "claude-opus-4-6") -> dict[str, Any]:
    """The clean session after a compaction and an agent's bookkeeping went wrong: Claude
    Code's JSON user_id, a forced tool in thinking mode, thinking dropped from a tool-use turn,
    thinking after text, unsigned thinking, a Kimi-style id, a reused id, an input stored as
    text, a blank text block, text before a result, a missing and an orphan result, two user
    turns in a row, an empty assistant, and a cut emoji."""
    body = clean_session(model)
    body["metadata"] = {"user_id": '{"device_id":"4f2a9c","account_uuid":"","session_id":"0b1c"}'}
    body["tool_choice"] = {"type": "tool", "name": "WebSearch"}
    body["messages"] = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_00Z", "content": "stale"}],
        },
        {
            "role": "assistant",
            "content": [
                # an unsigned block (another issuer's history, or a placeholder)
                {"type": "thinking", "thinking": "", "signature": ""},
                {"type": "text", "text": "Summary of earlier work."},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "fix the failing test"},
                {"type": "text", "text": ""},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll run the tests."},
                thinking("Run the tests and read the module."),
                {
                    "type": "tool_use",
                    "id": "functions.Bash:0",
                    "name": "Bash",
                    "input": '{"command": "pytest -q",}',
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01B",
                    "name": "Read",
                    "input": {"file_path": "/repo/a.py"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01D",
                    "name": "Read",
                    "input": {"file_path": "/repo/b.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "(interrupted)"},
                {
                    "type": "tool_result",
                    "tool_use_id": "functions.Bash:0",
                    "content": "1 failed",
                    "is_error": True,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": [{"type": "text", "text": "def f(): return 1"}],
                },
            ],
        },
        {"role": "assistant", "content": []},
        {"role": "user", "content": "now search the docs"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and tell me"},
                {"type": "text", "text": "cut \ud83d"},
            ],
        },
        # compaction dropped this turn's thinking
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01B",
                    "name": "WebSearch",
                    "input": {"query": "pytest docs"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "search hits"}
            ],
        },
        {
            "role": "assistant",
            "content": [
                thinking("Run again."),
                {
                    "type": "tool_use",
                    "id": "toolu_01E",
                    "name": "Bash",
                    "input": {"command": "pytest -q -x"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01E", "content": "second run ok"}
            ],
        },
    ]
    return body
