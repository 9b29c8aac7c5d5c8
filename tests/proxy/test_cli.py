"""The CLI contract: `chatmend serve` and `python -m proxy serve`, flags over YAML over env."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestServer

from proxy.cli import build_parser, event_loop_factory, main
from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream, strict_errors
from tests.transcripts import BROKEN

CHATMEND = Path(sys.executable).parent / "chatmend"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_listening(port: int) -> None:
    """Wait (up to 10 s) until something accepts connections on ``port`` on loopback."""
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
        else:
            writer.close()
            return
    raise AssertionError(f"nothing listens on port {port}")


@asynccontextmanager
async def serving(*command: str, env: dict[str, str] | None = None) -> AsyncIterator[str]:
    """Run a serve command until it accepts connections; yield its base URL."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *command,
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        await wait_listening(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await process.wait()
        assert process.stdout is not None
        out = await process.stdout.read()
        for line in out.splitlines():
            orjson.loads(line)  # every log line is one JSON object


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", [(str(CHATMEND), "serve"), (sys.executable, "-m", "proxy", "serve")]
)
async def test_serve_repairs_through_a_real_process(
    command: tuple[str, ...], fake: FakeUpstream, fake_server: TestServer
) -> None:
    async with (
        serving(*command, "--upstream", base_url(fake_server)) as url,
        aiohttp.ClientSession() as http,
    ):
        body = orjson.dumps({"model": "m", "messages": BROKEN["split_assistant_turn"]})
        async with http.post(f"{url}/v1/chat/completions", data=body) as response:
            assert response.status == 200, await response.text()
    assert strict_errors(orjson.loads(fake.received[-1].body)) == []


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_serve_runs_on_either_event_loop(
    loop: str, fake: FakeUpstream, fake_server: TestServer
) -> None:
    command = (str(CHATMEND), "serve", "--loop", loop, "--upstream", base_url(fake_server))
    async with serving(*command) as url, aiohttp.ClientSession() as http:
        body = orjson.dumps({"model": "m", "messages": BROKEN["empty_tool_calls"]})
        async with http.post(f"{url}/v1/chat/completions", data=body) as response:
            assert response.status == 200, await response.text()
    assert strict_errors(orjson.loads(fake.received[-1].body)) == []


def test_auto_loop_is_uvloop_where_installed() -> None:
    uvloop = pytest.importorskip("uvloop")
    assert event_loop_factory("auto") is uvloop.new_event_loop
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    assert event_loop_factory("asyncio") is asyncio.new_event_loop


@pytest.mark.slow
async def test_env_upstream_is_used_without_flags(
    fake: FakeUpstream, fake_server: TestServer
) -> None:
    env = {"CHATMEND_UPSTREAM": base_url(fake_server)}
    async with (
        serving(str(CHATMEND), "serve", env=env) as url,
        aiohttp.ClientSession() as http,
        http.get(f"{url}/v1/models") as response,
    ):
        assert response.status == 200
    assert fake.received[-1].path_qs == "/v1/models"


def test_config_error_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("listen:\n  port: nope\n")
    assert main(["serve", "--config", str(path)]) == 2
    assert "listen.port" in capsys.readouterr().err


def test_serve_flags() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--config",
            "c.yaml",
            "--upstream",
            "http://u",
            "--host",
            "0.0.0.0",
            "--port",
            "1",
        ]
    )
    assert (args.config, args.upstream, args.host, args.port) == (
        "c.yaml",
        "http://u",
        "0.0.0.0",
        1,
    )


# ---------------------------------------------------------------------------------------------
# Start-up failures: one line on stderr naming the cause, a non-zero exit, no traceback
# ---------------------------------------------------------------------------------------------


async def run_cli(*args: str, timeout: float = 20) -> tuple[int, str, str]:
    """Run the real ``chatmend`` in a subprocess; its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        str(CHATMEND),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"chatmend {' '.join(args)} did not exit") from None
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "cause"),
    [
        (("serve",), "Address already in use"),
        (("serve", "--workers", "2"), "Address already in use"),
        (("emulate",), "Address already in use"),
        (("serve", "--host", "no-such-host.invalid"), "cannot listen on no-such-host.invalid"),
        (("emulate", "--host", "no-such-host.invalid"), "cannot listen on no-such-host.invalid"),
        (("serve", "--upstream", "ftp://x"), "config error: --upstream: must be"),
        (("serve", "--config", "/nonexistent/chatmend.yaml"), "cannot read"),
    ],
)
async def test_start_up_failures_are_one_line(args: tuple[str, ...], cause: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        if "--host" not in args:
            args = (*args, "--port", port)
        code, _, err = await run_cli(*args)
    assert code != 0
    assert cause in err, err
    assert err.count("\n") == 1 and err.startswith("chatmend"), err
    assert "Traceback" not in err


@pytest.mark.slow
async def test_version() -> None:
    code, out, err = await run_cli("--version")
    assert (code, err) == (0, "")
    assert re.fullmatch(r"chatmend \d+\.\d+\.\d+\S*\n", out), out


@pytest.mark.slow
async def test_proxy_started_names_the_profile_the_upstream_implies() -> None:
    """The README's own example, ``--upstream https://api.moonshot.ai``, runs under kimi, and
    the start-up line says why (and how many of start-up's objects it froze); an upstream URL
    ending in /v1 is warned about once."""
    process = await asyncio.create_subprocess_exec(
        str(CHATMEND),
        "serve",
        "--upstream",
        "https://api.moonshot.ai/v1",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        lines = [await asyncio.wait_for(process.stdout.readline(), 20) for _ in range(2)]
    finally:
        process.terminate()
        _, err = await process.communicate()
    started, warned = (orjson.loads(line) for line in lines)
    assert started["event"] == "proxy_started"
    assert started["profile"] == "kimi"
    assert "api.moonshot.ai" in started["profile_reason"]
    assert started["sources"]["upstream.url"] == "flag --upstream"
    assert started["sources"]["profile"] == "upstream host"
    assert "reasoning-content" in started["rules"]
    assert started["gc_frozen"] > 10_000  # start-up's objects (proxy/server/collector.py)
    assert warned["event"] == "upstream_url_ends_in_v1"
    assert warned["route"] == "default"
    assert err == b""


def test_any_other_start_up_failure_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure with no message of its own (here the app cannot be built) still ends in one
    line naming it and exit 1, not a traceback."""

    def broken(config: object) -> None:
        raise RuntimeError("cannot build\nthe app")

    monkeypatch.setattr("proxy.cli.create_app", broken)
    monkeypatch.setattr("proxy.cli.configure_logging", lambda: None)  # pytest owns stdout
    assert main(["serve", "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err == "chatmend serve: RuntimeError: cannot build the app\n"
