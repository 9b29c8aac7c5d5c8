"""The fixed cost per request: chatmend's own CPU time per request on a small body.

wrk posts one ``tests.payloads`` body (``--messages``, default 10, ``--variant``, default clean) to
each target in turn, round after round (a 1 s warm-up of each first), as ``bench.http`` does.
Besides req/s, each target's CPU time per request (user + system, from ``/proc/PID/stat``, the
server process alone) is read around each wrk run: on a shared 2-core machine it moves far less
than req/s, which the other processes' load shifts. Figures are medians over the rounds; the
table gives each target's req/s over floor-json's (the median of the per-round ratios, as
``bench.http``) and floor-json's CPU per request over the target's.

Targets, all in front of the same fake upstream (``bench.servers``):

- ``floor-json``: a minimal aiohttp relay that parses and re-serializes the body;
- ``chatmend``: this tree's ``chatmend serve`` (default config);
- ``before`` (``--before DIR``): the same from another checkout, e.g.
  ``git worktree add --detach /tmp/base <commit>``, run by this interpreter with DIR first on its
  path (its own dependencies must match this venv's);
- with ``--parts``: this tree's chatmend with one part of its per-request work switched off (see
  ``serve``), to weigh each part: ``-log`` (its log lines), ``-metrics``, ``-stash`` (the
  reasoning stash lookup before the rules, ``ReasoningHooks.read``), ``-rules`` (the body still
  parsed, no rule run), ``-replies`` (the reply rules not armed for the answer), and all five
  off. Not a configuration anyone runs: a measuring device.

Run: ``.venv/bin/python -m bench.fixed_cost [--before DIR] [--parts] [--rounds N] [--seconds S]``
(wrk needed, as for ``make bench``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.http import write_payloads, write_script, wrk
from bench.procs import Fleet, fleet, free_port, handle_sigterm
from bench.servers import start_chatmend, start_fake, start_floor

PARTS: tuple[str, ...] = ("log", "metrics", "stash", "rules", "replies")


@dataclass(slots=True)
class Target:
    rps: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_us)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def _start_before(servers: Fleet, upstream: str, source: str) -> None:
    port = free_port()
    # -P: the current directory is not put first on the path, so DIR's packages are imported.
    command = [sys.executable, "-P", "-m", "proxy", "serve", "--upstream", upstream]
    env = {**os.environ, "PYTHONPATH": source}
    servers.start("before", [*command, "--port", str(port)], port, env=env)


def _start_without(servers: Fleet, upstream: str, parts: Sequence[str]) -> None:
    port = free_port()
    command = [sys.executable, "-m", "bench.fixed_cost", "serve", upstream, str(port)]
    name = "-" + "-".join(parts) if len(parts) < len(PARTS) else "-all five"
    servers.start(name, [*command, "--off", ",".join(parts)], port)


def run(
    *, before: str | None, parts: bool, rounds: int, seconds: float, messages: int, variant: str
) -> dict[str, Target]:
    """Every target measured ``rounds`` times, interleaved."""
    with tempfile.TemporaryDirectory(prefix="chatmend-fixed-") as tmp, fleet() as servers:
        upstream = start_fake(servers, "direct")
        start_floor(servers, "floor-json", upstream)
        start_chatmend(servers, upstream)
        if before is not None:
            _start_before(servers, upstream, before)
        if parts:
            for part in PARTS:
                _start_without(servers, upstream, [part])
            _start_without(servers, upstream, PARTS)
        script = write_script(Path(tmp))
        payload = write_payloads(Path(tmp), [messages], [variant])[messages, variant]
        names = [name for name in servers.urls if name != "direct"]
        for name in names:
            wrk(servers.urls[name], script, payload, 16, 1)
        targets = {name: Target() for name in names}
        for _ in range(rounds):
            for name in names:
                pid = servers.pid(name)
                start = cpu_seconds(pid)
                result = wrk(servers.urls[name], script, payload, 16, seconds)
                if not result.clean:
                    raise RuntimeError(f"{name}: {result}")
                targets[name].rps.append(result.rps)
                targets[name].cpu_us.append((cpu_seconds(pid) - start) / result.requests * 1e6)
        return targets


def table(targets: dict[str, Target]) -> str:
    """Per target: req/s and CPU per request (medians), and floor-json's over the target's:
    CPU per request (of the medians) and req/s (the median of the per-round ratios, as
    ``bench.http`` reports it)."""
    floor = targets["floor-json"]
    lines = [
        "| target | req/s | CPU µs per request | target / floor-json req/s "
        "| floor-json / target CPU per request |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, t in targets.items():
        rps = statistics.median(a / b for a, b in zip(t.rps, floor.rps, strict=True))
        cells = [name, f"{statistics.median(t.rps):,.0f}", f"{t.cpu:.0f}"]
        cells += [f"{rps:.2f}", f"{floor.cpu / t.cpu:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def serve(upstream: str, port: int, off: Sequence[str]) -> None:
    """chatmend with the ``off`` parts of its per-request work replaced by nothing (a measuring
    device: it patches the handler's module globals)."""
    import orjson
    from aiohttp import web

    import proxy.observe.accounting
    import proxy.server.trip
    from proxy.cli import event_loop_factory
    from proxy.config import load_config
    from proxy.observe.log import configure_logging
    from proxy.server.app import create_app
    from proxy.server.appkeys import METRICS_KEY, REASONING_KEY
    from rules.providers.sanitize import Sanitized

    class Nothing:
        def __getattr__(self, name: str) -> Any:
            return self

        def __call__(self, *args: object, **kwargs: object) -> Any:
            return self

    configure_logging()
    app = create_app(load_config(None, upstream=upstream, port=port))
    if "log" in off:
        proxy.observe.accounting.log = Nothing()
        setattr(proxy.server.trip, "log", proxy.observe.accounting.log)  # noqa: B010 - not exported
    if "metrics" in off:
        app[METRICS_KEY] = Nothing()  # type: ignore[misc]
    if "stash" in off:

        def nothing(*args: object, **kwargs: object) -> None:
            return None

        app[REASONING_KEY].read = nothing  # type: ignore[method-assign]
    if "rules" in off:

        def parsed_only(body: bytes, *args: object, parsed: object = None, **kw: object) -> Any:
            if parsed is None:
                orjson.loads(body)
            return Sanitized(body, profile="none")

        setattr(proxy.server.trip, "sanitize_body", parsed_only)  # noqa: B010 - not exported
    if "replies" in off:

        async def unarmed(*args: object, **kwargs: object) -> None:
            return None

        setattr(proxy.server.trip, "_replies", unarmed)  # noqa: B010 - not exported
    loop = event_loop_factory("auto")()
    web.run_app(
        app,
        host="127.0.0.1",
        port=port,
        access_log=None,
        print=None,
        handler_cancellation=True,  # as chatmend serve runs it
        loop=loop,
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        parser = argparse.ArgumentParser(prog="python -m bench.fixed_cost serve")
        parser.add_argument("upstream")
        parser.add_argument("port", type=int)
        parser.add_argument("--off", default="")
        served = parser.parse_args(args[1:])
        serve(served.upstream, served.port, [p for p in served.off.split(",") if p])
        return
    parser = argparse.ArgumentParser(description="chatmend's CPU per request beside floor-json.")
    parser.add_argument("--before", help="another checkout of chatmend, measured beside this one")
    parser.add_argument("--parts", action="store_true", help="weigh each part of the work")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--variant", default="clean")
    parsed = parser.parse_args(args)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (make bench installs it)")
    handle_sigterm()
    targets = run(
        before=parsed.before,
        parts=parsed.parts,
        rounds=parsed.rounds,
        seconds=parsed.seconds,
        messages=parsed.messages,
        variant=parsed.variant,
    )
    print(table(targets))


if __name__ == "__main__":
    main()
