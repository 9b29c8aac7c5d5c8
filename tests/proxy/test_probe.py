"""``chatmend probe URL`` (issue 26): against ``chatmend emulate --profile P`` for every
built-in profile, it names P (the battery tells every profile's contract apart); it says what it
will spend first, asks before spending on a host that is not loopback, and stops when the
control request is refused."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.cli import main as cli_main
from rules.providers.contract import violations
from rules.providers.profiles import PROFILES
from tests.conftest import base_url
from tools.emulate.app import create_emulator
from tools.emulate.errors import provider_error
from tools.probe import (
    bodies,
    cost,
    endpoint,
    is_loopback,
    probe,
    shapes,
    shown,
)

Server = Callable[..., Awaitable[TestServer]]


def _probe(url: str, *, yes: bool = False, answer: str = "n") -> tuple[int, str, list[str]]:
    said: list[str] = []
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return answer

    code = probe(url, model="deepseek-chat", key=None, yes=yes, say=said.append, ask=ask)
    return code, "".join(said), asked


def _answers(profile: str) -> list[tuple[str, int, str] | None]:
    """How ``profile``'s contract answers each request of the battery: its first refusal."""
    found = [
        violations(orjson.loads(body), PROFILES[profile].contract)[:1]
        for body in bodies("deepseek-chat").values()
    ]
    return [(v[0].code, v[0].status, v[0].message) if v else None for v in found]


@pytest.mark.parametrize("profile", list(PROFILES))
async def test_the_probe_names_the_emulated_profile(profile: str, aiohttp_server: Server) -> None:
    server = await aiohttp_server(create_emulator(profile=profile))
    code, out, asked = await asyncio.to_thread(_probe, base_url(server))
    assert code == 0, out
    assert asked == []  # loopback: nothing asked
    best = next(line for line in out.splitlines() if line.startswith("best fit: "))
    named = best.removeprefix("best fit: ").split(" ")[0]
    # A profile is as good a fit only if its contract refuses the battery exactly as the
    # emulated one does (same code, status and text per request): read from the contracts here.
    same = {name for name in PROFILES if _answers(name) == _answers(profile)}
    assert named in same, out
    tied = next((ln for ln in out.splitlines() if ln.startswith("as good: ")), "as good: ")
    assert set(tied.removeprefix("as good: ").split(", ")) - {""} <= same, out
    assert f"profile: {named}\n" in out and f"url: {base_url(server)}\n" in out


def _model_for(globs: tuple[str, ...]) -> str:
    """A model a check's ``probe_models`` globs name (``gemini-3*``: ``gemini-3``)."""
    return globs[0].replace("*", "") if globs else "deepseek-chat"


@pytest.mark.parametrize(
    ("profile", "code"),
    sorted((name, code) for name, p in PROFILES.items() for code in p.contract),
)
def test_the_battery_holds_each_profiles_refusal_of_each_check(profile: str, code: str) -> None:
    """Every refusal a profile's provider gives is in the battery: one of the check's shapes
    (its examples, sent for a model the check applies to) is refused by that profile's contract
    with that check (the oracle: the contract itself). A profile that sets a check's options
    its own way is seen too, or this fails."""
    check = next(c for c in shapes().values() if c.code == code)
    battery = bodies(_model_for(check.probe_models))
    contract = PROFILES[profile].contract
    seen = [
        shape
        for shape, body in battery.items()
        if shapes().get(shape) is check
        and code in {v.code for v in violations(orjson.loads(body), contract)}
    ]
    assert seen, f"the probe cannot see {profile}'s refusal {code}"


def test_the_control_is_refused_by_no_profile() -> None:
    battery = bodies("deepseek-chat")
    assert all(
        not violations(orjson.loads(battery["clean"]), p.contract) for p in PROFILES.values()
    )


