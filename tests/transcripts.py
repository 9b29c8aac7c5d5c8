"""Hand-written broken transcripts, one per defect kind the core rules repair, each cited."""

from __future__ import annotations

from typing import Any


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


USER = {"role": "user", "content": "Fix the failing test, please."}

#: Kind -> messages. Every one is rejected by a strict upstream as it stands.
BROKEN: dict[str, list[dict[str, Any]]] = {
    # hermes #49147: text and tool calls of one turn split into two assistant messages.
    "split_assistant_turn": [
        USER,
        {"role": "assistant", "content": "Let me look at the tests."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_a", "ls", '{"path":"tests"}')],
        },
        result("call_a", "test_app.py"),
        {"role": "assistant", "content": "Found it."},
        {"role": "user", "content": "Go on."},
    ],
    # provider-errors.md 1.A: DeepSeek "Invalid 'messages.tool_calls': empty array"
    # (anomalyco/opencode#41860).
    "empty_tool_calls": [
        USER,
        {"role": "assistant", "content": "Sure, looking now.", "tool_calls": []},
        {"role": "user", "content": "Thanks."},
    ],
    # hermes E6: Kimi reuses `terminal:0` in every turn; both results must survive.
    "reused_tool_call_ids": [
        USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("terminal:0", "bash", '{"cmd":"pytest"}')],
        },
        result("terminal:0", "1 failed"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("terminal:0", "bash", '{"cmd":"git diff"}')],
        },
        result("terminal:0", "diff --git a/app.py"),
        {"role": "assistant", "content": "The diff shows the bug."},
        {"role": "user", "content": "Patch it."},
    ],
    # hermes R21/#58327: one call replayed inside its turn, with its result twice.
    "replayed_tool_call": [
        USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("call_r", "read", '{"path": "app.py", "lines": 40}'),
                call("call_r", "read", '{"lines":40,"path":"app.py"}'),
            ],
        },
        result("call_r", "def main(): ..."),
        result("call_r", "def main(): ..."),
        {"role": "user", "content": "And?"},
    ],
    # hermes §3.2 (#102311): arguments truncated mid-structure by a context compressor.
    "truncated_arguments": [
        USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("call_t", "write", '{"path": "a.py", "edits": [{"line": 3, "text": "x = 1"}')
            ],
        },
        result("call_t", "written"),
        {"role": "user", "content": "Next."},
    ],
    # hermes E25: arguments given as an object instead of a JSON string (goose-mobile#20).
    "object_arguments": [
        USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_o", "grep", {"pattern": "TODO"})],
        },
        result("call_o", "3 matches"),
        {"role": "user", "content": "Fine."},
    ],
}

#: A payload no rule touches (odd spacing and key order on purpose: it must arrive byte-identical).
CLEAN_BODY = (
    b'{ "model" : "deepseek-chat",\n  "messages": [ {"content": "hi", "role": "user"},'
    b' {"role":"assistant","content":null,"tool_calls":[{"type":"function","id":"c1",'
    b'"function":{"arguments":"{ \\"q\\" : 1 }","name":"s"}}]},'
    b' {"role":"tool","tool_call_id":"c1","content":"r"}], "temperature": 0.70 }'
)
