"""`chatmend emulate`: the strict provider users run in CI, and the proxy in front of it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from rules.providers.contract import violations
from tests.proxy.test_cli import free_port, wait_listening
from tests.transcripts import BROKEN, CLEAN_BODY, chat
from tools.emulate.app import create_emulator

CHATMEND = Path(sys.executable).parent / "chatmend"


@pytest.fixture
async def emulator(aiohttp_client: Any) -> TestClient[Any, Any]:
    client: TestClient[Any, Any] = await aiohttp_client(create_emulator(chunks=3))
    return client


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_rejects_each_broken_kind_with_the_provider_text(
    kind: str, emulator: TestClient[Any, Any]
) -> None:
    response = await emulator.post("/v1/chat/completions", data=chat(BROKEN[kind]))
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == violations({"messages": BROKEN[kind]})[0].message


async def test_answers_a_clean_request(emulator: TestClient[Any, Any]) -> None:
    response = await emulator.post("/chat/completions", data=CLEAN_BODY)
    assert response.status == 200
    assert (await response.json())["object"] == "chat.completion"


async def test_streams_when_asked(emulator: TestClient[Any, Any]) -> None:
    body = chat([{"role": "user", "content": "hi"}], stream=True)
    response = await emulator.post("/v1/chat/completions", data=body)
    assert response.headers["Content-Type"] == "text/event-stream"
    events = [line for line in (await response.text()).split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    assert len(events) == 1 + 3 + 1 + 1  # role, 3 text chunks, stop, [DONE]


async def test_not_json_models_and_unknown_paths(emulator: TestClient[Any, Any]) -> None:
    response = await emulator.post("/v1/chat/completions", data=b"{nope")
    assert response.status == 400
    assert "deserialize" in (await response.json())["error"]["message"]
    models = await emulator.get("/v1/models")
    assert (await models.json())["data"][0]["id"] == "deepseek-chat"
    missing = await emulator.get("/v1/nothing")
    assert missing.status == 404
    assert "error" in await missing.json()


@pytest.fixture
def emulate_process() -> Iterator[str]:
    """A real `chatmend emulate` process; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [str(CHATMEND), "emulate", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
async def test_real_processes_proxy_in_front_of_emulate(emulate_process: str) -> None:
    """What a user's CI does: agent -> chatmend serve -> chatmend emulate."""
    port = free_port()
    proxy = subprocess.Popen(
        [str(CHATMEND), "serve", "--upstream", emulate_process, "--port", str(port)],
        stdout=subprocess.DEVNULL,
    )
    try:
        async with aiohttp.ClientSession() as http:
            await wait_listening(int(emulate_process.rsplit(":", 1)[1]))
            await wait_listening(port)
            for kind, messages in sorted(BROKEN.items()):
                body = chat(messages)
                async with http.post(emulate_process + "/v1/chat/completions", data=body) as r:
                    assert r.status == 400, kind
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                async with http.post(url, data=body) as r:
                    assert r.status == 200, (kind, await r.text())
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)


async def test_a_profile_answers_in_its_provider_words_status_and_envelope(
    aiohttp_client: Any,
) -> None:
    mistral: TestClient[Any, Any] = await aiohttp_client(create_emulator(profile="mistral"))
    response = await mistral.post("/v1/chat/completions", data=chat(BROKEN["unanswered_tool_call"]))
    assert response.status == 400
    assert await response.json() == {
        "object": "error",
        "message": "Not the same number of function calls and responses",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    empty_tools = chat([{"role": "user", "content": "hi"}], tools=[])
    response = await mistral.post("/v1/chat/completions", data=empty_tools)
    assert response.status == 422  # Mistral's schema errors (docs/providers.md#mistral-pairing)
    # a profile without the check accepts what another rejects
    passthrough: TestClient[Any, Any] = await aiohttp_client(create_emulator(profile="passthrough"))
    response = await passthrough.post("/v1/chat/completions", data=empty_tools)
    assert response.status == 200


TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_agent_tool_loop_runs_end_to_end(
    stream: bool, emulator: TestClient[Any, Any]
) -> None:
    """With tools offered, emulate calls the first one; once its result is in, it answers text:
    an agent's loop (the openai SDK here) runs to the end, the same way every time."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=str(emulator.make_url("/v1")), api_key="sk-test", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "read it"}]
    turns: list[str] = []
    for _ in range(4):  # bounded: the loop must end on its own
        if stream:
            calls: dict[int, Any] = {}
            text, finish = "", None
            async for chunk in await client.chat.completions.create(
                model="deepseek-chat",
                messages=messages,
                tools=TOOLS,
                stream=True,
            ):
                choice = chunk.choices[0]
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or ():
                    calls[call.index] = call
                finish = choice.finish_reason or finish
            tool_calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls.values()
            ]
        else:
            done = await client.chat.completions.create(
                model="deepseek-chat",
                messages=messages,
                tools=TOOLS,
            )
            finish = done.choices[0].finish_reason
            text = done.choices[0].message.content or ""
            tool_calls = [c.model_dump() for c in done.choices[0].message.tool_calls or ()]
        turns.append(str(finish))
        if finish != "tool_calls":
            assert text
            break
        assert [c["function"]["name"] for c in tool_calls] == ["read_file"]
        assert tool_calls[0]["function"]["arguments"] == "{}"
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        messages.append({"role": "tool", "tool_call_id": tool_calls[0]["id"], "content": "ok"})
    assert turns == ["tool_calls", "stop"]
    await client.close()
