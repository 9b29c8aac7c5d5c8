"""The field fixtures (tests/fixtures/field/*.json), end to end: every public report of a strict
provider's refusal, sent as its client sent it through chatmend with recovery on, to a strict
fake that answers with the report's own error text whenever the report's rule refuses the body.

Each fixture gets a judge written here from the report's ``refuses`` and ``error`` (never the
rules' or the contracts' predicates); a fixture without a judge fails
(``test_every_fixture_has_a_judge``), so none is skipped. Each is sent twice: under the profile
its host selects (the host table, as ``chatmend serve --upstream <host>`` would pick it) and under
``profile: passthrough``, where recovery alone repairs it. Both must be accepted with nothing
lost: every text the client wrote (system, user and assistant text, tool results) and every tool
argument reaches the upstream; under the host's profile, except what the report's
``may_remove`` lists, under passthrough with no exception (recovery drops nothing the route did
not opt in to).

The in-process runs use the real app on an aiohttp test server; ``test_through_chatmend_serve``
sends a representative subset (one per API, and the Bedrock orphan) through a real ``chatmend
serve`` process (slow).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from proxy import emulate, emulate_messages, emulate_responses
from proxy.app import create_app
from proxy.config import parse_config
from proxy.provider_hosts import profile_for_upstream
from tests.conftest import base_url
from tests.proxy.test_cli import CHATMEND, serving

FIELD = Path(__file__).parent.parent / "fixtures" / "field"
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
KEYS = {
    "id", "source", "published", "provider", "host", "api", "status", "error", "error_body",
    "cause", "refuses", "may_remove", "request",
}  # fmt: skip
REQUIRED = KEYS - {"published", "error_body"}
SOURCE = re.compile(r"^(?:[\w.-]+/[\w.-]+#\d+|https://\S+)$")

Body = dict[str, Any]
#: A judge: why the provider refuses ``body`` (its own words, shortened), or ``None``.
Judge = Callable[[Body], str | None]


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(path.read_bytes())
    return data


FIXTURES = {path.stem: load(path) for path in sorted(FIELD.glob("*.json"))}


# --- reading a body: what the client wrote --------------------------------------------------


def texts_of(content: Any) -> Iterator[str]:
    """The texts of a content value, whatever its shape: a string, a part or block list
    (``text``, ``input_text``, ``output_text``; a ``tool_result``'s content)."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                yield part
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    yield part["text"]
                if part.get("type") == "tool_result":
                    yield from texts_of(part.get("content"))


def arguments(value: Any) -> Any:
    """Tool arguments as a value: a JSON string parsed (a string that is not JSON stays)."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def written(body: Body, api: str) -> tuple[list[str], list[Any]]:
    """What the client wrote in ``body``: its texts (instructions, system, every message's
    text, tool results) and its tool arguments."""
    texts: list[str] = []
    args: list[Any] = []
    if api == "chat":
        for message in body.get("messages", []):
            texts += texts_of(message.get("content"))
            calls = message.get("tool_calls") or []
            args += [arguments(call.get("function", {}).get("arguments")) for call in calls]
    elif api == "responses":
        texts += texts_of(body.get("instructions"))
        items = body.get("input")
        for item in items if isinstance(items, list) else [{"content": items}]:
            texts += texts_of(item.get("content"))
            texts += texts_of(item.get("output"))
            if item.get("type") == "function_call":
                args.append(arguments(item.get("arguments")))
    else:
        texts += texts_of(body.get("system"))
        for message in body.get("messages", []):
            texts += texts_of(message.get("content"))
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            args += [
                b.get("input")
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
    return [text for text in texts if text.strip()], args


def lost(original: Body, sent: Body, api: str, may_remove: list[dict[str, str]]) -> list[str]:
    """What of ``original`` the upstream did not get in ``sent``: texts missing from every text
    of ``sent`` (a text may have moved or merged, never vanished), arguments no call of
    ``sent`` carries; ``may_remove`` exempts the texts the report says a repair may drop."""
    exempt = {entry["text"] for entry in may_remove}
    texts, args = written(original, api)
    sent_texts, sent_args = written(sent, api)
    corpus = "\0".join(sent_texts)
    missing = [f"text {text[:40]!r}" for text in texts if text not in exempt and text not in corpus]
    missing += [f"arguments {arg!r}"[:60] for arg in args if arg not in sent_args]
    return missing


def messages_of(body: Body) -> list[Body]:
    return [m for m in body.get("messages", []) if isinstance(m, dict)]


def empty(content: Any) -> bool:
    return not any(text.strip() for text in texts_of(content)) and not (
        isinstance(content, list) and any(p.get("type") != "text" for p in content)
    )


# --- the judges, one per report, from the report's own words --------------------------------


def deepseek_empty_assistant(body: Body) -> str | None:
    """01 DeepSeek: "Invalid assistant message: content or tool_calls must be set"."""
    for message in messages_of(body):
        content, calls = message.get("content"), message.get("tool_calls")
        if message.get("role") == "assistant" and empty(content) and not calls:
            return "content or tool_calls must be set"
    return None


def deepseek_reasoning_content(body: Body) -> str | None:
    """02 DeepSeek V4 (thinking by default): "The `reasoning_content` in the thinking mode must
    be passed back to the API." for a tool-call turn without a non-empty reasoning_content."""
    if (body.get("thinking") or {}).get("type") == "disabled":
        return None
    for message in messages_of(body):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            reasoning = message.get("reasoning_content")
            if not (isinstance(reasoning, str) and reasoning):
                return "reasoning_content must be passed back"
    return None


def deepseek_tool_result_blocks(body: Body) -> str | None:
    """03 DeepSeek's Anthropic endpoint: a tool_result's content list holds text blocks only
    ("unknown variant `tool_reference`, expected `text`")."""
    for message in messages_of(body):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            inner = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(inner, list) and any(part.get("type") != "text" for part in inner):
                return "unknown variant, expected `text`"
    return None


def answered_calls(body: Body) -> str | None:
    """04 Kimi: "an assistant message with 'tool_calls' must be followed by tool messages
    responding to each 'tool_call_id'"."""
    messages = messages_of(body)
    for at, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        answered = set()
        for after in messages[at + 1 :]:
            if after.get("role") != "tool":
                break
            answered.add(after.get("tool_call_id"))
        for call in message.get("tool_calls") or []:
            if call.get("id") not in answered:
                return f"tool_call_ids did not have response messages: {call.get('id')}"
    return None


def schemas(schema: Any) -> Iterator[Body]:
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from schemas(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from schemas(value)


def moonshot_schema(body: Body) -> str | None:
    """05 Kimi: "when using anyOf, type should be defined in anyOf items instead of the parent
    schema"."""
    for tool in body.get("tools", []):
        for schema in schemas(tool.get("function", {}).get("parameters")):
            if "anyOf" in schema and "type" in schema:
                return "type should be defined in anyOf items"
            if "anyOf" in schema and any(
                isinstance(item, dict) and "type" not in item for item in schema["anyOf"]
            ):
                return "type should be defined in anyOf items"
    return None


def glm_empty_text_part(body: Body) -> str | None:
    """06 GLM: "Invalid API parameter" (1210) for a text part whose text is empty."""
    for message in messages_of(body):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "text" and not part.get("text"):
                return "Invalid API parameter"
    return None


def minimax_thinking_type(body: Body) -> str | None:
    """07 MiniMax-M3: "invalid thinking.type: "enabled" (allowed: adaptive, disabled)"."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") not in ("adaptive", "disabled"):
        return "invalid thinking.type"
    return None


def dashscope_roles(body: Body) -> str | None:
    """08 DashScope: "developer is not one of ['system', 'assistant', 'user', 'tool',
    'function']"."""
    for message in messages_of(body):
        if message.get("role") not in ("system", "assistant", "user", "tool", "function"):
            return f"{message.get('role')} is not one of the roles"
    return None


def mistral_order(body: Body) -> str | None:
    """09 mistral-common: "Unexpected role 'user' after role 'tool'"."""
    roles = [m.get("role") for m in messages_of(body)]
    for before, after in itertools.pairwise(roles):
        if before == "tool" and after == "user":
            return "Unexpected role 'user' after role 'tool'"
    return None


def gemini_signatures(body: Body) -> str | None:
    """10 Gemini 3: "Function call is missing a thought_signature in functionCall parts": in
    each step after the last user message, the first call needs one."""
    messages = messages_of(body)
    users = [at for at, m in enumerate(messages) if m.get("role") == "user"]
    for message in messages[(users[-1] + 1 if users else 0) :]:
        calls = message.get("tool_calls") or []
        if message.get("role") == "assistant" and calls:
            google = (calls[0].get("extra_content") or {}).get("google") or {}
            if not google.get("thought_signature"):
                return "missing a thought_signature"
    return None


GROQ_KEYS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "reasoning"},
    "tool": {"role", "content", "name", "tool_call_id"},
}


