"""The reply rules end to end, as users run them: the openai SDK (and the anthropic SDK for
Messages) in front of chatmend, in front of an upstream that answers with a model's text.

The upstream here is a fake that answers every request with one documented output (the cases of
tests/fixtures/replies/text-tool-calls.json, written from the serving stacks' published wire
texts), streamed a few characters per event or whole. Each format on by default is converted
under the profile of the models that write it, streamed and not; every negative case comes back
byte for byte under ``chat-template`` (every format armed, or those the case names); a request
without tools, or under a profile that expects no format, gets the upstream's bytes. The
emulator's own text calls
(``chatmend emulate --text-calls``) close the loop with an agent library.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pydantic import SecretStr
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import create_app

Client = TestClient[Any, Any]
Server = Callable[..., Awaitable[TestServer]]
MakeClient = Callable[..., Awaitable[Client]]

FIXTURE = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "replies" / "text-tool-calls.json").read_text()
)
TOOLS: list[dict[str, Any]] = FIXTURE["tools"]
POSITIVE = [case for case in FIXTURE["cases"] if "calls" in case]
NEGATIVE = [case for case in FIXTURE["cases"] if "why" in case]
#: The profile whose models write each format (docs/replies.md#the-formats-each-profile-expects).
PROFILE_OF = {
    "deepseek-dsml": "deepseek",
    "deepseek-v3": "deepseek",
    "hermes-attr": "deepseek",
    "kimi-k2": "kimi",
    "minimax": "minimax",
    "mistral": "mistral",
    "hermes": "qwen",
    "qwen3-coder": "qwen",
    "glm": "glm",
}
#: Characters per streamed event (a token or two).
STEP = 5


def completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def sse(text: str) -> list[bytes]:
    """The text as an upstream streams it: a role event, a few characters per event, stop."""

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    events = [event({"role": "assistant", "content": ""})]
    events += [event({"content": text[at : at + STEP]}) for at in range(0, len(text), STEP)]
    return [*events, event({}, "stop"), b"data: [DONE]\n\n"]


class Fake:
    """An upstream answering every chat request with ``text`` (SSE when asked), recording the
    bytes it sent."""

    def __init__(self) -> None:
        self.text = ""
        self.sent = b""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        if not payload.get("stream"):
            self.sent = orjson.dumps(completion(self.text))
            return web.Response(body=self.sent, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.sent = b""
        for event in sse(self.text):
            self.sent += event
            await response.write(event)
        await response.write_eof()
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/v1/messages", self.messages)
        return app

    async def messages(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "MiniMax-M2",
            "content": [{"type": "text", "text": self.text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        if not payload.get("stream"):
            self.sent = orjson.dumps(message)
            return web.Response(body=self.sent, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        def event(data: dict[str, Any]) -> bytes:
            return f"event: {data['type']}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"

        start = {**message, "content": [], "stop_reason": None}
        events = [
            event({"type": "message_start", "message": start}),
            event(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
        ]
        events += [
            event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": self.text[at : at + STEP]},
                }
            )
            for at in range(0, len(self.text), STEP)
        ]
        events += [
            event({"type": "content_block_stop", "index": 0}),
            event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 9},
                }
            ),
            event({"type": "message_stop"}),
        ]
        self.sent = b"".join(events)
        for one in events:
            await response.write(one)
        await response.write_eof()
        return response


async def through(
    server: Server, client: MakeClient, profile: str, config: dict[str, Any] | None = None
) -> tuple[Fake, Client]:
    fake = Fake()
    upstream = await server(fake.app())
    url = str(upstream.make_url("")).rstrip("/")
    proxy = await client(
        create_app(parse_config({"profile": profile, **(config or {})}, default_upstream=url))
    )
    return fake, proxy


def sdk(proxy: Client) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=str(proxy.make_url("/v1")), api_key="sk-test-not-real", max_retries=0
    )


async def ask(proxy: Client, *, stream: bool, tools: bool = True) -> Any:
    """The assistant message and finish_reason the SDK gives (its stream helper for a stream:
    it raises on a tool-call delta without ``index``)."""
    kwargs: dict[str, Any] = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Read the file and check the weather."}],
    }
    if tools:
        kwargs["tools"] = TOOLS
    async with sdk(proxy) as api:
        if not stream:
            done = await api.chat.completions.create(**kwargs)
        else:
            async with api.chat.completions.stream(**kwargs) as events:
                done = await events.get_final_completion()
    return done.choices[0].message, done.choices[0].finish_reason


def expected_calls(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": c["name"], "arguments": c["arguments"]} for c in case["calls"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("case", POSITIVE, ids=[c["name"] for c in POSITIVE])
async def test_each_format_becomes_tool_calls_through_the_openai_sdk(
    case: dict[str, Any], stream: bool, aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    fake, proxy = await through(aiohttp_server, aiohttp_client, PROFILE_OF[case["format"]])
    fake.text = case["text"]
    message, finish = await ask(proxy, stream=stream)
    calls = [
        {"name": call.function.name, "arguments": json.loads(call.function.arguments)}
        for call in message.tool_calls or ()
    ]
    assert calls == expected_calls(case)
    assert (message.content or "") == case["content"]
    assert finish == "tool_calls"
    assert all(call.id and call.type == "function" for call in message.tool_calls)
    if "ids" in case:
        assert [call.id for call in message.tool_calls] == case["ids"]


async def raw(proxy: Client, *, stream: bool, tools: bool = True) -> tuple[bytes, Any]:
    body: dict[str, Any] = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    }
    if tools:
        body["tools"] = TOOLS
    response = await proxy.post("/v1/chat/completions", json=body)
    return await response.read(), response.headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("case", NEGATIVE, ids=[c["name"] for c in NEGATIVE])
async def test_a_negative_comes_back_byte_for_byte_with_every_format_armed(
    case: dict[str, Any], stream: bool, aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    formats = case.get("formats")
    config = {"rules": {"response-text-tool-calls": {"formats": formats}}} if formats else {}
    fake, proxy = await through(aiohttp_server, aiohttp_client, "chat-template", config)
    fake.text = case["text"]
    body, headers = await raw(proxy, stream=stream)
    assert body == fake.sent
    assert "X-Chatmend-Response-Changes" not in headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("profile", "tools"),
    [("deepseek", False), ("openai", True), ("anthropic", True)],
    ids=["no-tools", "openai-profile", "anthropic-profile"],
)
async def test_unarmed_answers_are_the_upstream_s_bytes(
    profile: str, tools: bool, stream: bool, aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    """Markup a rule could read, where it must not: no tools declared, or a profile that
    expects no format."""
    case = next(c for c in POSITIVE if c["format"] == "deepseek-dsml")
    fake, proxy = await through(aiohttp_server, aiohttp_client, profile)
    fake.text = case["text"]
    body, _ = await raw(proxy, stream=stream, tools=tools)
    assert body == fake.sent


async def test_tool_choice_none_and_an_undeclared_tool_leave_the_text(
    aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    case = next(c for c in POSITIVE if c["format"] == "minimax")
    fake, proxy = await through(aiohttp_server, aiohttp_client, "minimax")
    fake.text = case["text"]
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": TOOLS,
        "tool_choice": "none",
    }
    response = await proxy.post("/v1/chat/completions", json=body)
    assert await response.read() == fake.sent
    other = [{"type": "function", "function": {"name": "other", "parameters": {}}}]
    response = await proxy.post("/v1/chat/completions", json={**body, "tools": other})
    del body["tool_choice"]
    assert await response.read() == fake.sent


async def test_a_whole_answer_says_what_changed_and_the_log_and_metrics_count_it(
    aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    case = next(c for c in POSITIVE if c["format"] == "kimi-k2")
    fake, proxy = await through(aiohttp_server, aiohttp_client, "kimi")
    fake.text = case["text"]
    with capture_logs() as lines:
        _, headers = await raw(proxy, stream=False)
    assert headers["X-Chatmend-Response-Changes"] == (
        "2; rules=response-finish-reason,response-text-tool-calls"
    )
    metrics = await (await proxy.get("/metrics")).text()
    assert (
        'chatmend_response_repairs_total{action="converted",rule="response-text-tool-calls"} 1.0'
        in metrics
    )
    repaired = [line for line in lines if line.get("event") == "response_repaired"]
    assert repaired[0]["held_ms"] is None  # a whole answer holds no event
    assert repaired and repaired[0]["rules"] == {
        "response-text-tool-calls": 1,
        "response-finish-reason": 1,
    }
    logged = json.dumps(repaired, default=str)
    for call in case["calls"]:  # names and counts, never an argument's value
        for value in call["arguments"].values():
            assert json.dumps(value) not in logged


async def test_report_mode_relays_the_upstream_s_bytes_and_logs_what_it_would_do(
    aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    case = next(c for c in POSITIVE if c["format"] == "mistral")
    fake, proxy = await through(
        aiohttp_server,
        aiohttp_client,
        "mistral",
        {"rules": {"response-text-tool-calls": {"mode": "report"}}},
    )
    fake.text = case["text"]
    with capture_logs() as lines:
        for stream in (False, True):
            body, _ = await raw(proxy, stream=stream)
            assert body == fake.sent
    events = [line.get("event") for line in lines]
    assert events.count("response_reported") == 2
    assert "response_repaired" not in events


async def test_an_operator_s_formats_override_the_profile_s(
    aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    case = next(c for c in POSITIVE if c["format"] == "hermes")
    fake, proxy = await through(
        aiohttp_server,
        aiohttp_client,
        "openai",
        {"rules": {"response-text-tool-calls": {"formats": ["hermes"]}}},
    )
    fake.text = case["text"]
    message, finish = await ask(proxy, stream=True)
    assert finish == "tool_calls" and message.tool_calls
    off = await through(
        aiohttp_server,
        aiohttp_client,
        "deepseek",
        {"rules": {"response-text-tool-calls": False}},
    )
    dsml = next(c for c in POSITIVE if c["format"] == "deepseek-dsml")
    off[0].text = dsml["text"]
    body, _ = await raw(off[1], stream=True)
    assert body == off[0].sent


def test_a_reply_rule_s_options_are_checked_at_load() -> None:
    from proxy.config import ConfigError

    with pytest.raises(ConfigError, match="unknown format 'nope'"):
        parse_config({"rules": {"response-text-tool-calls": {"formats": ["nope"]}}})
    with pytest.raises(ConfigError, match="did you mean response-text-tool-calls"):
        parse_config({"rules": {"response-text-tool-call": True}})


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_minimax_messages_text_block_becomes_tool_use_through_the_anthropic_sdk(
    stream: bool, aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    case = next(c for c in POSITIVE if c["format"] == "minimax")
    fake, proxy = await through(aiohttp_server, aiohttp_client, "minimax")
    fake.text = case["text"]
    tools = [
        {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
    ]
    async with anthropic.AsyncAnthropic(
        base_url=str(proxy.make_url("")), api_key="sk-test-not-real", max_retries=0
    ) as api:
        kwargs: dict[str, Any] = {
            "model": "MiniMax-M2",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": "Check the weather."}],
            "tools": tools,
        }
        if stream:
            async with api.messages.stream(**kwargs) as events:
                message = await events.get_final_message()
        else:
            message = await api.messages.create(**kwargs)
    uses = [{"name": b.name, "arguments": b.input} for b in message.content if b.type == "tool_use"]
    texts = "".join(b.text for b in message.content if b.type == "text")
    assert uses == expected_calls(case)
    assert texts == case["content"]
    assert message.stop_reason == "tool_use"
    assert all(b.id.startswith("toolu_") for b in message.content if b.type == "tool_use")


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("profile", "fmt"),
    [
        ("deepseek", "deepseek-dsml"),
        ("deepseek", "deepseek-v3"),
        ("deepseek", "hermes-attr"),
        ("kimi", "kimi-k2"),
        ("minimax", "minimax"),
        ("mistral", "mistral"),
    ],
)
async def test_a_langchain_agent_loop_runs_on_calls_written_as_text(
    profile: str,
    fmt: str,
    streaming: bool,
    aiohttp_server: Server,
    aiohttp_client: MakeClient,
) -> None:
    """``chatmend emulate --text-calls FORMAT`` writes its call in the model's markup with
    ``stop``: LangChain's tool loop, through chatmend under the model's profile, runs the tool
    and ends, as it would against a provider that sent a real call."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from tools.emulate.app import create_emulator

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"{path}: hello"

    emulator = await aiohttp_server(create_emulator(profile=profile, text_calls=fmt))
    url = str(emulator.make_url("")).rstrip("/")
    proxy = await aiohttp_client(
        create_app(parse_config({"profile": profile}, default_upstream=url))
    )
    async with httpx.AsyncClient() as http:
        model = ChatOpenAI(
            model="some-model",
            base_url=str(proxy.make_url("/v1")),
            api_key=SecretStr("sk-test-not-real"),
            max_retries=0,
            streaming=streaming,
            http_async_client=http,
        ).bind_tools([read_file])
        messages: list[Any] = [HumanMessage("Read a.txt")]
        ran = []
        for _ in range(4):  # bounded: the loop must end on its own
            answer = await model.ainvoke(messages)
            messages.append(answer)
            if not answer.tool_calls:
                break
            for call in answer.tool_calls:
                ran.append(call["name"])
                output = read_file.invoke(call["args"])
                messages.append(ToolMessage(output, tool_call_id=call["id"]))
    assert ran == ["read_file"]
    assert "<" not in str(messages[1].content) and "[TOOL_CALLS]" not in str(messages[1].content)
    assert messages[-1].content  # the emulator's closing text


