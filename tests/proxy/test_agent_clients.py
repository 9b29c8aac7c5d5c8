"""End to end through the agent libraries people point at chatmend: LangChain's ``ChatOpenAI``
(langchain-openai) and LiteLLM as a client (``litellm.acompletion``), each with its base URL set
to the proxy in front of the strict fake.

Each library writes the history its own way (LangChain serializes its message objects, LiteLLM
passes dicts through its own transformation), so what reaches chatmend is what their users send,
not what a hand-written HTTP call would.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream, strict_errors
from tests.transcripts import BROKEN, DROPPED

# LiteLLM fetches its model price map from the network at import unless told not to; this
# machine (and CI) has no route out, so it would wait for a time-out first.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

# LiteLLM's own pydantic models warn about themselves on first use; not chatmend's concern.
pytestmark = pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier:UserWarning")

Client = TestClient[Any, Any]
KEY = "sk-test-not-real"
REPLY = "Hello from the strict fake."


def _texts(messages: list[dict[str, Any]]) -> list[Any]:
    """The user and tool texts of a chat history, in order."""
    return [m.get("content") for m in messages if m.get("role") in ("user", "tool")]


def _received(fake: FakeUpstream) -> dict[str, Any]:
    sent: dict[str, Any] = orjson.loads(fake.received[-1].body)
    return sent


# --- LangChain ---------------------------------------------------------------------------------


def _chat_model(proxy: Client, **extra: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="deepseek-chat",
        base_url=str(proxy.make_url("/v1")),
        api_key=SecretStr(KEY),
        max_retries=0,
        **extra,
    )


def _tool_call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "name": name, "args": args, "type": "tool_call"}


#: LangChain agent histories that strict providers refuse, each as the agent's own objects.
LANGCHAIN_BROKEN: dict[str, list[BaseMessage]] = {
    # The user interrupted a parallel batch: one call never got its result (DeepSeek's
    # "insufficient tool messages following tool_calls message",
    # docs/providers.md#deepseek-pairing).
    "unanswered_call": [
        HumanMessage("List the repo, then the tests."),
        AIMessage(
            "", tool_calls=[_tool_call("call_1", "ls", path="."), _tool_call("call_2", "ls")]
        ),
        ToolMessage("src tests", tool_call_id="call_1"),
        HumanMessage("Stop, that is enough."),
    ],
    # Kimi's ids (`functions.bash:0`) come back in every turn: both results must survive, each
    # answering its own call (docs/providers.md#kimi-pairing; the duplicate-id refusal is
    # docs/providers.md#deepseek-pairing).
    "reused_kimi_ids": [
        HumanMessage("Run the tests, then show the diff."),
        AIMessage("", tool_calls=[_tool_call("functions.bash:0", "bash", cmd="pytest")]),
        ToolMessage("1 failed", tool_call_id="functions.bash:0"),
        AIMessage("", tool_calls=[_tool_call("functions.bash:0", "bash", cmd="git diff")]),
        ToolMessage("diff --git a/app.py", tool_call_id="functions.bash:0"),
        HumanMessage("Patch it."),
    ],
    # A user message between a call and its result (docs/providers.md#pairing).
    "displaced_result": [
        HumanMessage("Read a.py."),
        AIMessage("", tool_calls=[_tool_call("call_d", "cat", f="a.py")]),
        HumanMessage("Also check the docs."),
        ToolMessage("print('a')", tool_call_id="call_d"),
        HumanMessage("Now fix it."),
    ],
}


@pytest.mark.parametrize("kind", sorted(LANGCHAIN_BROKEN))
async def test_langchain_history_is_repaired(kind: str, proxy: Client, fake: FakeUpstream) -> None:
    history = LANGCHAIN_BROKEN[kind]
    reply = await _chat_model(proxy).ainvoke(history)
    assert reply.content == REPLY
    sent = _received(fake)
    assert strict_errors(sent) == []
    # Nothing lost: every human and tool text the agent sent reaches the provider.
    for message in history:
        if isinstance(message, HumanMessage | ToolMessage):
            assert message.content in _texts(sent["messages"])


async def test_langchain_reused_ids_keep_their_attribution(
    proxy: Client, fake: FakeUpstream
) -> None:
    await _chat_model(proxy).ainvoke(LANGCHAIN_BROKEN["reused_kimi_ids"])
    messages = _received(fake)["messages"]
    calls = {
        c["id"]: orjson.loads(c["function"]["arguments"])["cmd"]
        for m in messages
        for c in m.get("tool_calls") or ()
    }
    answered = {m["content"]: calls[m["tool_call_id"]] for m in messages if m["role"] == "tool"}
    assert answered == {"1 failed": "pytest", "diff --git a/app.py": "git diff"}


async def test_langchain_streaming_through_a_repair(proxy: Client, fake: FakeUpstream) -> None:
    parts = [
        chunk.content
        async for chunk in _chat_model(proxy, streaming=True).astream(
            LANGCHAIN_BROKEN["unanswered_call"]
        )
    ]
    assert "".join(str(p) for p in parts) == "".join(f"part{n} " for n in range(fake.stream_chunks))
    assert strict_errors(_received(fake)) == []


async def test_a_clean_langchain_history_goes_as_langchain_wrote_it(
    proxy: Client, fake: FakeUpstream, fake_server: TestServer
) -> None:
    history = [
        HumanMessage("Read a.py."),
        AIMessage("", tool_calls=[_tool_call("call_c", "cat", f="a.py")]),
        ToolMessage("print('a')", tool_call_id="call_c"),
        AIMessage("It prints a."),
        HumanMessage("Thanks."),
    ]
    direct = ChatOpenAI(
        model="deepseek-chat",
        base_url=f"{base_url(fake_server)}/v1",
        api_key=SecretStr(KEY),
        max_retries=0,
    )
    await direct.ainvoke(history)
    as_written = fake.received[-1].body
    with capture_logs() as logs:
        await _chat_model(proxy).ainvoke(history)
    assert [e for e in logs if e["event"] in ("payload_sanitized", "payload_reported")] == []
    assert fake.received[-1].body == as_written  # byte for byte, as LangChain wrote it
    assert strict_errors(_received(fake)) == []


# --- LiteLLM as a client -----------------------------------------------------------------------


async def _litellm(proxy: Client, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return await litellm.acompletion(
        model="openai/deepseek-chat",
        api_base=str(proxy.make_url("/v1")),
        api_key=KEY,
        messages=messages,
        num_retries=0,
        **extra,
    )


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_litellm_history_is_repaired(kind: str, proxy: Client, fake: FakeUpstream) -> None:
    response = await _litellm(proxy, BROKEN[kind])
    assert response.choices[0].message.content == REPLY
    sent = _received(fake)
    assert strict_errors(sent) == []
    assert fake.received[-1].headers["Authorization"] == f"Bearer {KEY}"
    kept = _texts(sent["messages"])
    for text in _texts(BROKEN[kind]):
        assert (text not in kept) if text in DROPPED.get(kind, ()) else (text in kept)


async def test_litellm_streaming_through_a_repair(proxy: Client, fake: FakeUpstream) -> None:
    stream = await _litellm(proxy, BROKEN["unanswered_tool_call"], stream=True)
    parts = [chunk.choices[0].delta.content or "" async for chunk in stream]
    assert "".join(parts) == "".join(f"part{n} " for n in range(fake.stream_chunks))
    assert strict_errors(_received(fake)) == []
