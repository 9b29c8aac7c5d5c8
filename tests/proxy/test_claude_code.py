"""The Claude Code CLI itself (npm ``@anthropic-ai/claude-code``), non-interactive, through
chatmend to the strict fake Anthropic endpoint on loopback. ``make test`` installs the pinned CLI
(a 400 MB npm package no Python package ships) and names it in ``CHATMEND_CLAUDE_BIN``; else
``claude`` on PATH; skipped where neither exists (docs/anthropic.md)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from proxy.config import parse_config
from proxy.server.app import create_app
from rules.providers.profiles import PROFILES
from tests.conftest import base_url
from tests.fake_anthropic import TEXT, FakeAnthropic, create_fake_anthropic

CLAUDE = os.environ.get("CHATMEND_CLAUDE_BIN") or shutil.which("claude")
pytestmark = [
    pytest.mark.skipif(CLAUDE is None, reason="the Claude Code CLI is not installed"),
    pytest.mark.slow,  # a real process
]


async def claude(base: str, home: Path, prompt: str) -> tuple[int, str]:
    """``claude -p PROMPT`` against ``base``, offline: its exit status and output."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": "sk-ant-test-not-real",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    assert CLAUDE is not None
    process = await asyncio.create_subprocess_exec(
        CLAUDE,
        "-p",
        prompt,
        "--model",
        "claude-opus-4-6",
        cwd=home,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    return process.returncode or 0, out.decode(errors="replace")


@pytest.mark.timeout(300)
async def test_claude_code_through_chatmend(
    tmp_path: Path,
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    fake = FakeAnthropic(contract=dict(PROFILES["anthropic"].messages_contract))
    server = await aiohttp_server(create_fake_anthropic(fake))
    config = parse_config({"profile": "anthropic"}, default_upstream=base_url(server), env={})
    proxy = await aiohttp_client(create_app(config))

    # Directly, the strict endpoint refuses what Claude Code sends (its JSON metadata.user_id).
    status, out = await claude(base_url(server), tmp_path, "say hello")
    assert status != 0 or TEXT not in out
    refused = len(fake.received)
    assert refused and fake.calls == 0

    # Through chatmend: a tool loop (the fake calls Claude Code's first tool, Claude Code
    # answers with a tool_result, the fake answers text) and the text comes back.
    status, out = await claude(str(proxy.make_url("")).rstrip("/"), tmp_path, "say hello")
    assert status == 0, out
    assert TEXT in out
    bodies = [
        orjson.loads(r.body)
        for r in fake.received[refused:]
        if r.path_qs.split("?")[0].endswith("/v1/messages")
    ]
    assert fake.calls >= 2
    assert all(b["metadata"]["user_id"].startswith("user_") for b in bodies if "metadata" in b)
    answered = [
        block
        for body in bodies
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    summary = [
        (len(b.get("tools") or []), [m["role"] for m in b["messages"]], b.get("thinking"))
        for b in bodies
    ]
    assert answered, summary