async def test_the_page_shows_what_the_reply_rules_changed(
    aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    case = next(c for c in POSITIVE if c["format"] == "deepseek-dsml")
    fake, proxy = await through(
        aiohttp_server, aiohttp_client, "deepseek", {"ui": {"enabled": True}}
    )
    fake.text = case["text"]
    with capture_logs() as lines:
        _, headers = await raw(proxy, stream=True)
    (repaired,) = [line for line in lines if line.get("event") == "response_repaired"]
    assert repaired["held_ms"] is not None and repaired["held_ms"] >= 0  # the stream waited
    view = await (await proxy.get(f"/chatmend/request/{headers['X-Chatmend-Request-Id']}")).text()
    assert "Response changes" in view
    assert "response-text-tool-calls" in view and "converted" in view
    assert "deepseek-dsml" in view


class Shapeless(Fake):
    """An upstream streaming a tool call the way some servers do: deltas without ``index``,
    the first without ``id``, ``arguments`` an object (openai/openai-python#2806)."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
            return b"data: " + orjson.dumps({**body, "choices": [choice]}) + b"\n\n"

        call = {"type": "function", "function": {"name": "read_file", "arguments": {"path": "a"}}}
        for one in (
            event({"role": "assistant", "content": None}),
            event({"tool_calls": [call]}),
            event({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ):
            await response.write(one)
        await response.write_eof()
        return response


async def test_a_streamed_call_without_index_or_id_reaches_the_sdk_whole(
    aiohttp_server: Server, aiohttp_client: MakeClient
) -> None:
    fake = Shapeless()
    upstream = await aiohttp_server(fake.app())
    url = str(upstream.make_url("")).rstrip("/")
    direct = await aiohttp_client(upstream)
    with pytest.raises((TypeError, KeyError, ValueError, UserWarning)):
        await ask(direct, stream=True)  # what the SDK does with the upstream's own stream
    proxy = await aiohttp_client(
        create_app(parse_config({"profile": "openai"}, default_upstream=url))
    )
    message, finish = await ask(proxy, stream=True)
    assert finish == "tool_calls"
    (call,) = message.tool_calls
    assert call.id.startswith("call_") and call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "a"}
