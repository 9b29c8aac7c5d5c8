"""Optional peers for the HTTP benchmark: other proxies pointed at the same fake upstream.

``litellm``: LiteLLM's proxy in its own venv, ``bench/.venvs/litellm`` (gitignored; created on
first use with ``pip install 'litellm[proxy]'``, which takes a few minutes). Its config maps the
payloads' model name to ``openai/<model>`` with ``api_base`` = fake upstream + ``/v1`` and a
dummy key, and sets ``litellm_settings: {modify_params: true}`` (LiteLLM's own payload
repairs), and ``general_settings.master_key`` to the key every benchmark client sends (LiteLLM
refuses to start without one). It runs as ``litellm --config FILE --port P --num_workers 1``;
start-up takes 10-30 s.

Run: ``make bench PEERS=litellm`` (or ``.venv/bin/python -m bench.run --peers litellm``).
Smoke test alone: ``.venv/bin/python -m bench.peers litellm`` (starts it, posts one payload).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from bench.procs import Fleet, fleet, free_port, handle_sigterm, wait_http
from bench.servers import API_KEY, MODEL, start_fake
from tests.payloads import build

PEERS: tuple[str, ...] = ("litellm",)
VENVS = Path(__file__).resolve().parent / ".venvs"
LITELLM_SPEC = "litellm[proxy]"
LITELLM_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch from GitHub at start-up
    "LITELLM_TELEMETRY": "False",
    "LITELLM_LOG": "ERROR",
    "LITELLM_MODE": "PRODUCTION",  # no .env loading
    "NO_PROXY": "127.0.0.1,localhost",
}


def parse(value: str) -> tuple[str, ...]:
    """``"litellm"`` or ``"litellm,..."`` -> known peer names; unknown ones are an error."""
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; known: {', '.join(PEERS)}")
    return names


def ensure_litellm() -> Path:
    """The ``litellm`` executable, installing its venv first if needed."""
    venv = VENVS / "litellm"
    exe = venv / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"installing {LITELLM_SPEC} into {venv} (a few minutes) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, LITELLM_SPEC], check=True)
    if not exe.exists():
        raise RuntimeError(f"{exe} missing after installing {LITELLM_SPEC}")
    return exe


def litellm_version(exe: Path) -> str:
    python = exe.with_name("python")
    out = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "?"


def describe(name: str) -> str:
    """One line for the results: which peer, which version, which settings."""
    exe = VENVS / name / "bin" / name
    return (
        f"`{name}` {litellm_version(exe)} (`{exe.relative_to(VENVS.parent.parent)}`), "
        "`--num_workers 1`, `modify_params: true`, master key set, pointed at the fake upstream"
    )


def litellm_config(upstream: str) -> dict[str, object]:
    return {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": upstream + "/v1",
                    "api_key": "sk-bench-dummy",
                },
            }
        ],
        "litellm_settings": {"modify_params": True},
        "general_settings": {"master_key": API_KEY},
    }


def start(name: str, servers: Fleet, upstream: str, workdir: Path) -> str:
    """Start peer ``name`` in ``servers``, pointed at ``upstream``; return its URL."""
    if name != "litellm":
        raise ValueError(name)
    exe = ensure_litellm()
    config = workdir / "litellm.yaml"
    config.write_text(json.dumps(litellm_config(upstream), indent=2))  # JSON is YAML
    port = free_port()
    command = [str(exe), "--config", str(config), "--port", str(port), "--num_workers", "1"]
    command += ["--host", "127.0.0.1"]
    log = workdir / "litellm.log"
    print(f"starting litellm {litellm_version(exe)} (log: {log}) ...", file=sys.stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        return servers.start(
            name,
            command,
            port,
            env={**os.environ, **LITELLM_ENV},
            log=log,
            ready=lambda proc: wait_http(url + "/health/liveliness", proc, timeout=180),
        )
    except RuntimeError:
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        print(f"litellm did not start; end of its log:\n{tail}", file=sys.stderr)
        raise


def probe(url: str, body: bytes) -> tuple[int, str]:
    """POST one payload; the status and the start of the answer (an error message, say)."""
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status: int = response.status
            return status, response.read(300).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(300).decode(errors="replace")


def main(argv: Sequence[str] | None = None) -> None:
    names = parse(",".join(argv if argv is not None else sys.argv[1:]) or "litellm")
    handle_sigterm()
    with tempfile.TemporaryDirectory(prefix="chatmend-peer-") as tmp, fleet() as servers:
        upstream = start_fake(servers)
        for name in names:
            url = start(name, servers, upstream, Path(tmp))
            for broken in (False, True):
                status, text = probe(url, build(10, broken=broken))
                print(f"{name} {'broken' if broken else 'clean'} 10: {status} {text[:200]!r}")


if __name__ == "__main__":
    main()
