"""End to end through the official openai SDK with base_url pointed at the proxy."""

from __future__ import annotations

from typing import Any, cast

import openai
import orjson
import pytest
from aiohttp.test_utils import TestClient
from structlog.testing import capture_logs

from tests.client_shapes import SESSIONS
from tests.fake_upstream import FakeUpstream, strict_errors
from tests.transcripts import BROKEN, DROPPED

Client = TestClient[Any, Any]


def sdk(proxy: Client) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=str(proxy.make_url("/v1")), api_key="sk-test-not-real", max_retries=0
    )


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_sdk_non_streaming(kind: str, proxy: Client, fake: FakeUpstream) -> None:
    async with sdk(proxy) as client:
        completion = await client.chat.completions.create(
            model="deepseek-chat",
            messages=cast(Any, BROKEN[kind]),
        )
    assert completion.choices[0].message.content == "Hello from the strict fake."
    sent = orjson.loads(fake.received[-1].body)
    assert strict_errors(sent) == []
    assert fake.received[-1].headers["Authorization"] == "Bearer sk-test-not-real"
    # nothing the user or a tool said is lost, except a result that answers no call
    user_and_tool = [m["content"] for m in BROKEN[kind] if m["role"] in ("user", "tool")]
    sent_texts = [m["content"] for m in sent["messages"] if m["role"] in ("user", "tool")]
    for text in user_and_tool:
        assert (text not in sent_texts) if text in DROPPED.get(kind, ()) else (text in sent_texts)


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_sdk_streaming(kind: str, proxy: Client, fake: FakeUpstream) -> None:
    async with sdk(proxy) as client:
        stream = await client.chat.completions.create(
            model="deepseek-chat",
            messages=cast(Any, BROKEN[kind]),
            stream=True,
        )
        parts = [chunk.choices[0].delta.content or "" async for chunk in stream]
    assert "".join(parts) == "".join(f"part{n} " for n in range(fake.stream_chunks))
    assert strict_errors(orjson.loads(fake.received[-1].body)) == []


async def test_sdk_sees_the_upstream_error_unchanged(proxy: Client, fake: FakeUpstream) -> None:
    # A call without any id can be neither answered nor stubbed (hermes E26): no rule repairs
    # it, so the upstream's 400 comes back as it was sent.
    unpairable = {"type": "function", "function": {"name": "ls", "arguments": "{}"}}
    broken = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [unpairable]},
        {"role": "user", "content": "well?"},
    ]
    async with sdk(proxy) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model="deepseek-chat", messages=cast(Any, broken))
    assert "must be followed by tool messages responding to each 'tool_call_id'" in str(info.value)


@pytest.mark.parametrize(
    "session", ["openai_sdk_null", "langchain_empty_string", "content_absent", "kimi_ids"]
)
async def test_a_standard_transcript_reaches_the_upstream_as_the_sdk_wrote_it(
    session: str, proxy: Client, fake: FakeUpstream
) -> None:
    """Minimal intervention, as users run it: the default profile logs no rewrite and the
    upstream gets the SDK's own bytes for `""`, `null` or no content next to tool calls."""
    async with sdk(proxy) as client:
        with capture_logs() as logs:
            raw = await client.chat.completions.with_raw_response.create(
                model="deepseek-chat", messages=cast(Any, SESSIONS[session])
            )
    assert raw.headers["X-Chatmend-Changes"] == "0"
    assert [e for e in logs if e["event"] in ("payload_sanitized", "payload_reported")] == []
    sent = fake.received[-1].body
    assert orjson.loads(sent)["messages"] == SESSIONS[session]
    assert strict_errors(orjson.loads(sent)) == []