def groq_keys(body: Body) -> str | None:
    """11 Groq: "property 'id' is unsupported, did you mean 'role'?"."""
    for message in messages_of(body):
        for key in message:
            if key not in GROQ_KEYS.get(message.get("role", ""), set()):
                return f"property '{key}' is unsupported"
    return None


def xai_instructions(body: Body) -> str | None:
    """12 xAI Responses: "Argument not supported: instructions and previous_response_id
    together"."""
    if body.get("instructions") is not None and body.get("previous_response_id") is not None:
        return "instructions and previous_response_id together"
    return None


def cerebras_reasoning(body: Body) -> str | None:
    """13 Cerebras: "property 'messages.2.assistant.reasoning_content' is unsupported"."""
    for message in messages_of(body):
        if "reasoning_content" in message:
            return "reasoning_content is unsupported"
    return None


def azure_id_length(body: Body) -> str | None:
    """14 Azure chat: "string too long. Expected a string with maximum length 40"."""
    for message in messages_of(body):
        ids = [call.get("id") for call in message.get("tool_calls") or []]
        ids.append(message.get("tool_call_id"))
        if any(isinstance(i, str) and len(i) > 40 for i in ids):
            return "string too long (40)"
    return None


def responses_call_id_length(body: Body) -> str | None:
    """15 Azure Responses: "Invalid 'input[4].call_id': string too long. Expected a string with
    maximum length 64"."""
    for item in body.get("input", []):
        if isinstance(item.get("call_id"), str) and len(item["call_id"]) > 64:
            return "call_id too long (64)"
    return None


