"""A rewritten body the upstream still rejects: the provider's index mapped back to the
client's (rules/providers/provenance.py), in the log and the ``X-Chatmend-Client-Index`` header, the
provider's body relayed unchanged."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from proxy.config import parse_config
from proxy.server.app import create_app
from rules.chat import RULES
from rules.engine.pipeline import default_steps, run_rules
from rules.providers.provenance import cited_index, client_indices
from tests.budget import examples
from tests.builders import call, result
from tests.conftest import base_url
from tests.transcripts import BROKEN, USER, chat

Server = Callable[..., Awaitable[TestServer]]
Client = Callable[..., Awaitable[TestClient[Any, Any]]]
STEPS = default_steps(RULES)


@pytest.mark.parametrize(
    ("text", "field", "index"),
    [
        # the formats of docs/providers.md, "Empty tool_calls" (OpenAI), "Orphan tool result"
        # (OpenAI's param), "Duplicate tool_call_id" (DeepSeek), pydantic-style locations
        ("Invalid 'messages[2].tool_calls': empty array.", "messages", 2),
        ('{"param": "messages.[3].role"}', "messages", 3),
        ("Duplicate value for 'tool_call_id' of in message[4]", "messages", 4),
        ("messages.70.tool_calls.0.function.arguments: arguments must be", "messages", 70),
        ("input[5]: unknown item", "input", 5),
        ("input[5]: unknown item", "messages", None),
        ("No index here", "messages", None),
    ],
)
def test_the_cited_index(text: str, field: str, index: int | None) -> None:
    assert cited_index(text, field) == index


def test_a_merge_before_the_cited_message_shifts_it_back() -> None:
    messages = BROKEN["split_assistant_turn"]
    sent = run_rules(messages, STEPS).messages
    assert len(sent) == len(messages) - 1  # the split turn merged into one
    assert client_indices(messages, sent) == [0, 1, 3, 4, 5]


def test_an_inserted_message_maps_to_none() -> None:
    """unanswered-tool-calls inserts a stub result: chatmend's, not the client's."""
    messages = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "ls", "{}")]},
        {"role": "user", "content": "Go on."},
    ]
    sent = run_rules(messages, STEPS).messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert client_indices(messages, sent) == [0, 1, None, 2]


def test_a_dropped_message_and_identical_messages() -> None:
    """An orphan result is dropped; two identical user messages keep their own places."""
    again = {"role": "user", "content": "Again."}
    messages = [USER, result("nobody", "stray"), again, {"role": "assistant", "content": "k"}]
    messages += [again]
    sent = run_rules(messages, STEPS).messages
    assert client_indices(messages, sent) == [0, 2, 3, 4]


@settings(max_examples=examples(2), deadline=None)
@given(st.lists(st.sampled_from(sorted(BROKEN)), min_size=1, max_size=4))
def test_every_kept_message_maps_to_itself(kinds: list[str]) -> None:
    """Over concatenated broken transcripts: each index maps inside the client's list, in
    order, and a message the rules left as it was maps to the client's equal message."""
    messages = [message for kind in kinds for message in BROKEN[kind]]
    sent = run_rules(messages, STEPS).messages
    mapped = client_indices(messages, sent)
    assert len(mapped) == len(sent)
    known = [index for index in mapped if index is not None]
    assert known == sorted(set(known))
    assert all(0 <= index < len(messages) for index in known)
    for item, index in zip(sent, mapped, strict=True):
        if any(item is message for message in messages):  # a message no rule touched
            assert index is not None and messages[index] == item


async def _rejecting(aiohttp_server: Server, text: str) -> tuple[list[bytes], str]:
    """An upstream that rejects every chat request with an error citing an index."""
    seen: list[bytes] = []

    async def reject(request: web.Request) -> web.Response:
        seen.append(await request.read())
        error = {"message": text, "type": "invalid_request_error", "code": None}
        return web.json_response({"error": error}, status=400)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", reject)
    return seen, base_url(await aiohttp_server(app))


async def test_the_header_and_log_map_the_providers_index_to_the_clients(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    text = "Invalid 'messages[3].content': something the rules do not repair."
    seen, url = await _rejecting(aiohttp_server, text)
    proxy = await aiohttp_client(create_app(parse_config({}, default_upstream=url)))
    with capture_logs() as logs:
        response = await proxy.post(
            "/v1/chat/completions", data=chat(BROKEN["split_assistant_turn"])
        )
    assert response.status == 400
    assert (await response.json())["error"]["message"] == text  # unchanged
    assert len(orjson.loads(seen[0])["messages"]) == 5  # the merged list was sent
    rules = "consecutive-assistant-messages"
    assert response.headers["X-Chatmend-Client-Index"] == f"messages[3]=messages[4]; rules={rules}"
    [event] = [entry for entry in logs if entry["event"] == "upstream_rejected_rewritten"]
    assert (event["cited"], event["client_index"], event["rules"]) == ("messages[3]", 4, [rules])
    assert event["inserted_by_chatmend"] is False
    assert text not in orjson.dumps(logs, default=str).decode()  # the provider's text stays out


async def test_an_inserted_message_is_named_as_such(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    _, url = await _rejecting(aiohttp_server, "messages.2: bad tool message")
    proxy = await aiohttp_client(create_app(parse_config({}, default_upstream=url)))
    messages = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "ls", "{}")]},
        {"role": "user", "content": "Go on."},
    ]
    response = await proxy.post("/v1/chat/completions", data=chat(messages))
    assert response.status == 400
    header = response.headers["X-Chatmend-Client-Index"]
    assert header == "messages[2]=inserted; rules=unanswered-tool-calls"


async def test_an_unrewritten_body_gets_no_mapping(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    _, url = await _rejecting(aiohttp_server, "Invalid 'messages[0].content'.")
    proxy = await aiohttp_client(create_app(parse_config({}, default_upstream=url)))
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=chat([USER]))
    assert response.status == 400
    assert "X-Chatmend-Client-Index" not in response.headers
    assert "upstream_rejected_rewritten" not in [entry["event"] for entry in logs]
