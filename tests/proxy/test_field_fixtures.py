"""The field fixtures (tests/fixtures/field/*.json), end to end: every public report of a strict
provider's refusal, sent as its client sent it through chatmend with recovery on, to a strict
fake that answers with the report's own error text whenever the report's rule refuses the body.

Each fixture gets a judge written here from the report's ``refuses`` and ``error`` (never the
rules' or the contracts' predicates); a fixture without a judge fails
(``test_every_fixture_has_a_judge``), so none is skipped. Each is sent twice: under the profile
its host selects (the host table, as ``chatmend serve --upstream <host>`` would pick it) and under
``profile: passthrough``, where recovery alone repairs it. Both must be accepted with nothing
lost: every text the client wrote (system, user and assistant text, tool results), every image
and every tool argument reaches the upstream; under the host's profile, except what the report's
``may_remove`` lists, under passthrough with no exception; a route that opts in to a lossy
repair (``LOSSY``, one report: an endpoint that takes one image) loses only what the test says
that repair may drop. A run chatmend cannot get accepted yet is on record in ``GAPS``, with what
it lacks, and must fail until a change closes it.

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

from proxy.config import parse_config, profile_for_upstream
from proxy.server.app import create_app
from tests.conftest import base_url
from tests.proxy.test_cli import CHATMEND, serving
from tools.emulate import chat as emulate
from tools.emulate import messages as emulate_messages
from tools.emulate import responses as emulate_responses

FIELD = Path(__file__).parent.parent / "fixtures" / "field"
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
KEYS = {
    "id", "source", "published", "provider", "host", "api", "status", "error", "error_body",
    "cause", "refuses", "may_remove", "request",
}  # fmt: skip
REQUIRED = KEYS - {"published", "error_body"}
#: The primary report (``owner/repo#N`` or a URL), then related ones after a comma.
SOURCE = re.compile(r"^(?:[\w.-]+/[\w.-]+#\d+|https://\S+)(?:, .+)?$")

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


def images_of(content: Any) -> Iterator[str]:
    """The images of a content value: a chat ``image_url`` part's URL, a Responses
    ``input_image``'s, a Messages ``image`` block's data or URL (inside a ``tool_result`` too)."""
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str):
            yield url
        source = part.get("source")
        if isinstance(source, dict):
            yield from (source[k] for k in ("data", "url") if isinstance(source.get(k), str))
        if part.get("type") == "tool_result":
            yield from images_of(part.get("content"))


def images(body: Body) -> list[str]:
    """Every image of a body, in order (any API's list)."""
    items = body.get("messages", body.get("input"))
    found: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            found += images_of(item.get("content"))
            found += images_of(item.get("output"))
    return found


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


def lost(
    original: Body,
    sent: Body,
    api: str,
    may_remove: list[dict[str, str]],
    *,
    images_kept: int | None = None,
) -> list[str]:
    """What of ``original`` the upstream did not get in ``sent``: texts missing from every text
    of ``sent`` (a text may have moved or merged, never vanished), images it does not carry,
    arguments no call of ``sent`` carries (unreadable ones: a word of them no call carries);
    ``may_remove`` exempts the texts the report says a repair may drop, ``images_kept`` (a
    route's lossy opt-in) lets all but that many last images go."""
    exempt = {entry["text"] for entry in may_remove}
    owed = images(original)
    if images_kept is not None:
        owed = owed[len(owed) - images_kept :] if images_kept else []
    now = images(sent)
    gone = [f"image {url[:40]!r}" for url in owed if url not in now]
    texts, args = written(original, api)
    sent_texts, sent_args = written(sent, api)
    corpus = "\0".join(sent_texts)
    missing = [f"text {text[:40]!r}" for text in texts if text not in exempt and text not in corpus]
    words = " ".join(orjson.dumps(arg).decode() for arg in sent_args)
    for arg in args:
        if arg in sent_args or (isinstance(arg, str) and arg in exempt):
            continue
        # arguments the client sent unreadable: every word of them still reaches the upstream
        if isinstance(arg, str) and all(word in words for word in re.findall(r"\w+", arg)):
            continue
        missing.append(f"arguments {arg!r}"[:60])
    return missing + gone


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


def perplexity_alternation(body: Body) -> str | None:
    """21 Perplexity: "After the (optional) system message(s), user and assistant roles should
    be alternating."."""
    roles = [m.get("role") for m in messages_of(body)]
    while roles and roles[0] == "system":
        roles = roles[1:]
    if any(a == b for a, b in itertools.pairwise(roles)) or "system" in roles:
        return "user and assistant roles should be alternating"
    return None


def lmstudio_tool_choice(body: Body) -> str | None:
    """22 LM Studio: "Invalid tool_choice type: 'object'. Supported string values: none, auto,
    required"."""
    if "tool_choice" in body and body["tool_choice"] not in ("none", "auto", "required"):
        return "Invalid tool_choice type"
    return None


def json_arguments(body: Body) -> str | None:
    """23 DashScope: "The "function.arguments" parameter of the code model must be in JSON
    format."."""
    for message in messages_of(body):
        for call in message.get("tool_calls") or []:
            raw = call.get("function", {}).get("arguments")
            try:
                parsed = orjson.loads(raw) if isinstance(raw, str) else None
            except orjson.JSONDecodeError:
                parsed = None
            if not isinstance(parsed, dict):
                return "function.arguments must be in JSON format"
    return None


def no_max_tokens(body: Body) -> str | None:
    """24 Copilot (gpt-5.4): "Unsupported parameter: 'max_tokens' is not supported with this
    model. Use 'max_completion_tokens' instead."."""
    return "'max_tokens' is not supported" if "max_tokens" in body else None


def mistral_extra_fields(body: Body) -> str | None:
    """25 Mistral 422: extra_forbidden at ["body","store"] and ["body","max_completion_tokens"]."""
    extra = {"store", "max_completion_tokens"} & set(body)
    return f"Extra inputs are not permitted: {sorted(extra)}" if extra else None


def fireworks_message_keys(body: Body) -> str | None:
    """26 Fireworks: "Extra inputs are not permitted: messages[2].cot_id
    messages[2].cot_summary"."""
    for message in messages_of(body):
        if {"cot_id", "cot_summary"} & set(message):
            return "Extra inputs are not permitted"
    return None


def siliconflow_required(body: Body) -> str | None:
    """27 SiliconFlow: "The `required` option for tool_choice is not yet supported."."""
    return "required is not supported" if body.get("tool_choice") == "required" else None


def gemini_store(body: Body) -> str | None:
    """28 Gemini: "Invalid JSON payload received. Unknown name "store": Cannot find field."."""
    return 'Unknown name "store"' if "store" in body else None


def gemini_json_mode_with_tools(body: Body) -> str | None:
    """29 Gemini: "Function calling with a response mime type: 'application/json' is
    unsupported"."""
    kind = (body.get("response_format") or {}).get("type")
    if body.get("tools") and kind in ("json_object", "json_schema"):
        return "Function calling with a response mime type: 'application/json' is unsupported"
    return None


def cohere_strict(body: Body) -> str | None:
    """30 Cohere via OpenRouter: "unknown field: parameter 'strict' is not a valid field"."""
    for tool in body.get("tools", []):
        if "strict" in (tool.get("function") or {}) or "strict" in tool:
            return "parameter 'strict' is not a valid field"
    return None


def gpt5_temperature(body: Body) -> str | None:
    """31 OpenAI gpt-5: "Unsupported value: 'temperature' does not support 0.5 with this model.
    Only the default (1) value is supported."."""
    if "temperature" in body and body["temperature"] != 1:
        return "'temperature' does not support this value"
    return None


def one_image(body: Body) -> str | None:
    """32 Kimi via OpenRouter: "Model 'moonshotai/kimi-k2.6' supports at most 1 image per
    prompt."."""
    parts = [
        part
        for message in messages_of(body)
        if isinstance(message.get("content"), list)
        for part in message["content"]
    ]
    images = sum(1 for part in parts if isinstance(part, dict) and part.get("type") == "image_url")
    return "supports at most 1 image per prompt" if images > 1 else None


def unpersisted_reasoning(body: Body) -> str | None:
    """33 OpenAI Responses, store false: "Item with id 'rs_…' not found. Items are not persisted
    when `store` is set to false."."""
    if body.get("store") is not False:
        return None
    for item in body.get("input", []):
        if item.get("type") == "item_reference":
            return "Item not found"
        if item.get("type") == "reasoning" and item.get("id") and not item.get("encrypted_content"):
            return "Item not found"
    return None


def item_id_prefix(kind: str, prefix: str) -> Judge:
    def judge(body: Body) -> str | None:
        """34/35 OpenAI/Copilot Responses: "Invalid 'input[N].id': '…'. Expected an ID that
        begins with '<prefix>'."."""
        for item in body.get("input", []):
            if item.get("type") == kind and "id" in item and not str(item["id"]).startswith(prefix):
                return f"Expected an ID that begins with '{prefix}'"
        return None

    return judge


def azure_encrypted_content(body: Body) -> str | None:
    """36 Azure (gpt-4o): "Encrypted content is not supported with this model." (param
    include)."""
    if "reasoning.encrypted_content" in (body.get("include") or []):
        return "Encrypted content is not supported with this model."
    return None


def input_ids_64(body: Body) -> str | None:
    """37 Copilot Responses: "Invalid 'input[2].id': string too long. Expected a string with
    maximum length 64"."""
    for item in body.get("input", []):
        if isinstance(item.get("id"), str) and len(item["id"]) > 64:
            return "input id too long (64)"
    return None


def blocks_of(body: Body) -> Iterator[Body]:
    """Every content block of a Messages body: system, messages, tool results' own."""
    system = body.get("system")
    yield from (b for b in system if isinstance(b, dict)) if isinstance(system, list) else ()
    for message in messages_of(body):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            yield block
            inner = block.get("content") if block.get("type") == "tool_result" else None
            yield from (b for b in inner if isinstance(b, dict)) if isinstance(inner, list) else ()


def empty_cached_text(body: Body) -> str | None:
    """38 Anthropic: "cache_control cannot be set for empty text blocks"."""
    for block in blocks_of(body):
        if block.get("type") == "text" and not str(block.get("text", "")).strip():
            return "cache_control cannot be set for empty text blocks"
    return None


def cache_control_ttl(body: Body) -> str | None:
    """39 Bedrock via LiteLLM: "messages.0.content.3.text.cache_control.ephemeral.ttl: Extra
    inputs are not permitted"."""
    marked = [*blocks_of(body), *body.get("tools", [])]
    if any("ttl" in (block.get("cache_control") or {}) for block in marked):
        return "cache_control.ephemeral.ttl: Extra inputs are not permitted"
    return None


def temperature_and_top_p(body: Body) -> str | None:
    """40 Anthropic (Claude 4.6): "`temperature` and `top_p` cannot both be specified for this
    model."."""
    if "temperature" in body and "top_p" in body:
        return "`temperature` and `top_p` cannot both be specified"
    return None


def four_breakpoints(body: Body) -> str | None:
    """41 Anthropic: "A maximum of 4 blocks with cache_control may be provided. Found 5."."""
    marked = [*blocks_of(body), *body.get("tools", [])]
    count = sum(1 for block in marked if "cache_control" in block)
    return (
        f"A maximum of 4 blocks with cache_control may be provided. Found {count}."
        if count > 4
        else None
    )


def function_tools_only(body: Body) -> str | None:
    """42 Fireworks' Anthropic endpoint: "Input should be 'function', 'web_search_preview' or
    'code_interpreter', field: 'tools[8].type'"."""
    for tool in body.get("tools", []):
        if "type" in tool and tool["type"] not in ("custom", "function"):
            return "Input should be 'function'"
    return None


def user_or_assistant_roles(body: Body) -> str | None:
    """43-45 Anthropic-format endpoints: "messages[1].role: unknown variant `system`, expected
    `user` or `assistant`"."""
    for message in messages_of(body):
        if message.get("role") not in ("user", "assistant"):
            return f"unknown variant `{message.get('role')}`"
    return None


def deepseek_tool_turn_reasoning(body: Body) -> str | None:
    """46 DeepSeek V4, direct: "The `reasoning_content` in the thinking mode must be passed back
    to the API." for a tool-call turn without the field ("" is taken when it is unknown)."""
    if (body.get("thinking") or {}).get("type") == "disabled":
        return None
    for message in messages_of(body):
        calls = message.get("role") == "assistant" and message.get("tool_calls")
        if calls and not isinstance(message.get("reasoning_content"), str):
            return "reasoning_content must be passed back"
    return None


def mistral_text_beside_calls(body: Body) -> str | None:
    """47 Mistral (devstral): a bare 422 Unprocessable Entity once an assistant turn with text
    and tool_calls is replayed; the same turn with content "" is accepted."""
    for message in messages_of(body):
        calls = message.get("role") == "assistant" and message.get("tool_calls")
        if calls and not empty(message.get("content")):
            return "Unprocessable Entity"
    return None


def message_id_without_reasoning_id(body: Body) -> str | None:
    """48 OpenAI Responses (GPT-5.6): "Item 'msg_…' of type 'message' was provided without its
    required 'reasoning' item: 'rs_…'." for a message id whose response's reasoning item is
    replayed without its id."""
    reasoning: Body | None = None  # the reasoning item of the output group a message is in
    for item in body.get("input", []):
        kind = item.get("type", "message")
        if kind == "reasoning":
            reasoning = item
        elif kind == "function_call_output" or item.get("role") in ("user", "system", "developer"):
            reasoning = None  # a tool output or a user turn: the next group starts after it
        elif kind == "message" and item.get("id") and reasoning and not reasoning.get("id"):
            return f"Item '{item['id']}' was provided without its required 'reasoning' item"
    return None


def function_tools_only_responses(body: Body) -> str | None:
    """49 Command Code Responses: "Only `type:"function"` tools are supported on this endpoint."
    (param tools.N.type)."""
    for at, tool in enumerate(body.get("tools", [])):
        if tool.get("type") != "function":
            return f"Only function tools are supported (tools.{at}.type)"
    return None


def known_input_items(body: Body) -> str | None:
    """50 Kimi Code Responses: "Invalid request Error" for an input holding Codex's
    `tool_search_call` / `tool_search_output` items."""
    for item in body.get("input", []):
        if item.get("type") in ("tool_search_call", "tool_search_output"):
            return "Invalid request Error"
    return None


def minimax_output_call_found(body: Body) -> str | None:
    """51 MiniMax Responses: "invalid params, tool result's tool id(…) not found (2013)" for a
    function_call_output with no function_call of its call_id before it."""
    calls: set[Any] = set()
    for item in body.get("input", []):
        if item.get("type") == "function_call":
            calls.add(item.get("call_id"))
        elif item.get("type") == "function_call_output" and item.get("call_id") not in calls:
            return f"tool result's tool id({item.get('call_id')}) not found"
    return None


def web_search_content_types(body: Body) -> str | None:
    """52 abliteration.ai Responses: "This object contains an unsupported field." (param
    tools.14.search_content_types)."""
    for at, tool in enumerate(body.get("tools", [])):
        if "search_content_types" in tool:
            return f"This object contains an unsupported field. (tools.{at}.search_content_types)"
    return None


def deepseek_anthropic_tool_types(body: Body) -> str | None:
    """53 DeepSeek's Anthropic endpoint: "tools[0]: unknown variant `custom`, expected
    `web_search_20250305` or `web_search_20260209`"."""
    for at, tool in enumerate(body.get("tools", [])):
        if "type" in tool and tool["type"] not in ("web_search_20250305", "web_search_20260209"):
            return f"tools[{at}]: unknown variant `{tool['type']}`"
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
    "21-smart-composer-305-perplexity-consecutive-users": perplexity_alternation,
    "22-oh-my-pi-6925-lmstudio-named-tool-choice": lmstudio_tool_choice,
    "23-nanobot-1487-dashscope-malformed-arguments": json_arguments,
    "24-copilot-api-172-copilot-max-tokens": no_max_tokens,
    "25-openclaude-739-mistral-store-max-completion-tokens": mistral_extra_fields,
    "26-vscode-335780-fireworks-cot-fields": fireworks_message_keys,
    "27-openmanus-30-siliconflow-required-tool-choice": siliconflow_required,
    "28-openhanako-394-gemini-store-field": gemini_store,
    "29-ai-manus-101-gemini-json-mode-with-tools": gemini_json_mode_with_tools,
    "30-openrouter-examples-71-cohere-strict-tools": cohere_strict,
    "31-code-gpt-docs-445-openai-gpt5-temperature": gpt5_temperature,
    "32-omniroute-3044-openrouter-kimi-one-image": one_image,
    "33-opencode-4445-openai-reasoning-id-without-store": unpersisted_reasoning,
    "34-sub2api-3785-function-call-item-id-prefix": item_id_prefix("function_call", "fc"),
    "35-copilot-ls-46-copilot-reasoning-id-prefix": item_id_prefix("reasoning", "rs"),
    "36-pydantic-ai-2865-azure-encrypted-content-include": azure_encrypted_content,
    "37-oh-my-pi-284-copilot-input-id-too-long": input_ids_64,
    "38-claude-code-54013-anthropic-cache-control-empty-text": empty_cached_text,
    "39-claude-code-12122-bedrock-cache-control-ttl": cache_control_ttl,
    "40-chatterui-564-anthropic-temperature-top-p": temperature_and_top_p,
    "41-opencode-claude-auth-123-anthropic-five-cache-breakpoints": four_breakpoints,
    "42-shelley-242-fireworks-anthropic-web-search-tool": function_tools_only,
    "43-awesome-deepseek-agent-167-deepseek-anthropic-system-role": user_or_assistant_roles,
    "44-vllm-44000-vllm-anthropic-system-role": user_or_assistant_roles,
    "45-minimax-m27-43-minimax-anthropic-system-role": user_or_assistant_roles,
    "46-agentiloop-22-deepseek-tool-turn-without-reasoning": deepseek_tool_turn_reasoning,
    "47-copilot-cli-4884-mistral-content-with-tool-calls": mistral_text_beside_calls,
    "48-hermes-agent-97442-openai-message-id-without-reasoning-id": message_id_without_reasoning_id,
    "49-command-code-885-responses-builtin-tool-types": function_tools_only_responses,
    "50-cliproxyapi-5647-kimi-responses-tool-search-items": known_input_items,
    "51-agent-zero-1754-minimax-responses-orphan-output": minimax_output_call_found,
    "52-opencodex-3204-responses-web-search-content-types": web_search_content_types,
    "53-9router-3905-deepseek-anthropic-custom-tool-type": deepseek_anthropic_tool_types,
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


#: Reports whose only repair drops something the client sent (lossy): the route opts in to
#: that rule (``recover.lossy``), as an operator of such an endpoint would. Without it the
#: refusal stands (``test_a_lossy_repair_waits_for_the_route_to_opt_in``).
LOSSY: dict[str, list[str]] = {
    # Kimi via OpenRouter takes one image per prompt: the earlier image becomes a placeholder.
    "32-omniroute-3044-openrouter-kimi-one-image": ["image-parts"],
}
#: What each opt-in lets go, judged here: the images but the last so many (every text stays).
IMAGES_KEPT: dict[str, int] = {"32-omniroute-3044-openrouter-kimi-one-image": 1}


def config_for(
    fixture: dict[str, Any], profile: str | None, *, lossy: bool = True
) -> dict[str, Any]:
    """The default config (recovery on, as shipped), under the profile the host selects or
    ``profile``; a route that opts in to the lossy repair the report needs (``LOSSY``)."""
    chosen = profile or profile_for_upstream(fixture["host"])[0]
    config: dict[str, Any] = {"profile": chosen}
    if lossy and fixture["id"] in LOSSY:
        config["recover"] = {"lossy": LOSSY[fixture["id"]]}
    return config


HEADERS = {"Authorization": "Bearer sk-field-fixture", "Content-Type": "application/json"}

Servers = Callable[..., Awaitable[TestServer]]
Clients = Callable[..., Awaitable[TestClient[Any, Any]]]


def assert_accepted(
    fixture: dict[str, Any], state: Strict, status: int, text: str, profile: str | None
) -> None:
    """Accepted, and nothing lost: under the host's profile, but what the report's
    ``may_remove`` lists (a profile may drop what its provider refuses); under passthrough,
    nothing at all; and under either, where the route opted in to a lossy repair
    (``recover.lossy``), only what ``IMAGES_KEPT`` lets go."""
    judge = JUDGES[fixture["id"]]
    assert status == 200, (status, text[:300])
    sent = state.received[-1]
    assert judge(sent) is None
    may_remove = fixture["may_remove"] if profile is None else []
    kept = IMAGES_KEPT.get(fixture["id"])
    missing = lost(fixture["request"], sent, fixture["api"], may_remove, images_kept=kept)
    assert missing == [], missing


#: The two runs of each report: under the profile its host selects, and under passthrough.
RUNS: dict[str, str | None] = {"host-profile": None, "passthrough": "passthrough"}

#: The runs chatmend does not get accepted yet, each with what it lacks (the report says what
#: would close it): the case must fail (``xfail(strict=True)``), so the gap stays on record and a
#: change that closes it shows as an unexpected pass, to be removed from here.
GAPS: dict[tuple[str, str], str] = {
    ("47-copilot-cli-4884-mistral-content-with-tool-calls", "host-profile"): (
        "no rule of the mistral profile empties or splits the text of an assistant that carries "
        "tool_calls (docs/providers.md#question-7 records the refusal as an open question)"
    ),
    ("47-copilot-cli-4884-mistral-content-with-tool-calls", "passthrough"): (
        "a bare 'Unprocessable Entity' names nothing: recovery never retries it"
    ),
    ("50-cliproxyapi-5647-kimi-responses-tool-search-items", "host-profile"): (
        "no Responses rule (none in the kimi profile) removes or renders input items of types "
        "the endpoint does not know (tool_search_call, tool_search_output)"
    ),
    ("50-cliproxyapi-5647-kimi-responses-tool-search-items", "passthrough"): (
        "'Invalid request Error' names nothing: recovery never retries it"
    ),
}


def runs() -> list[Any]:
    """Every report under each run, a case on record in ``GAPS`` marked to fail strictly."""
    return [
        pytest.param(
            name,
            profile,
            id=f"{name}-{run}",
            marks=[pytest.mark.xfail(raises=AssertionError, strict=True, reason=GAPS[name, run])]
            if (name, run) in GAPS
            else [],
        )
        for run, profile in RUNS.items()
        for name in sorted(FIXTURES)
    ]


def test_every_gap_names_a_report_and_a_run() -> None:
    assert [key for key in GAPS if key[0] not in FIXTURES or key[1] not in RUNS] == []


@pytest.mark.parametrize(("name", "profile"), runs())
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


@pytest.mark.parametrize("name", sorted(LOSSY))
async def test_a_lossy_repair_waits_for_the_route_to_opt_in(
    name: str, aiohttp_server: Servers, aiohttp_client: Clients
) -> None:
    """Without ``recover.lossy`` the retry never drops what the client sent: the refusal is
    relayed, the client's bytes the only ones the upstream saw."""
    fixture = FIXTURES[name]
    state = Strict([])
    upstream = await aiohttp_server(strict_app(fixture, state))
    settings = config_for(fixture, "passthrough", lossy=False)
    proxy = await aiohttp_client(
        create_app(parse_config(settings, default_upstream=base_url(upstream)))
    )
    response = await proxy.post(
        PATHS[fixture["api"]], data=orjson.dumps(fixture["request"]), headers=HEADERS
    )
    assert response.status == fixture["status"]
    assert state.received == [fixture["request"]]


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
