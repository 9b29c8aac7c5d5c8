"""Growing sessions over HTTP, driven by ``wrk``: what a server pays when agents re-send their
history plus a turn.

The bodies are ``tests.sessions``' (each request the previous one of its session plus a turn;
``clean``, ``stuck``: one early defect carried by every later request, ``stuck-split``: issue
39's, a split turn that repeats its call at turn 2, ``broken``: a defect every fourth tool
turn), several sessions interleaved step by step, as concurrent agents send them.
``wrk``'s Lua script posts them in that order, over and over (a session that starts again is a
new session with the same prompt). Targets, each a subprocess in front of the same fake upstream
(``bench.servers.start_upstream``: nginx when installed, else the Python fake), measured
interleaved round by round: ``floor-raw`` (a byte relay: the limit), ``floor-json`` (one orjson
parse and serialize per request), ``chatmend`` (its defaults: the prefix cache on) and
``chatmend-whole`` (``prefix_cache: {enabled: false}``: every request parsed and walked whole).
Ratios are each target's throughput over floor-json's (median of the per-round ratios); after
each workload, what chatmend's prefix cache charges, chatmend's resident memory and
chatmend-whole's (no cache: the difference is what the cache really holds). Workloads: compact
clients (``clean``, ``stuck``, ``stuck-split``, ``broken``), clients that write
``json.dumps``' spacing (``*-spaced``) and, when asked for, a Go client (``clean-go``,
``stuck-go``: ``<``, ``>`` and ``&`` escaped). Skipped if ``wrk`` is missing.

Run: ``.venv/bin/python -m bench.http_sessions [--quick] [--concurrency 8] [--peers litellm]
[--workload NAME ...]``.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import peers as peer_mod
from bench.http import Measured, measure
from bench.procs import fleet, rss_kb
from bench.servers import API_KEY, start_chatmend, start_floor, start_upstream
from tests.sessions import ESCAPED, SPACED, SPLIT, interleaved

WORKLOADS: tuple[str, ...] = ("clean", "stuck", *SPLIT, "broken", *SPACED)
#: The bodies, one per line (compact JSON holds no raw newline), posted in turn.
LUA = f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {API_KEY}"
local bodies = {{}}
local f = assert(io.open(os.getenv("BENCH_PAYLOAD"), "rb"))
for line in f:lines() do bodies[#bodies + 1] = line end
f:close()
local i = 0
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
"""


@dataclass(frozen=True, slots=True)
class SessionsRow:
    workload: str
    sessions: int
    steps: int
    mean_kb: float
    concurrency: int
    measured: Measured
    #: After the workload: what chatmend's prefix cache charges (``chatmend_prefix_cache_bytes``)
    #: and the process's resident memory, in MB (``nan``: not read).
    cache_mb: float = math.nan
    rss_mb: float = math.nan
    #: chatmend-whole's resident memory (the same server, no prefix cache), in MB.
    whole_rss_mb: float = math.nan
    #: The fake upstream: ``nginx`` or ``python`` (``bench.servers.start_upstream``).
    upstream: str = "python"

    def ratio(self, target: str) -> float:
        return self.measured.ratio(target, "floor-json")