def reasoning_before_message(body: Body) -> str | None:
    """16 OpenAI Responses: "Item 'msg_…' was provided without its required 'reasoning' item":
    an assistant message item with an id, in a turn that holds a reasoning item before it,
    must come directly after a reasoning item."""
    reasoning_seen = False
    previous: Body = {}
    for item in body.get("input", []):
        if item.get("role") == "user":
            reasoning_seen = False
        if item.get("type") == "reasoning":
            reasoning_seen = True
        is_message = item.get("type", "message") == "message" and item.get("role") == "assistant"
        if is_message and item.get("id") and reasoning_seen and previous.get("type") != "reasoning":
            return f"Item '{item['id']}' was provided without its required 'reasoning' item"
        previous = item
    return None


def anthropic_orphan_results(body: Body) -> str | None:
    """17 Anthropic: "unexpected `tool_use_id` found in `tool_result` blocks ... Each
    `tool_result` block must have a corresponding `tool_use` block in the previous message"."""
    before: list[Body] = []
    for message in messages_of(body):
        content = message.get("content")
        blocks: list[Body] = content if isinstance(content, list) else []
        uses = {b.get("id") for b in before if b.get("type") == "tool_use"}
        for block in blocks:
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in uses:
                return "unexpected `tool_use_id` found in `tool_result` blocks"
        before = blocks
    return None


def bedrock_results(body: Body) -> str | None:
    """18 Bedrock: "The number of toolResult blocks at messages.2.content exceeds the number of
    toolUse blocks of previous turn": a tool message must answer a call of its block's
    assistant."""
    calls: set[Any] = set()
    for message in messages_of(body):
        if message.get("role") == "assistant":
            calls = {call.get("id") for call in message.get("tool_calls") or []}
        elif message.get("role") == "tool":
            if message.get("tool_call_id") not in calls:
                return "toolResult blocks exceed the toolUse blocks of previous turn"
        else:
            calls = set()
    return None


def llama_trailing_assistants(body: Body) -> str | None:
    """19 llama-server: "Cannot have 2 or more assistant messages at the end of the list"."""
    roles = [m.get("role") for m in messages_of(body)]
    if roles[-2:] == ["assistant", "assistant"]:
        return "Cannot have 2 or more assistant messages at the end of the list"
    return None


