"""Hand-written broken transcripts, one per defect kind the rules repair, each cited."""

from __future__ import annotations

from typing import Any

import orjson

from tests.builders import call, result


def chat(messages: list[Any], **extra: Any) -> bytes:
    """A chat-completions body for ``deepseek-chat`` (``extra`` adds or overrides fields)."""
    return orjson.dumps({"model": "deepseek-chat", "messages": messages, **extra})


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
    # docs/providers.md#deepseek-pairing: DeepSeek "Invalid 'messages.tool_calls': empty array"
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
    # docs/providers.md#pairing orphan tool result (run-llama/llama_index#10493): context truncation
    # cut the call and left its result first.
    "orphan_tool_result": [
        result("call_gone", "output of a call truncated away"),
        USER,
        {"role": "assistant", "content": "On it."},
        {"role": "user", "content": "Go."},
    ],
    # docs/providers.md#deepseek-pairing dangling tool call, DeepSeek (hermes #56980): two parallel
    # calls, one answered, then the user interrupts.
    "unanswered_tool_call": [
        USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_u1", "ls", '{"path":"."}'), call("call_u2", "ls", "{}")],
        },
        result("call_u1", "src tests"),
        {"role": "user", "content": "Stop, that is enough."},
    ],
    # docs/providers.md#pairing user message between tool_calls and tool results (ogx-ai/ogx#6367);
    # hermes E5 (#84481: a result compressed past a user turn).
    "displaced_tool_result": [
        USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_d1", "cat", '{"f":"a.py"}'), call("call_d2", "cat", "{}")],
        },
        result("call_d1", "print('a')"),
        {"role": "user", "content": "Also check the docs."},
        result("call_d2", "# Docs"),
        {"role": "assistant", "content": "Both read."},
        {"role": "user", "content": "Now fix it."},
    ],
    # docs/providers.md#openai-pairing missing tool_call_id, OpenAI (langchain-ai/langchain#22600).
    "missing_tool_call_id": [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("call_m", "pytest", "{}")]},
        {"role": "tool", "content": "1 failed, 9 passed"},
        {"role": "user", "content": "Which one?"},
    ],
}

#: Kind -> the text of the strict fake's first rejection (docs/providers.md#pairing, as quoted).
REJECTED_WITH: dict[str, str] = {
    "orphan_tool_result": (
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
    ),
    "unanswered_tool_call": (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. (insufficient tool messages following tool_calls message)"
    ),
    "displaced_tool_result": (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. (insufficient tool messages following tool_calls message)"
    ),
    "missing_tool_call_id": (
        "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."
    ),
}

#: Kind -> user or tool texts the repair drops by design: a result that answers no call.
DROPPED: dict[str, tuple[str, ...]] = {
    "orphan_tool_result": ("output of a call truncated away",),
}

#: A payload no rule touches (odd spacing and key order on purpose: it must arrive byte-identical).
CLEAN_BODY = (
    b'{ "model" : "deepseek-chat",\n  "messages": [ {"content": "hi", "role": "user"},'
    b' {"role":"assistant","content":null,"tool_calls":[{"type":"function","id":"c1",'
    b'"function":{"arguments":"{ \\"q\\" : 1 }","name":"s"}}]},'
    b' {"role":"tool","tool_call_id":"c1","content":"r"}], "temperature": 0.70 }'
)
