"""Recovery that adapts (issue 26): on by default, robust to the provider's wording, escalated
for a refusal that names a message but no known class.

The strict fake here refuses like DeepSeek (the profile's contract decides *what* is refused) but
in its own words, with the id, the key, the field path and the position filled in: the wordings
issue 26 found logged ``unclassified`` and never recovered. The proxy runs the default config
under ``profile: passthrough`` (no rule on: only recovery can fix the request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.cli import main as cli_main
from proxy.config import parse_config
from proxy.observe.metrics import Metrics
from proxy.recovery.learned import LearnedRepairs
from proxy.recovery.retry import ESCALATED, RECOVERED_HEADER
from proxy.server.app import LEARNED_KEY, create_app
from proxy.server.reload import reload_config
from rules.providers.contract import Violation, violations
from rules.providers.profiles import PROFILES
from tests.builders import call, result
from tests.conftest import base_url
from tests.fake_upstream import COMPLETION
from tests.proxy.test_hostile import _post
from tests.proxy.test_metrics import scrape, value
from tests.redis_server import RedisServer
from tests.transcripts import BROKEN, USER, chat
from tools.emulate.errors import provider_error

Client = TestClient[Any, Any]
Server = Callable[..., Awaitable[TestServer]]
ClientFactory = Callable[..., Awaitable[Client]]

#: DeepSeek's contract, plus the checks a stricter relay adds (a typed call, known keys only).
CONTRACT = {
    **PROFILES["deepseek"].contract,
    "missing_tool_call_type": {},
    "unknown_field": {"allow": ["reasoning_content"]},
}
_KNOWN = {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content"}


def _extra_key(message: dict[str, Any]) -> str:
    return next(key for key in message if key not in _KNOWN)


def _worded(found: Violation, messages: list[Any], pydantic: bool) -> web.Response:
    """The refusal of ``found`` in this fake's words (not the catalogue's)."""
    i = found.index if found.index is not None else 0
    message = messages[i]
    code = found.code
    if code == "unknown_field" and pydantic:
        detail = {
            "type": "extra_forbidden",
            "loc": ["body", "messages", i, _extra_key(message)],
            "msg": "Extra inputs are not permitted",
            "input": "stop",
        }
        return web.json_response({"detail": [detail]}, status=422)
    texts = {
        "duplicate_tool_result": lambda: (
            f"Duplicate value for 'tool_call_id' of {message['tool_call_id']} in message[{i}]"
        ),
        "invalid_arguments": lambda: (
            f"Invalid 'messages[{i}].tool_calls[0].function.arguments': Failed to deserialize "
            f"the arguments: EOF while parsing an object at line 1 column "
            f"{len(message['tool_calls'][0]['function']['arguments'])}"
        ),
        "missing_tool_call_type": lambda: (
            f"Invalid 'messages[{i}].tool_calls[0].type': expected 'function'."
        ),
        "unknown_role": lambda: f"Invalid 'messages[{i}].role': unknown role '{message['role']}'.",
        "unknown_field": lambda: f"unknown field(s) ['{_extra_key(message)}']",
    }
    text = texts[code]() if code in texts else found.message
    return provider_error(400, text)


@dataclass
class Worded:
    """A strict upstream with its own wording; it records every body it receives."""

    pydantic: bool = False
    received: list[bytes] = field(default_factory=list)

    def app(self) -> web.Application:
        async def completions(request: web.Request) -> web.Response:
            body = await request.read()
            self.received.append(body)
            payload = orjson.loads(body)
            found = violations(payload, CONTRACT)
            if found:
                return _worded(found[0], payload["messages"], self.pydantic)
            return web.json_response(COMPLETION)

        app = web.Application()
        app.router.add_post("/chat/completions", completions)
        app.router.add_post("/v1/chat/completions", completions)
        return app


_TYPELESS = call("call_u", "ls", "{}")
del _TYPELESS["type"]

#: session -> (the body, the class the refusal is recovered as)
SESSIONS: dict[str, tuple[bytes, str]] = {
    "a reused id": (chat(BROKEN["reused_tool_call_ids"]), "duplicate_tool_result"),
    "cut-off arguments": (chat(BROKEN["truncated_arguments"]), "invalid_arguments"),
    "a call without its type": (
        chat(
            [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [_TYPELESS]},
                result("call_u", "a.py"),
                {"role": "user", "content": "Go on."},
            ]
        ),
        "missing_tool_call_type",
    ),
    "a developer message": (
        chat([{"role": "developer", "content": "Be brief."}, USER]),
        "unknown_role",
    ),
    "finish_reason copied into history": (
        chat(
            [
                USER,
                {"role": "assistant", "content": "Done.", "finish_reason": "stop"},
                {"role": "user", "content": "Thanks."},
            ]
        ),
        # the refusal names the key: only that key goes (issue 35), not the allowlist
        "unsupported_field",
    ),
}

#: A client's key: learned repairs are kept per client (proxy/recovery/learned.py).
KEY_A = {"Authorization": "Bearer sk-client-a"}
KEY_B = {"Authorization": "Bearer sk-client-b"}


async def _start(
    aiohttp_server: Server, aiohttp_client: ClientFactory, upstream: Worded, **config: Any
) -> Client:
    server = await aiohttp_server(upstream.app())
    settings = {"profile": "passthrough", **config}
    return await aiohttp_client(
        create_app(parse_config(settings, default_upstream=base_url(server)))
    )


#: session -> (the index, the field path) the refusal names, as logged
PATHS: dict[str, tuple[int | None, str | None]] = {
    "a reused id": (4, "messages[4]"),
    "cut-off arguments": (1, "messages[1].tool_calls[0].function.arguments"),
    "a call without its type": (1, "messages[1].tool_calls[0].type"),
    "a developer message": (0, "messages[0].role"),
    "finish_reason copied into history": (None, None),
}

#: Every session in the OpenAI envelope; the unknown key also as a pydantic 422.
WORDED = [(session, False) for session in sorted(SESSIONS)] + [
    ("finish_reason copied into history", True)
]


@pytest.mark.parametrize(("session", "pydantic"), WORDED)
async def test_each_single_defect_session_succeeds_through_one_recovery_by_default(
    session: str, pydantic: bool, aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    body, error_class = SESSIONS[session]
    upstream = Worded(pydantic=pydantic)
    proxy = await _start(aiohttp_server, aiohttp_client, upstream)
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 200, await response.text()
    assert len(upstream.received) == 2
    assert upstream.received[0] == body  # passthrough: the first went as it came
    assert violations(orjson.loads(upstream.received[1]), CONTRACT) == []
    assert response.headers[RECOVERED_HEADER].endswith(f"class={error_class}")
    (recovered,) = [e for e in logs if e["event"] == "request_recovered"]
    assert recovered["error_class"] == error_class
    index, path = (1, "messages[1].finish_reason") if pydantic else PATHS[session]
    assert recovered["index"] == index and recovered["path"] == path
    assert "unclassified" not in str(logs)


async def test_a_clean_request_reaches_the_strict_upstream_byte_for_byte(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Worded()
    proxy = await _start(aiohttp_server, aiohttp_client, upstream)
    body = chat([USER])
    response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 200
    assert upstream.received == [body]
    assert RECOVERED_HEADER not in response.headers


async def test_the_per_route_off_switch_holds(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Worded()
    proxy = await _start(aiohttp_server, aiohttp_client, upstream, recover={"enabled": False})
    body, _ = SESSIONS["a developer message"]
    response = await proxy.post("/v1/chat/completions", data=body)
    assert response.status == 400
    assert upstream.received == [body]


# --- escalation ------------------------------------------------------------------------------


@dataclass
class Refusing:
    """Refuses the first request it receives with ``text`` (``status``), accepts the rest."""

    text: str
    status: int = 400
    received: list[bytes] = field(default_factory=list)

    def app(self) -> web.Application:
        async def completions(request: web.Request) -> web.Response:
            self.received.append(await request.read())
            if len(self.received) == 1:
                return provider_error(self.status, self.text)
            return web.json_response(COMPLETION)

        app = web.Application()
        app.router.add_post("/v1/chat/completions", completions)
        return app


async def _refused(
    aiohttp_server: Server, aiohttp_client: ClientFactory, upstream: Refusing, body: bytes
) -> tuple[ClientResponse, list[Any], Client]:
    server = await aiohttp_server(upstream.app())
    proxy = await aiohttp_client(
        create_app(parse_config({"profile": "passthrough"}, default_upstream=base_url(server)))
    )
    with capture_logs() as logs:
        response = await proxy.post("/v1/chat/completions", data=body)
        await response.read()
    return response, logs, proxy


#: A dangling call and a split turn in one session, refused in words no class knows.
DANGLING = chat(
    [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("call_d", "ls", "{}")]},
        {"role": "user", "content": "Go on."},
    ]
)


#: A result that strayed past the next user message: moving it home keeps everything (safe).
DISPLACED = chat(
    [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("call_d", "ls", "{}")]},
        {"role": "user", "content": "Go on."},
        result("call_d", "a.py"),
    ]
)


async def test_an_unknown_refusal_that_names_a_tool_call_is_escalated_once(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Refusing("Bad request: messages[1].tool_calls[0] has no matching tool response.")
    response, logs, proxy = await _refused(aiohttp_server, aiohttp_client, upstream, DISPLACED)
    assert response.status == 200
    assert len(upstream.received) == 2
    retried = orjson.loads(upstream.received[1])["messages"]
    assert [m["role"] for m in retried] == ["user", "assistant", "tool", "user"]
    assert retried[2] == {"role": "tool", "tool_call_id": "call_d", "content": "a.py"}
    assert response.headers[RECOVERED_HEADER].endswith(f"class={ESCALATED}")
    (recovered,) = [e for e in logs if e["event"] == "request_recovered"]
    assert recovered["error_class"] == ESCALATED and recovered["index"] == 1
    samples = await scrape(proxy)
    labels = {"route": "default", "error_class": ESCALATED, "result": "recovered"}
    assert value(samples, "chatmend_recovery_retries_total", **labels) == 1


async def test_an_escalation_writes_no_stub_and_drops_nothing(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """Issue 35: an unclassified refusal gets only the safe changes of what it names. A call
    with no result would need a stub (chatmend's words) and an orphan a drop: neither is
    sent on the upstream's unknown word, and the first answer stands."""
    upstream = Refusing("Bad request: messages[1].tool_calls[0] has no matching tool response.")
    with capture_logs() as logs:
        response, _, _ = await _refused(aiohttp_server, aiohttp_client, upstream, DANGLING)
    assert response.status == 400
    assert upstream.received == [DANGLING]
    assert not [e for e in logs if e["event"] == "request_recovered"]


async def test_an_unknown_refusal_naming_a_key_strips_only_by_the_allowlist(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Refusing("Unrecognized request argument supplied: messages[1].finish_reason")
    body, _ = SESSIONS["finish_reason copied into history"]
    response, _, _ = await _refused(aiohttp_server, aiohttp_client, upstream, body)
    assert response.status == 200
    retried = orjson.loads(upstream.received[1])["messages"]
    assert retried[1] == {"role": "assistant", "content": "Done."}
    assert retried[0] == USER and retried[2] == {"role": "user", "content": "Thanks."}


@pytest.mark.parametrize(
    "text",
    [
        "This model's maximum context length is 65536 tokens; messages[1] makes it 70000.",
        "Incorrect API key provided for messages[1].",
        "The model `messages[1].tool_calls` does not exist or you do not have access to it.",
        "Rate limit reached; retry messages[1] later.",
        "Request too large for messages[1].",
        "Something is wrong.",  # names nothing
    ],
)
async def test_a_refusal_about_something_else_is_never_retried(
    text: str, aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Refusing(text)
    response, logs, _ = await _refused(aiohttp_server, aiohttp_client, upstream, DANGLING)
    assert response.status == 400
    assert upstream.received == [DANGLING]
    assert not [e for e in logs if e["event"].startswith("recover")]


async def test_an_escalation_that_changes_nothing_is_not_sent(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Refusing("Invalid 'messages[0].tool_calls[0]': not allowed here.")
    body = chat([USER])
    response, _, _ = await _refused(aiohttp_server, aiohttp_client, upstream, body)
    assert response.status == 400
    assert upstream.received == [body]


async def test_a_422_of_a_known_class_is_recovered(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Refusing("Invalid 'messages[1].tool_calls[0].type': expected 'function'.", 422)
    body, _ = SESSIONS["a call without its type"]
    response, _, _ = await _refused(aiohttp_server, aiohttp_client, upstream, body)
    assert response.status == 200
    retried = orjson.loads(upstream.received[1])["messages"]
    assert retried[1]["tool_calls"][0]["type"] == "function"


async def test_the_default_profile_passes_an_upstream_that_refuses_unknown_keys(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """The default config (the ``deepseek`` profile, recovery on) in front of a strict relay
    that refuses unknown message keys: the profile forwards ``finish_reason`` (no DeepSeek
    refusal is on record), the relay refuses it, recovery strips it; a clean request goes
    byte for byte."""
    for pydantic in (False, True):
        upstream = Worded(pydantic=pydantic)
        server = await aiohttp_server(upstream.app())
        proxy = await aiohttp_client(
            create_app(parse_config({}, default_upstream=base_url(server)))
        )
        clean = chat(
            [USER, {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Go."}]
        )
        response = await proxy.post("/v1/chat/completions", data=clean)
        assert response.status == 200
        assert upstream.received == [clean]
        assert response.headers["X-Chatmend-Changes"] == "0"
        body, _ = SESSIONS["finish_reason copied into history"]
        response = await proxy.post("/v1/chat/completions", data=body)
        assert response.status == 200, await response.text()
        assert response.headers[RECOVERED_HEADER].endswith("class=unsupported_field")
        retried = orjson.loads(upstream.received[-1])["messages"]
        assert retried[1] == {"role": "assistant", "content": "Done."}


# --- learned repairs -------------------------------------------------------------------------


def _learned(samples: dict[Any, float]) -> set[tuple[str, str, str, str]]:
    """``chatmend_learned_repairs`` now: (route, model, rule, error class) with value 1."""
    found = set()
    for (name, labels), sample in samples.items():
        if name == "chatmend_learned_repairs" and sample == 1:
            given = dict(labels)
            found.add((given["route"], given["model"], given["rule"], given["error_class"]))
    return found


async def test_a_second_request_of_the_same_kind_reaches_the_upstream_repaired(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    """A stuck session pays one refusal: the repair that recovered the first request is applied
    before sending to the next of the same client, route and model (one upstream request), the
    whole repair as it ran (a developer message renamed by ``developer-role``, with the
    ``unknown-roles`` that stood with it), never a wider one."""
    upstream = Worded()
    proxy = await _start(aiohttp_server, aiohttp_client, upstream)
    body, _ = SESSIONS["a developer message"]
    with capture_logs() as logs:
        first = await proxy.post("/v1/chat/completions", data=body, headers=KEY_A)
        assert first.status == 200 and len(upstream.received) == 2
        second = await proxy.post("/v1/chat/completions", data=body, headers=KEY_A)
    assert second.status == 200
    assert len(upstream.received) == 3  # one upstream request for the second
    assert upstream.received[2] == upstream.received[1]  # repaired as the retry was
    assert RECOVERED_HEADER not in second.headers
    assert "developer-role" in second.headers["X-Chatmend-Changes"]
    (learned,) = [e for e in logs if e["event"] == "recovery_learned"]
    assert learned["rules"] == ["developer-role", "unknown-roles"]
    assert learned["error_class"] == "unknown_role"
    assert learned["model"] == "deepseek-chat" and learned["route"] == "default"
    samples = await scrape(proxy)
    assert _learned(samples) == {
        ("default", "deepseek-chat", "developer-role", "unknown_role"),
        ("default", "deepseek-chat", "unknown-roles", "unknown_role"),
    }
    assert (
        value(
            samples, "chatmend_recovery_learned_total", route="default", error_class="unknown_role"
        )
        == 1
    )
    assert (
        value(samples, "chatmend_learned_applied_total", route="default", rule="developer-role")
        == 1
    )
    # another defect is not repaired in advance: the learned repair does not widen
    other, _ = SESSIONS["finish_reason copied into history"]
    response = await proxy.post("/v1/chat/completions", data=other, headers=KEY_A)
    assert response.status == 200 and RECOVERED_HEADER in response.headers
    assert len(upstream.received) == 5
    # another model on the same route has learned nothing
    payload = orjson.loads(body)
    payload["model"] = "deepseek-reasoner"
    response = await proxy.post("/v1/chat/completions", data=orjson.dumps(payload), headers=KEY_A)
    assert response.status == 200 and RECOVERED_HEADER in response.headers
    assert len(upstream.received) == 7
    # another client has learned nothing either: its identical request pays its own refusal
    response = await proxy.post("/v1/chat/completions", data=body, headers=KEY_B)
    assert response.status == 200 and RECOVERED_HEADER in response.headers
    assert upstream.received[7] == body and len(upstream.received) == 9
    # and a clean request still goes byte for byte
    clean = chat([USER])
    assert (await proxy.post("/v1/chat/completions", data=clean, headers=KEY_A)).status == 200
    assert upstream.received[-1] == clean


async def test_a_learned_repair_is_forgotten_on_ttl_and_on_reload(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Worded()
    server = await aiohttp_server(upstream.app())
    settings = {"profile": "passthrough", "recover": {"learn_ttl": 0.3}}
    app = create_app(parse_config(settings, default_upstream=base_url(server)))
    proxy = await aiohttp_client(app)
    body, _ = SESSIONS["a call without its type"]

    async def sends() -> int:
        before = len(upstream.received)
        response = await proxy.post("/v1/chat/completions", data=body, headers=KEY_A)
        assert response.status == 200
        return len(upstream.received) - before

    assert [await sends(), await sends()] == [2, 1]
    await asyncio.sleep(0.4)  # past the TTL: forgotten
    assert [await sends(), await sends()] == [2, 1]
    assert _learned(await scrape(proxy))
    assert reload_config(app, lambda: parse_config(settings, default_upstream=base_url(server)))
    assert not _learned(await scrape(proxy))
    assert [await sends(), await sends()] == [2, 1]


async def test_learn_ttl_zero_learns_nothing(
    aiohttp_server: Server, aiohttp_client: ClientFactory
) -> None:
    upstream = Worded()
    proxy = await _start(aiohttp_server, aiohttp_client, upstream, recover={"learn_ttl": 0})
    body, _ = SESSIONS["a call without its type"]
    for _ in range(2):
        assert (await proxy.post("/v1/chat/completions", data=body, headers=KEY_A)).status == 200
    assert len(upstream.received) == 4


def test_the_learned_store_is_bounded() -> None:
    learned = LearnedRepairs(Metrics(), max_entries=3)
    for number in range(5):
        learned.learn(
            route="default",
            upstream="http://u",
            api="chat",
            model=f"m{number}",
            scope="http://u\nclient",
            rules={"tool-call-type": {}},
            error_class="missing_tool_call_type",
            ttl=60,
            epoch=learned.epoch,
        )
    assert [key[3] for key, _ in learned.entries()] == ["m2", "m3", "m4"]
    learned.learn(
        route="default",
        upstream="http://u",
        api="chat",
        model="m" * 300,  # a model name this long is not remembered
        scope="http://u\nclient",
        rules={"tool-call-type": {}},
        error_class="missing_tool_call_type",
        ttl=60,
        epoch=learned.epoch,
    )
    assert len(learned.entries()) == 3


async def test_replicas_share_what_they_learn_through_redis(
    aiohttp_server: Server, aiohttp_client: ClientFactory, redis_server: RedisServer
) -> None:
    """Two replicas with the stash in one Redis: what one learns, the other applies after
    its refresh (one upstream request); a reload forgets it for both."""
    upstream = Worded()
    server = await aiohttp_server(upstream.app())
    settings = {
        "profile": "passthrough",
        "reasoning": {"store": "redis", "redis": {"url": redis_server.url, "prefix": "t26:"}},
    }
    apps = [create_app(parse_config(settings, default_upstream=base_url(server))) for _ in "ab"]
    one, two = [await aiohttp_client(app) for app in apps]
    body, _ = SESSIONS["a call without its type"]
    assert (await one.post("/v1/chat/completions", data=body, headers=KEY_A)).status == 200
    assert len(upstream.received) == 2
    for _ in range(50):  # the write is sent after the answer
        await apps[1][LEARNED_KEY].refresh()
        if apps[1][LEARNED_KEY].entries():
            break
        await asyncio.sleep(0.02)
    assert (await two.post("/v1/chat/completions", data=body, headers=KEY_A)).status == 200
    assert len(upstream.received) == 3
    assert _learned(await scrape(two)) == {
        ("default", "deepseek-chat", "tool-call-type", "missing_tool_call_type")
    }


async def test_chatmend_learned_prints_what_a_running_proxy_learned(
    aiohttp_server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = Worded()
    up = await aiohttp_server(upstream.app())
    settings = {"profile": "passthrough"}
    proxy = await aiohttp_server(create_app(parse_config(settings, default_upstream=base_url(up))))
    url = base_url(proxy)
    assert await asyncio.to_thread(cli_main, ["learned", url]) == 0
    assert capsys.readouterr().out == "nothing learned\n"
    body, _ = SESSIONS["a call without its type"]
    status, _ = await _post(url + "/v1/chat/completions", body, KEY_A)
    assert status == 200
    capsys.readouterr()  # the proxy's own log lines
    assert await asyncio.to_thread(cli_main, ["learned", url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "route    model          rule            error_class",
        "default  deepseek-chat  tool-call-type  missing_tool_call_type",
    ]
    assert await asyncio.to_thread(cli_main, ["learned", "http://127.0.0.1:9"]) == 2