def test_it_says_what_it_will_spend_and_asks_before_a_remote_host() -> None:
    requests, tokens = cost(bodies("deepseek-chat"))
    bound = [shape for shape, check in shapes().items() if check.probe_models]
    assert requests == len(shapes()) + 1 - len(bound) and tokens > requests
    code, out, asked = _probe("https://api.example.com", answer="n")
    assert code == 1
    assert f"{requests} requests to https://api.example.com/v1/chat/completions" in out
    assert f"about {tokens} prompt tokens" in out and "max_tokens: 1" in out
    assert asked == ["Send them? [y/N] "]
    assert out.endswith("nothing sent.\n")


def test_endpoints_and_loopback() -> None:
    assert endpoint("https://api.deepseek.com") == "https://api.deepseek.com/v1/chat/completions"
    assert endpoint("https://api.moonshot.ai/v1/") == "https://api.moonshot.ai/v1/chat/completions"
    assert is_loopback("http://127.0.0.1:8788") and is_loopback("http://localhost:1")
    assert is_loopback("http://[::1]:8788")
    assert not is_loopback("https://api.deepseek.com") and not is_loopback("http://10.0.0.1")


async def test_a_refused_control_stops_the_probe(aiohttp_server: Server) -> None:
    async def refuse(request: web.Request) -> web.Response:
        await request.read()
        return provider_error(404, "The model `deepseek-chat` does not exist.")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", refuse)
    server = await aiohttp_server(app)
    code, out, _ = await asyncio.to_thread(_probe, base_url(server))
    assert code == 2
    assert "control request was refused (404" in out and "best fit" not in out


