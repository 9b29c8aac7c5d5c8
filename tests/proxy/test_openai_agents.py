"""A real openai-agents tool loop through chatmend to ``chatmend emulate``'s strict
``/v1/responses``: the Runner's default model (``OpenAIResponsesModel``) asks, the emulator calls
the agent's tool, the Runner runs it and sends its output back, and the emulator answers text.
Offline (tracing off, loopback only) and fast."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestClient, TestServer

from proxy.config import parse_config
from proxy.server.app import create_app
from tools.emulate.app import create_emulator

agents = pytest.importorskip("agents")


async def test_an_openai_agents_runner_tool_loop_through_chatmend(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    agents.set_tracing_disabled(True)
    emulator = await aiohttp_server(create_emulator(profile="deepseek"))
    config = parse_config({}, default_upstream=str(emulator.make_url("")).rstrip("/"))
    proxy = await aiohttp_client(create_app(config))
    calls: list[str] = []

    @agents.function_tool
    def list_files(directory: str = ".") -> str:
        """List the files of a directory."""
        calls.append(directory)
        return "a.txt b.txt"

    client = openai.AsyncOpenAI(
        base_url=str(proxy.make_url("/v1")), api_key="sk-test-not-real", max_retries=0
    )
    model = agents.OpenAIResponsesModel(model="deepseek-v4-flash", openai_client=client)
    agent = agents.Agent(name="lister", instructions="List files.", tools=[list_files], model=model)
    result = await agents.Runner.run(agent, "What is in this directory?")
    await client.close()
    assert calls == ["."]
    assert result.final_output == "Hello from chatmend emulate."
