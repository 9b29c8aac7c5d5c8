"""Small message builders shared by the pairing rules' tests."""

from __future__ import annotations

from typing import Any


def call(cid: Any, name: str = "read", arguments: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def turn(*ids: Any, content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [call(cid) for cid in ids]}


def result(cid: Any, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def user(text: str = "go on") -> dict[str, Any]:
    return {"role": "user", "content": text}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def result_ids(messages: list[Any]) -> list[Any]:
    return [m.get("tool_call_id") for m in messages if m.get("role") == "tool"]