async def test_the_cli_runs_it(aiohttp_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    server = await aiohttp_server(create_emulator(profile="kimi"))
    assert await asyncio.to_thread(cli_main, ["probe", base_url(server), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "best fit: kimi " in out and "profile: kimi" in out


# --- Issue 36: redirects, a password in the URL, two credentials ------------------------------


async def _recording(server_app: web.Application, seen: list[dict[str, str]]) -> web.Application:
    """``server_app`` with every request's headers noted in ``seen``."""

    @web.middleware
    async def note(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(dict(request.headers))
        response: web.StreamResponse = await handler(request)
        return response

    server_app.middlewares.append(note)
    return server_app


async def test_a_redirect_is_never_followed(aiohttp_server: Server) -> None:
    """Was: a loopback URL answering 307 to 0.0.0.0 (not loopback to the probe) got the whole
    battery there, unasked (44 POST bodies). Now the first redirect stops the probe."""
    elsewhere: list[dict[str, str]] = []
    target = await aiohttp_server(await _recording(create_emulator(profile="kimi"), elsewhere))
    location = f"http://0.0.0.0:{target.port}/v1/chat/completions"

    async def redirect(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=307, headers={"Location": location})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", redirect)
    server = await aiohttp_server(app)
    # The control: a client that follows redirects does reach the other host.
    endpoint_url = base_url(server) + "/v1/chat/completions"
    async with aiohttp.ClientSession() as http, http.post(endpoint_url, data=b"{}") as response:
        assert response.url.host == "0.0.0.0"
    assert len(elsewhere) == 1
    code, out, asked = await asyncio.to_thread(_probe, base_url(server))
    assert code == 2 and asked == [] and len(elsewhere) == 1
    assert f"answered 307 with a redirect to {location}" in out
    assert "follows no redirect" in out and "best fit" not in out


async def test_the_url_password_is_never_printed_and_one_credential_is_sent(
    aiohttp_server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the password in the URL was printed (the request line and the YAML), and with a key
    set as well the probe died on aiohttp's ValueError. Now it is printed as ***, the YAML has
    no credentials, and the probe says which credential it sends: the URL's, not the key."""
    seen: list[dict[str, str]] = []
    server = await aiohttp_server(await _recording(create_emulator(profile="kimi"), seen))
    url = f"http://bob:s3cret-pw@127.0.0.1:{server.port}"
    monkeypatch.setenv("PROBE_KEY", "sk-probe-key")
    args = ["probe", url, "--yes", "--key-env", "PROBE_KEY"]
    assert await asyncio.to_thread(cli_main, args) == 0
    out = capsys.readouterr().out
    assert "s3cret-pw" not in out and f"http://bob:***@127.0.0.1:{server.port}/v1/" in out
    said = "credentials: the user and password in the URL (HTTP Basic); $PROBE_KEY is set but "
    assert said + "not sent." in out and f"url: http://127.0.0.1:{server.port}\n" in out
    basic = "Basic " + base64.b64encode(b"bob:s3cret-pw").decode()
    assert seen and all(headers.get("Authorization") == basic for headers in seen)
    # The key alone: sent as a bearer token, and said so.
    seen.clear()
    plain = f"http://127.0.0.1:{server.port}"
    assert (
        await asyncio.to_thread(cli_main, ["probe", plain, "--yes", "--key-env", "PROBE_KEY"]) == 0
    )
    out = capsys.readouterr().out
    assert "credentials: the key in $PROBE_KEY (Authorization: Bearer)." in out
    assert seen and all(h.get("Authorization") == "Bearer sk-probe-key" for h in seen)
    assert "sk-probe-key" not in out


def test_an_unreachable_endpoint_is_said_plainly() -> None:
    code, out, _ = _probe("http://user:pw-secret@127.0.0.1:1")
    assert code == 2 and "pw-secret" not in out
    assert "cannot reach http://user:***@127.0.0.1:1/v1/chat/completions: Client" in out


def test_a_printed_location_is_the_servers_text_made_safe() -> None:
    assert shown("http://u:p@h:1/x") == "http://u:***@h:1/x"
    assert shown("http://:p@h/") == "http://:***@h/"
    assert shown("/relative") == "/relative"
    assert "\x1b" not in shown("http://h/\x1b[31mred") and "\x1b" not in shown("\x1b]0;x\x07")


def test_without_model_the_probe_sends_a_model_of_the_profile_the_host_picks() -> None:
    """Issue 40: ``--model`` defaulted to deepseek-chat whatever the host: against Kimi, the
    control was refused for its model and nothing could be read. Without ``--model`` the probe
    now sends a model of the provider the URL's host names; a host no profile lists gets the
    default profile's; Azure, whose model names are the operator's deployments, asks for one."""
    from tools.probe import MODELS, default_model

    assert default_model("https://api.moonshot.ai/v1") == ("kimi-k2-0905-preview", "kimi")
    assert default_model("https://api.mistral.ai") == ("mistral-small-latest", "mistral")
    assert default_model("http://127.0.0.1:8788") == ("deepseek-chat", "deepseek")
    # Every profile a host picks has its model here (or none, on purpose).
    assert {name for name, profile in PROFILES.items() if profile.hosts} <= set(MODELS)
    said: list[str] = []
    code = probe(
        "https://my.openai.azure.com/openai",
        model=None,
        key=None,
        yes=True,
        say=said.append,
        ask=lambda _: "n",
    )
    assert code == 2 and "pass --model" in "".join(said)
    said.clear()
    code = probe(
        "https://api.moonshot.ai/v1", model=None, key=None, yes=False, say=said.append, ask=str
    )
    assert code == 1 and "(model kimi-k2-0905-preview," in "".join(said)


async def test_each_shape_is_read_as_its_own_class_when_its_refusal_carries_it(
    aiohttp_server: Server,
) -> None:
    """Issue 40: the table named ``duplicate_tool_call_id`` by ``duplicate_tool_result`` (the
    refusal's text carries both classes). A shape whose refusal carries its own class is read
    as that class; one whose refusal names only another still shows what the provider said."""
    server = await aiohttp_server(create_emulator(profile="kimi"))
    code, out, _ = await asyncio.to_thread(_probe, base_url(server))
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line[:1].islower()}
    assert rows["duplicate_tool_call_id"][2] == "duplicate_tool_call_id"
    assert rows["unknown_field"][2] == "unknown_field"