def gemma_alternation(body: Body) -> str | None:
    """20 Gemma 3's template: "Conversation roles must alternate user/assistant/user/
    assistant/..." after it folds a first system message into the first user turn."""
    roles = [m.get("role") for m in messages_of(body)]
    if roles[:1] == ["system"]:
        roles = roles[1:]
    for at, role in enumerate(roles):
        if role != ("user" if at % 2 == 0 else "assistant"):
            return "Conversation roles must alternate user/assistant/user/assistant/..."
    return None


JUDGES: dict[str, Judge] = {
    "01-astrbot-9035-deepseek-reasoning-only-assistant": deepseek_empty_assistant,
    "02-inspect-4079-openrouter-deepseek-reasoning-details": deepseek_reasoning_content,
    "03-jetbrains-cc-gui-591-deepseek-anthropic-tool-reference": deepseek_tool_result_blocks,
    "04-kimi-code-269-interrupted-task-output": answered_calls,
    "05-jiuwenswarm-3942-kimi-schema-anyof-type": moonshot_schema,
    "06-codegraff-812-glm-empty-text-part": glm_empty_text_part,
    "07-cherry-studio-16247-minimax-m3-thinking-type": minimax_thinking_type,
    "08-chatlab-480-dashscope-developer-role": dashscope_roles,
    "09-mistral-vibe-578-user-after-cancelled-tool": mistral_order,
    "10-ruby-llm-591-gemini-thought-signature": gemini_signatures,
    "11-chatbox-2083-groq-message-id-field": groq_keys,
    "12-vibecad-4-xai-instructions-with-previous-response": xai_instructions,
    "13-openagentscontrol-317-cerebras-reasoning-content": cerebras_reasoning,
    "14-azure-dev-7324-tool-call-id-too-long": azure_id_length,
    "15-codex-14355-azure-responses-call-id-too-long": responses_call_id_length,
    "16-continue-11994-openai-reasoning-message-order": reasoning_before_message,
    "17-claude-code-18947-anthropic-orphan-tool-result": anthropic_orphan_results,
    "18-curie-16-bedrock-orphan-tool-result": bedrock_results,
    "19-gaia-1667-llama-server-trailing-assistants": llama_trailing_assistants,
    "20-conversations-197-vllm-gemma-two-system-messages": gemma_alternation,
}


# --- the fixtures are what they say ----------------------------------------------------------


def test_every_fixture_has_a_judge() -> None:
    """A fixture without a judge would be skipped silently: it fails here instead (and a judge
    whose fixture is gone)."""
    assert FIXTURES, "no field fixtures"
    assert sorted(set(FIXTURES) - set(JUDGES)) == [], "write a judge for these fixtures"
    assert sorted(set(JUDGES) - set(FIXTURES)) == [], "these judges have no fixture"


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_fixture_is_a_report_and_its_judge_refuses_the_request_as_sent(name: str) -> None:
    fixture = FIXTURES[name]
    assert REQUIRED <= set(fixture) <= KEYS, sorted(set(fixture) ^ KEYS)
    assert fixture["id"] == name
    assert SOURCE.match(fixture["source"]), fixture["source"]
    assert re.fullmatch(r"\d{4}-\d{2}", fixture.get("published", "2000-01"))
    assert fixture["api"] in PATHS and isinstance(fixture["status"], int)
    assert fixture["host"].startswith(("http://", "https://"))
    assert all(entry["text"] and entry["why"] for entry in fixture["may_remove"])
    # The judge refuses the request the client sent: it cannot pass vacuously.
    assert JUDGES[name](fixture["request"]) is not None
    # ... and the oracle sees what the client wrote.
    texts, _ = written(fixture["request"], fixture["api"])
    assert texts


# --- the strict fake ---------------------------------------------------------------------------


@dataclass
class Strict:
    """The report's provider: its judge refuses with the report's own text, in its envelope."""

    received: list[Body]
    answered: int = 0


def envelope(fixture: dict[str, Any]) -> bytes:
    if "error_body" in fixture:
        return orjson.dumps(fixture["error_body"])
    if fixture["api"] == "messages":
        error = {"type": "invalid_request_error", "message": fixture["error"]}
        return orjson.dumps({"type": "error", "error": error})
    error = {"message": fixture["error"], "type": "invalid_request_error", "code": None}
    return orjson.dumps({"error": error})


