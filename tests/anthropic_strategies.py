"""Hypothesis strategies for Anthropic Messages requests: Claude-Code-shaped, broken on purpose.

A request is built from random turns (user text, assistant text/thinking/tool_use, user
tool_results) whose ids come from a small pool (so ids repeat across and inside turns), with
invalid ids (``functions.Bash:0``, ``""``), inputs of every type, blank text blocks, empty
messages, results before or after text, orphans, missing results, split turns, thinking in any
position, thinking without a signature, ``cache_control`` inside a result, and request fields
(``thinking``, ``tool_choice``, ``metadata.user_id``, ``tools``, ``context_management``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

IDS = ("toolu_01", "toolu_02", "toolu_03", "call_0", "functions.Bash:0", "Shell:1", "")
TEXTS = ("hello", "fix the bug", "done", "résumé 👋", "", "  ", "\n")
MODELS = (
    "deepseek-v4-pro",
    "deepseek-chat",
    "claude-sonnet-4-5",
    "claude-opus-4-6",
    "kimi-k2.6",
    "kimi-k2.7-code",
)
#: ``anthropic-beta`` header values a request may come with (``RequestFacts.betas``).
BETAS: tuple[frozenset[str], ...] = (
    frozenset(),
    frozenset({"context-management-2025-06-27"}),
    frozenset({"interleaved-thinking-2025-05-14", "claude-code-20250219"}),
)

texts = st.sampled_from(TEXTS)
ids = st.sampled_from(IDS)
inputs = st.one_of(
    st.just({"command": "ls -la"}),
    st.dictionaries(
        st.sampled_from(("path", "n", "q")), st.integers(-(2**31), 2**31) | st.text(max_size=5)
    ),
    st.sampled_from(('{"path": "a.py",}', '{"x": 1}', "not json", "", '{"cut": "ab')),
    st.none(),
    st.just([1, 2]),
    st.integers(-(2**31), 2**31),
)


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@st.composite
def tool_use(draw: st.DrawFn) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "id": draw(ids), "name": "Bash"}
    value = draw(inputs)
    if not draw(st.booleans()) or value is not None:
        block["input"] = value
    return block


@st.composite
def tool_result(draw: st.DrawFn) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": draw(ids)}
    block["content"] = draw(
        st.sampled_from(
            (
                "ok",
                "file.txt",
                "",
                [text_block("out")],
                # a breakpoint inside the result (caozhiyuan/copilot-api#241)
                [text_block("a"), {**text_block("b"), "cache_control": {"type": "ephemeral"}}],
            )
        )
    )
    return block


thinking = st.sampled_from(
    (
        {"type": "thinking", "thinking": "plan", "signature": "sig"},
        {"type": "redacted_thinking", "data": "enc"},
        # unsigned: another issuer's history, a placeholder, a redacted block without data
        {"type": "thinking", "thinking": "deepseek's"},
        {"type": "thinking", "thinking": "", "signature": ""},
        {"type": "redacted_thinking"},
    )
)


@st.composite
def assistant(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 9)) == 0:
        return {"role": "assistant", "content": draw(texts)}
    parts = draw(
        st.lists(st.one_of(texts.map(text_block), tool_use(), thinking), min_size=0, max_size=4)
    )
    return {"role": "assistant", "content": parts}


@st.composite
def user(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 4)) == 0:
        return {"role": "user", "content": draw(texts)}
    parts = draw(st.lists(st.one_of(texts.map(text_block), tool_result()), min_size=0, max_size=4))
    return {"role": "user", "content": parts}


@st.composite
def answered_turn(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An assistant tool-use turn and its user results, then maybe a defect."""
    calls = draw(st.lists(tool_use(), min_size=1, max_size=3))
    lead = draw(st.lists(thinking, max_size=1))
    head = draw(st.lists(texts.map(text_block), max_size=1))
    results = [
        {"type": "tool_result", "tool_use_id": c["id"], "content": f"result {n}"}
        for n, c in enumerate(calls)
        if draw(st.integers(0, 5)) > 0  # sometimes missing
    ]
    if draw(st.booleans()):
        results.reverse()
    after = draw(st.lists(texts.map(text_block), max_size=1))
    if draw(st.integers(0, 5)) == 0:  # text before the results
        after, results = [], after + results
    return [
        {"role": "assistant", "content": lead + head + calls},
        {"role": "user", "content": results + after},
    ]


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[Any] = []
    for _ in range(draw(st.integers(1, 6))):
        messages.extend(
            draw(
                st.one_of(
                    answered_turn(), assistant().map(lambda m: [m]), user().map(lambda m: [m])
                )
            )
        )
    request: dict[str, Any] = {
        "model": draw(st.sampled_from(MODELS)),
        "max_tokens": 1024,
        "messages": messages,
    }
    kind = draw(st.sampled_from((None, "enabled", "disabled", "adaptive")))
    if kind is not None:
        request["thinking"] = {"type": kind}
    choice = draw(st.sampled_from((None, "auto", "any", "tool")))
    if choice is not None:
        request["tool_choice"] = {"type": choice, **({"name": "Bash"} if choice == "tool" else {})}
        request["tools"] = [{"name": "Bash", "input_schema": {"type": "object"}}]
    user_id = draw(st.sampled_from((None, "user_ok-1", '{"device_id":"ab","session_id":"c1"}')))
    if user_id is not None:
        request["metadata"] = {"user_id": user_id}
    if draw(st.booleans()):
        request["context_management"] = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    return request
