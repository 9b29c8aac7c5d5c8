"""Routes (several upstreams by path prefix) and route-held credentials, end to end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from structlog.testing import capture_logs

from proxy.config import ConfigError, parse_config
from proxy.server.app import create_app
from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream, create_fake_upstream
from tests.transcripts import BROKEN, CLEAN_BODY, chat
from tools.emulate.app import create_emulator

Server = Callable[..., Awaitable[TestServer]]
Client = Callable[..., Awaitable[TestClient[Any, Any]]]

KEY = "sk-upstream-secret-0123456789"
TOKEN = "chatmend-client-token-abcdef"
ENV = {"MOONSHOT_KEY": KEY, "AGENT_TOKENS": f"{TOKEN}, second-token-0123456789"}
#: Mistral rejects the `name` on a tool message (docs/providers.md#mistral-reasoning, 422
#: extra_forbidden): the deepseek profile keeps it, the mistral profile drops it.
NAMED_TOOL_RESULT = [
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "abcdefghi",
                "type": "function",
                "function": {"name": "w", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "abcdefghi", "name": "w", "content": "sunny"},
]


async def _fake(aiohttp_server: Server) -> tuple[FakeUpstream, str]:
    fake = FakeUpstream()
    server = await aiohttp_server(create_fake_upstream(fake))
    return fake, base_url(server)


async def _recorder(aiohttp_server: Server) -> tuple[list[str], str]:
    """An upstream that answers 200 to anything and records each path and query."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.rel_url.raw_path_qs)
        return web.json_response({"object": "list", "data": []})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    return seen, base_url(await aiohttp_server(app))