def strict_app(fixture: dict[str, Any], state: Strict) -> web.Application:
    judge = JUDGES[fixture["id"]]

    async def handle(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw)
        state.received.append(body)
        if judge(body) is not None:
            return web.Response(
                status=fixture["status"], body=envelope(fixture), content_type="application/json"
            )
        state.answered += 1
        if fixture["api"] == "messages":
            return await emulate_messages.answer(request, raw, state.answered)
        if fixture["api"] == "responses":
            return await emulate_responses.answer(request, raw, state.answered)
        if body.get("stream"):
            return await emulate.stream_completion(request, chunks=1)
        return web.json_response(emulate.completion(None))

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("POST", "/{tail:.*}", handle)
    return app


def config_for(fixture: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """The default config (recovery on, as shipped), under the profile the host selects or
    ``profile``."""
    chosen = profile or profile_for_upstream(fixture["host"])[0]
    return {"profile": chosen}


HEADERS = {"Authorization": "Bearer sk-field-fixture", "Content-Type": "application/json"}

Servers = Callable[..., Awaitable[TestServer]]
Clients = Callable[..., Awaitable[TestClient[Any, Any]]]


def assert_accepted(
    fixture: dict[str, Any], state: Strict, status: int, text: str, profile: str | None
) -> None:
    """Accepted, and nothing lost: under the host's profile, but what the report's
    ``may_remove`` lists (a profile may drop what its provider refuses); under passthrough,
    nothing at all (recovery drops nothing unless the route opts in, ``recover.lossy``)."""
    judge = JUDGES[fixture["id"]]
    assert status == 200, (status, text[:300])
    sent = state.received[-1]
    assert judge(sent) is None
    may_remove = fixture["may_remove"] if profile is None else []
    missing = lost(fixture["request"], sent, fixture["api"], may_remove)
    assert missing == [], missing


@pytest.mark.parametrize("profile", [None, "passthrough"], ids=["host-profile", "passthrough"])
@pytest.mark.parametrize("name", sorted(FIXTURES))
async def test_each_report_is_accepted_with_nothing_lost(
    name: str, profile: str | None, aiohttp_server: Servers, aiohttp_client: Clients
) -> None:
    fixture = FIXTURES[name]
    state = Strict([])
    upstream = await aiohttp_server(strict_app(fixture, state))
    config = parse_config(config_for(fixture, profile), default_upstream=base_url(upstream))
    proxy = await aiohttp_client(create_app(config))
    response = await proxy.post(
        PATHS[fixture["api"]], data=orjson.dumps(fixture["request"]), headers=HEADERS
    )
    assert_accepted(fixture, state, response.status, await response.text(), profile)


#: One per API, a lossless text rendering, the Bedrock orphan, a request-level drop.
THROUGH_SERVE = [
    "03-jetbrains-cc-gui-591-deepseek-anthropic-tool-reference",
    "12-vibecad-4-xai-instructions-with-previous-response",
    "13-openagentscontrol-317-cerebras-reasoning-content",
    "18-curie-16-bedrock-orphan-tool-result",
]


@asynccontextmanager
async def serve(
    fixture: dict[str, Any], profile: str | None, tmp_path: Path
) -> AsyncIterator[tuple[str, Strict]]:
    state = Strict([])
    upstream = TestServer(strict_app(fixture, state))
    await upstream.start_server()
    try:
        path = tmp_path / f"{fixture['id']}-{profile}.yaml"
        config = {**config_for(fixture, profile), "upstream": {"url": base_url(upstream)}}
        path.write_text(yaml.safe_dump(config))
        async with serving(str(CHATMEND), "serve", "--config", str(path)) as url:
            yield url, state
    finally:
        await upstream.close()


@pytest.mark.slow
@pytest.mark.parametrize("profile", [None, "passthrough"], ids=["host-profile", "passthrough"])
@pytest.mark.parametrize("name", THROUGH_SERVE)
async def test_through_chatmend_serve(name: str, profile: str | None, tmp_path: Path) -> None:
    fixture = FIXTURES[name]
    body = orjson.dumps(fixture["request"])
    async with (
        serve(fixture, profile, tmp_path) as (url, state),
        aiohttp.ClientSession() as http,
        http.post(url + PATHS[fixture["api"]], data=body, headers=HEADERS) as response,
    ):
        assert_accepted(fixture, state, response.status, await response.text(), profile)