def run(
    *,
    workloads: Sequence[str] = WORKLOADS,
    sessions: int = 8,
    messages: int = 300,
    concurrency: int = 8,
    rounds: int = 3,
    seconds: float = 3.0,
    peers: Sequence[str] = (),
) -> list[SessionsRow]:
    if shutil.which("wrk") is None:
        print("wrk not installed: HTTP sessions benchmark skipped", file=sys.stderr)
        return []
    rows = []
    with tempfile.TemporaryDirectory(prefix="chatmend-sessions-") as tmp_name, fleet() as servers:
        tmp = Path(tmp_name)
        whole = tmp / "whole.yaml"
        whole.write_text("prefix_cache: {enabled: false}\n")
        upstream, kind = start_upstream(servers, "direct")
        start_floor(servers, "floor-raw", upstream)
        start_floor(servers, "floor-json", upstream)
        start_chatmend(servers, upstream)
        start_chatmend(servers, upstream, "chatmend-whole", extra=["--config", str(whole)])
        for peer in peers:
            peer_mod.start(peer, servers, upstream, tmp)
        urls = {name: url for name, url in servers.urls.items() if name != "direct"}
        script = tmp / "sessions.lua"
        script.write_text(LUA)
        for workload in workloads:
            bodies = interleaved(workload, sessions, messages)
            payload = tmp / f"{workload}.lines"
            payload.write_bytes(b"\n".join(bodies) + b"\n")
            measured = measure(urls, script, payload, concurrency, rounds=rounds, seconds=seconds)
            row = SessionsRow(
                workload,
                sessions,
                len(bodies) // sessions,
                statistics.mean(len(b) for b in bodies) / 1024,
                concurrency,
                measured,
                _cache_mb(urls["chatmend"]),
                _rss_mb(servers.pid("chatmend")),
                _rss_mb(servers.pid("chatmend-whole")),
                kind,
            )
            rows.append(row)
            print(
                f"  sessions {workload}: chatmend/floor-json {row.ratio('chatmend'):.2f}",
                file=sys.stderr,
            )
    return rows


def _cache_mb(url: str) -> float:
    """What chatmend's prefix cache charges now (its ``/metrics``), in MB."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return math.nan
    for line in text.splitlines():
        if line.startswith("chatmend_prefix_cache_bytes "):
            return float(line.split()[1]) / 1e6
    return math.nan


def _rss_mb(pid: int) -> float:
    """A process's resident memory, in MB."""
    kb = rss_kb(pid)
    return math.nan if kb is None else kb / 1024


def table(rows: Sequence[SessionsRow]) -> str:
    if not rows:
        return "(wrk not installed: skipped)"
    others = [t for t in rows[0].measured.rounds if t not in ("floor-json", "chatmend")]
    head = " | ".join(f"{t} / floor-json" for t in others)
    lines = [
        f"| session | sessions x steps | mean KB | c | floor-json rps | chatmend rps "
        f"| **chatmend / floor-json** | {head} | cache MB | RSS MB | RSS MB whole |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * (len(others) + 3),
    ]
    for r in rows:
        cells = " | ".join(f"{r.ratio(t):.2f}" for t in others)
        floor, ours = r.measured.median("floor-json").rps, r.measured.median("chatmend").rps
        lines.append(
            f"| {r.workload} | {r.sessions} x {r.steps} | {r.mean_kb:.0f} | {r.concurrency} "
            f"| {floor:,.0f} | {ours:,.0f} | **{r.ratio('chatmend'):.2f}** | {cells} "
            f"| {r.cache_mb:.1f} | {r.rss_mb:.0f} | {r.whole_rss_mb:.0f} |"
        )
    lines.append(
        f"\nFake upstream: {rows[0].upstream} (`bench.servers.start_upstream`); cache MB: what "
        "chatmend's prefix cache charges (`chatmend_prefix_cache_bytes`); RSS MB: chatmend's "
        "resident memory, RSS MB whole: chatmend-whole's (no cache), after each workload."
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 sessions of 150 messages, 2 rounds")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--peers", default="", help="comma-separated: litellm")
    parser.add_argument(
        "--workload",
        action="append",
        choices=(*WORKLOADS, *ESCAPED),
        help="measure only this workload (repeatable; default: every one but the Go client's)",
    )
    args = parser.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p]
    workloads = args.workload or WORKLOADS
    if args.quick:
        rows = run(
            workloads=workloads,
            sessions=4,
            messages=150,
            rounds=2,
            seconds=2.0,
            concurrency=args.concurrency,
            peers=peers,
        )
    else:
        rows = run(workloads=workloads, concurrency=args.concurrency, peers=peers)
    print(table(rows))


if __name__ == "__main__":
    main()