async def test_two_routes_and_the_default_reach_their_own_upstreams(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    (default, default_url), (kimi, kimi_url) = (
        await _recorder(aiohttp_server),
        await _recorder(aiohttp_server),
    )
    mistral = base_url(await aiohttp_server(create_emulator(profile="mistral")))
    config = parse_config(
        {
            "upstream": {"url": default_url},
            "routes": {
                "kimi": {"upstream": {"url": kimi_url}, "profile": "kimi"},
                "mistral": {"prefix": "/eu/mistral", "upstream": {"url": mistral}},
            },
            "models": {"mistral-*": "mistral"},
        }
    )
    proxy = await aiohttp_client(create_app(config))

    assert (await proxy.post("/kimi/v1/chat/completions?x=1", data=CLEAN_BODY)).status == 200
    assert kimi == ["/v1/chat/completions?x=1"]
    # the prefix is matched segment by segment: /kimi2 is not /kimi's
    assert (await proxy.get("/kimi2/v1/models")).status == 200
    assert (await proxy.get("/v1/models")).status == 200
    assert (await proxy.get("/kimi")).status == 200
    assert default == ["/kimi2/v1/models", "/v1/models"]
    assert kimi == ["/v1/chat/completions?x=1", "/"]

    # the mistral route runs the model's profile in front of the strict emulation
    body = chat(NAMED_TOOL_RESULT, model="mistral-large-latest")
    routed = await proxy.post("/eu/mistral/v1/chat/completions", data=body)
    assert routed.status == 200, await routed.text()
    assert routed.headers["X-Chatmend-Changes"].startswith("1; rules=")


async def test_a_route_sets_its_own_rules_mode_and_profile(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    fake, url = await _fake(aiohttp_server)
    config = parse_config(
        {
            "upstream": {"url": url},
            "rules": {"empty-tool-calls": True},
            "routes": {
                # recovery off: these routes' 400s are what the test reads
                "raw": {
                    "upstream": {"url": url},
                    "rules": {"empty-tool-calls": False},
                    "recover": {"enabled": False},
                },
                "trial": {
                    "upstream": {"url": url},
                    "mode": "report",
                    "recover": {"enabled": False},
                },
            },
        }
    )
    proxy = await aiohttp_client(create_app(config))
    body = chat(BROKEN["empty_tool_calls"])
    enforced = await proxy.post("/v1/chat/completions", data=body)
    assert enforced.status == 200 and enforced.headers["X-Chatmend-Changes"] != "0"
    assert (await proxy.post("/raw/v1/chat/completions", data=body)).status == 400
    trial = await proxy.post("/trial/v1/chat/completions", data=body)
    assert trial.status == 400  # report mode forwarded the original
    assert trial.headers["X-Chatmend-Changes"].endswith("reported=1")
    assert fake.received[-1].body == body


async def test_each_route_has_its_own_timeouts(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.5)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", slow)
    url = base_url(await aiohttp_server(app))
    config = parse_config(
        {
            "upstream": {"url": url},
            "routes": {"hasty": {"upstream": {"url": url, "read_timeout": 0.1}}},
        }
    )
    proxy = await aiohttp_client(create_app(config))
    timed_out = await proxy.get("/hasty/v1/models")
    assert timed_out.status == 504
    assert (await timed_out.json())["error"]["code"] == "upstream_timeout"
    assert (await proxy.get("/v1/models")).status == 200


async def test_a_route_holding_the_key_requires_a_client_token(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    fake, url = await _fake(aiohttp_server)
    config = parse_config(
        {
            "upstream": {"url": url},
            "routes": {
                "kimi": {
                    "upstream": {"url": url, "api_key_env": "MOONSHOT_KEY"},
                    "client_tokens_env": "AGENT_TOKENS",
                }
            },
        },
        env=ENV,
    )
    proxy = await aiohttp_client(create_app(config))
    path = "/kimi/v1/chat/completions"
    with capture_logs() as logs:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-0123456789"},
            {"Authorization": TOKEN},  # no scheme
            {"Authorization": f"Basic {TOKEN}"},
        ):
            denied = await proxy.post(path, data=CLEAN_BODY, headers=headers)
            assert denied.status == 401
            assert denied.headers["WWW-Authenticate"] == 'Bearer realm="chatmend"'
            assert (await denied.json())["error"]["code"] == "invalid_api_key"
            assert denied.headers["X-Chatmend-Changes"] == "0"
        assert fake.received == []  # nothing unauthorized reaches the upstream

        sent = {"Authorization": f"Bearer {TOKEN}", "api-key": "client", "x-api-key": "client"}
        allowed = await proxy.post(path, data=CLEAN_BODY, headers=sent)
        assert allowed.status == 200
        second = {"Authorization": "Bearer second-token-0123456789"}
        assert (await proxy.post(path, data=CLEAN_BODY, headers=second)).status == 200
        azure_client = {"api-key": TOKEN}
        assert (await proxy.post(path, data=CLEAN_BODY, headers=azure_client)).status == 200
        assert fake.received[-1].headers["Authorization"] == f"Bearer {KEY}"
        assert "api-key" not in {k.lower() for k in fake.received[-1].headers}
    received = {k.lower(): v for k, v in fake.received[0].headers.items()}
    assert received["authorization"] == f"Bearer {KEY}"
    assert "api-key" not in received and "x-api-key" not in received
    # the default route passes the client's credential through untouched
    await proxy.post("/v1/chat/completions", data=CLEAN_BODY, headers={"Authorization": "Bearer c"})
    assert fake.received[-1].headers["Authorization"] == "Bearer c"
    logged = repr(logs) + repr(config)
    assert KEY not in logged and TOKEN not in logged
    assert {e.get("outcome") for e in logs if e["event"] == "request_done"} >= {"unauthorized"}


async def test_azure_style_key_header(aiohttp_server: Server, aiohttp_client: Client) -> None:
    fake, url = await _fake(aiohttp_server)
    config = parse_config(
        {
            "upstream": {"url": url, "api_key_env": "MOONSHOT_KEY", "api_key_header": "api-key"},
            "client_tokens_env": "AGENT_TOKENS",
        },
        env=ENV,
    )
    proxy = await aiohttp_client(create_app(config))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert (
        await proxy.post("/v1/chat/completions", data=CLEAN_BODY, headers=headers)
    ).status == 200
    received = {k.lower(): v for k, v in fake.received[0].headers.items()}
    assert received["api-key"] == KEY
    assert "authorization" not in received  # the client's token never travels on


async def test_requests_are_counted_by_route(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    _, url = await _fake(aiohttp_server)
    config = parse_config(
        {"upstream": {"url": url}, "routes": {"kimi": {"upstream": {"url": url}}}}
    )
    proxy = await aiohttp_client(create_app(config))
    await proxy.post("/kimi/v1/chat/completions", data=CLEAN_BODY)
    text = await (await proxy.get("/metrics")).text()
    assert (
        'chatmend_requests_total{api="chat",profile="deepseek",route="kimi",status="200"} 1.0'
        in text
    )
    ready = await (await proxy.get("/readyz")).json()
    assert ready["routes"] == {"kimi": "deepseek", "default": "deepseek"}


@pytest.mark.parametrize(
    ("data", "env", "message"),
    [
        (
            {"upstream": {"api_key_env": "MOONSHOT_KEY"}},
            ENV,
            "client_tokens_env: required when upstream.api_key_env is set",
        ),
        (
            {"upstream": {"api_key_env": "NOPE"}, "client_tokens_env": "AGENT_TOKENS"},
            ENV,
            "upstream.api_key_env: environment variable NOPE is not set or empty",
        ),
        ({"client_tokens_env": "SHORT"}, {"SHORT": "abc"}, "at least 16 characters"),
        ({"routes": {"k": {"profile": "kimi"}}}, {}, "routes.k.upstream.url: required"),
        (
            {"routes": {"k": {"upstream": {"url": "http://a"}, "prefix": "/a/../b"}}},
            {},
            "routes.k.prefix: must be a path",
        ),
        (
            {"routes": {"m": {"upstream": {"url": "http://a"}, "prefix": "/metrics"}}},
            {},
            "would shadow chatmend's own /metrics",
        ),
        (
            {
                "routes": {
                    "a": {"upstream": {"url": "http://a"}, "prefix": "/x"},
                    "b": {"upstream": {"url": "http://b"}, "prefix": "/x/"},
                }
            },
            {},
            "routes.b.prefix: /x is already routes.a's",
        ),
        ({"routes": {"default": {"upstream": {"url": "http://a"}}}}, {}, "not 'default'"),
        (
            {"routes": {"k": {"upstream": {"url": "http://a"}, "listen": {}}}},
            {},
            "routes.k.listen: unknown key",
        ),
        (
            {"routes": {"k": {"upstream": {"url": "http://a"}, "rules": {"nope": True}}}},
            {},
            "routes.k.rules.nope: unknown rule",
        ),
        (
            {"routes": {"k": {"upstream": {"url": "http://a", "api_key_header": "x-key"}}}},
            {},
            "routes.k.upstream.api_key_header: must be one of",
        ),
    ],
)
def test_route_and_credential_config_errors(
    data: dict[str, Any], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        parse_config(data, env=env)


def test_routes_inherit_the_top_level_and_sort_longest_prefix_first() -> None:
    config = parse_config(
        {
            "upstream": {"url": "http://top", "read_timeout": 7},
            "profile": "kimi",
            "mode": "report",
            "rules": {"empty-tool-calls": False, "tool-call-type": False},
            "routes": {
                "a": {"upstream": {"url": "http://a"}, "prefix": "/a"},
                "ab": {
                    "upstream": {"url": "http://ab"},
                    "prefix": "/a/b",
                    "rules": {"tool-call-type": True},
                },
            },
        }
    )
    ab, a = config.routes
    assert (ab.name, a.name) == ("ab", "a")
    assert a.upstream.read_timeout == 7 and a.profile == "kimi" and a.mode == "report"
    assert a.upstream.api_key is None
    assert ab.rules["empty-tool-calls"].enabled is False
    assert ab.rules["tool-call-type"].enabled is True
    assert orjson.dumps(config.default.name) == b'"default"'


async def test_an_upstream_url_ending_in_v1_gets_the_path_the_client_meant(
    aiohttp_server: Server, aiohttp_client: Client
) -> None:
    """``upstream.url: https://api.moonshot.ai/v1`` and a client at ``.../v1``: the request goes
    to ``/v1/chat/completions``, not ``/v1/v1/chat/completions``; a client whose base URL has
    no /v1 reaches the same path; on routes as on the default one."""
    (default, default_url), (kimi, kimi_url) = (
        await _recorder(aiohttp_server),
        await _recorder(aiohttp_server),
    )
    config = parse_config(
        {
            "upstream": {"url": default_url + "/v1"},
            "routes": {"kimi": {"upstream": {"url": kimi_url + "/api/v1/"}}},
        }
    )
    proxy = await aiohttp_client(create_app(config))
    for path in ("/v1/chat/completions", "/chat/completions", "/v1/models?limit=2", "/v1x/a"):
        assert (await proxy.post(path, data=CLEAN_BODY)).status == 200
    assert default == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/models?limit=2",
        "/v1/v1x/a",  # not the /v1 segment: appended as it came
    ]
    assert (await proxy.post("/kimi/v1/chat/completions", data=CLEAN_BODY)).status == 200
    assert kimi == ["/api/v1/chat/completions"]
    # an upstream without /v1 keeps the client's path as it is
    plain = parse_config({"upstream": {"url": default_url}})
    proxy = await aiohttp_client(create_app(plain))
    assert (await proxy.get("/v1/models")).status == 200
    assert default[-1] == "/v1/models"
