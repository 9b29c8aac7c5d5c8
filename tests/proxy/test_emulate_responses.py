"""``chatmend emulate`` serves ``/v1/responses`` as strictly as the profile's provider: through
the official openai SDK's ``client.responses.create`` (streaming too), it refuses a history with
an unanswered call (and the other shapes its contract refuses) in the provider's words and
envelope, answers a clean one, runs one tool round trip, and chatmend in front of it repairs the
refused histories of issue 24 into accepted ones."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import openai
import pytest
from aiohttp.test_utils import TestClient, TestServer

from proxy.config import parse_config
from proxy.server.app import create_app
from tools.emulate.app import create_emulator

Client = TestClient[Any, Any]
USER = {"role": "user", "content": "list the files"}
CALL = {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}
TOOLS: Any = [{"type": "function", "name": "ls", "parameters": {"type": "object"}}]


def sdk(base: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base, api_key="sk-test-not-real", max_retries=0)


async def emulator(
    aiohttp_server: Callable[..., Awaitable[TestServer]], profile: str = "deepseek"
) -> TestServer:
    return await aiohttp_server(create_emulator(profile=profile))


async def test_refuses_an_unanswered_call_and_accepts_a_clean_history(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> None:
    server = await emulator(aiohttp_server)
    async with sdk(str(server.make_url("/v1"))) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.responses.create(model="deepseek-v4-flash", input=cast(Any, [USER, CALL]))
        assert "No tool output found for function call call_1." in str(info.value)
        assert info.value.body["type"] == "invalid_request_error"  # type: ignore[index]
        done = await client.responses.create(
            model="deepseek-v4-flash", input=cast(Any, [USER, CALL, OUTPUT])
        )
        assert done.output_text == "Hello from chatmend emulate."
        # A tool loop: offered tools, the emulator calls the first; its output closes the loop.
        first = await client.responses.create(model="m", input=cast(Any, [USER]), tools=TOOLS)
        call = first.output[0]
        assert call.type == "function_call" and call.name == "ls"
        follow = [USER, call.model_dump(exclude_none=True), {**OUTPUT, "call_id": call.call_id}]
        second = await client.responses.create(model="m", input=cast(Any, follow), tools=TOOLS)
        assert second.output_text == "Hello from chatmend emulate."


async def test_streams_a_response_the_sdk_reads(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> None:
    server = await emulator(aiohttp_server)
    async with sdk(str(server.make_url("/v1"))) as client:
        stream = await client.responses.create(model="m", input="hi", stream=True)
        kinds = [event.type async for event in stream]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds


@pytest.mark.parametrize(
    ("profile", "items", "text"),
    [
        # deepseek-ai/awesome-deepseek-integration#740: a reasoning item between call and output
        (
            "deepseek",
            [USER, CALL, {"type": "reasoning", "summary": []}, OUTPUT],
            "No tool output found for tool call call_1",
        ),
        # vLLM: the JSONDecodeError's text (OpenHands/software-agent-sdk#2887)
        (
            "chat-template",
            [USER, {**CALL, "arguments": "{'a': 1}"}, OUTPUT],
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        # OpenAI: an output before its call (issue 24)
        (
            "openai",
            [USER, OUTPUT, CALL],
            "No tool call found for function call output with call_id call_1.",
        ),
        # issue 24: fc_1 on two different calls
        (
            "openai",
            [
                USER,
                {**CALL, "id": "fc_1"},
                OUTPUT,
                {**CALL, "id": "fc_1", "call_id": "call_2"},
                {**OUTPUT, "call_id": "call_2"},
            ],
            "Duplicate item found with id fc_1.",
        ),
    ],
)
async def test_each_profile_refuses_what_its_provider_refuses_and_chatmend_repairs_it(
    profile: str,
    items: list[Any],
    text: str,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[Client]],
) -> None:
    server = await emulator(aiohttp_server, profile)
    async with sdk(str(server.make_url("/v1"))) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.responses.create(model="m", input=cast(Any, items))
    assert text in str(info.value)
    config = parse_config(
        {"profile": profile}, default_upstream=str(server.make_url("")).rstrip("/")
    )
    proxy = await aiohttp_client(create_app(config))
    async with sdk(str(proxy.make_url("/v1"))) as client:
        done = await client.responses.create(model="m", input=cast(Any, items))
    assert done.output_text == "Hello from chatmend emulate."
