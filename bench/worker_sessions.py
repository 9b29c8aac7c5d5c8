"""Growing sessions under ``chatmend serve --workers 2``: the prefix cache's hit rate for
agents that keep their connection and for ones that reconnect for every request, with session
routing (``prefix_cache.route_sessions``, proxy/relay/owners.py) on and off; then, with wrk,
reconnecting clients' throughput against floor-json's.

The bodies are ``tests.sessions``' (``clean``: each request the previous one of its session plus
a turn), the sessions interleaved step by step. The hit rate is read from the workers'
``/metrics`` (``chatmend_prefix_reads_total``, summed over the workers; the hand-overs from
``chatmend_worker_handovers_total``), over one pass of every session, sent one request at a
time: ``keep`` (one connection per session, kept) and ``reconnect`` (a new connection per
request, ``Connection: close``).

Run: ``.venv/bin/python -m bench.worker_sessions [--quick] [--no-wrk]`` (not part of
``make test``; the wrk part needs wrk).
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.http import measure
from bench.http_sessions import LUA
from bench.procs import fleet
from bench.servers import API_KEY, start_chatmend, start_floor, start_upstream
from tests.sessions import session

PATH = "/v1/chat/completions"
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
TARGETS = {"routed": "route_sessions: true", "scattered": "route_sessions: false"}


@dataclass(frozen=True, slots=True)
class HitRow:
    target: str
    clients: str
    requests: int
    hits: int
    misses: int
    relayed: int
    #: Of the bytes sent, the share not parsed again (the cached prefixes hits started from).
    reused: float
    #: Sessions held in all (the workers' entries) and what they charge, after the pass.
    entries: int
    cache_mb: float

    @property
    def rate(self) -> float:
        return self.hits / max(1, self.hits + self.misses)


def counters(url: str) -> dict[str, float]:
    """The prefix cache's reads and the hand-overs, summed over the workers (``/metrics``)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found: dict[str, float] = {"hit": 0.0, "miss": 0.0, "relayed": 0.0}
    for line in text.splitlines():
        for name, metric in (
            ("reused", "chatmend_prefix_reused_bytes_total "),
            ("entries", "chatmend_prefix_cache_entries "),
            ("bytes", "chatmend_prefix_cache_bytes "),
        ):
            if line.startswith(metric):
                found[name] = float(line.split()[-1])
        for name in ("hit", "miss"):
            if line.startswith(f'chatmend_prefix_reads_total{{result="{name}"}}'):
                found[name] = float(line.split()[-1])
        if line.startswith('chatmend_worker_handovers_total{result="relayed"}'):
            found["relayed"] = float(line.split()[-1])
    return found


def send(url: str, bodies: Sequence[Sequence[bytes]], *, keep: bool) -> int:
    """Post each session's bodies in turn, the sessions at once (a thread each, as concurrent
    agents send them); ``keep``: one connection per session, else one per request."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80

    def one_session(one: Sequence[bytes]) -> int:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        headers = HEADERS if keep else {**HEADERS, "Connection": "close"}
        try:
            for body in one:
                conn.request("POST", PATH, body=body, headers=headers)
                answer = conn.getresponse()
                answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"{url}: status {answer.status}")
                if not keep:
                    conn.close()
                    conn = http.client.HTTPConnection(host, port, timeout=60)
        finally:
            conn.close()
        return len(one)

    with ThreadPoolExecutor(len(bodies)) as pool:
        return sum(pool.map(one_session, bodies))


def hit_rates(urls: dict[str, str], sessions: int, messages: int) -> list[HitRow]:
    """Per target and client kind: one pass of fresh sessions (their seeds differ per pass)."""
    rows = []
    seed = 1000
    for clients in ("keep", "reconnect"):
        for target in TARGETS:
            bodies = [session(messages, "clean", seed=seed + n) for n in range(sessions)]
            size = sum(len(body) for one in bodies for body in one)
            seed += sessions
            before = counters(urls[target])
            sent = send(urls[target], bodies, keep=clients == "keep")
            after = counters(urls[target])
            rows.append(
                HitRow(
                    target,
                    clients,
                    sent,
                    int(after["hit"] - before["hit"]),
                    int(after["miss"] - before["miss"]),
                    int(after["relayed"] - before["relayed"]),
                    (after["reused"] - before["reused"]) / size,
                    int(after["entries"] - before["entries"]),
                    (after["bytes"] - before["bytes"]) / 1e6,
                )
            )
    return rows


def hit_table(rows: Sequence[HitRow]) -> str:
    lines = [
        "| chatmend --workers 2 | clients | requests | hits | misses | **hit rate** "
        "| bytes not parsed again | relayed | sessions held | cache MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.target} | {r.clients} | {r.requests} | {r.hits} | {r.misses} "
        f"| **{r.rate:.0%}** | {r.reused:.1%} | {r.relayed} | {r.entries} | {r.cache_mb:.1f} |"
        for r in rows
    ]
    return "\n".join(lines)


#: wrk's sessions script with a new connection for every request.
RECONNECT_LUA = LUA.replace(
    'wrk.headers["Content-Type"]',
    'wrk.headers["Connection"] = "close"\nwrk.headers["Content-Type"]',
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 sessions of 100 messages")
    parser.add_argument("--no-wrk", action="store_true", help="the hit rates only")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    sessions, messages = (4, 100) if args.quick else (8, 200)
    with tempfile.TemporaryDirectory(prefix="chatmend-workers-bench-") as tmp_name, fleet() as f:
        tmp = Path(tmp_name)
        upstream, kind = start_upstream(f, "direct")
        print(f"fake upstream: {kind}", file=sys.stderr)
        for target, setting in TARGETS.items():
            config = tmp / f"{target}.yaml"
            config.write_text(f"prefix_cache: {{{setting}}}\n")
            start_chatmend(f, upstream, target, extra=["--workers", "2", "--config", str(config)])
        urls = {t: f.urls[t] for t in TARGETS}
        rows = hit_rates(urls, sessions, messages)
        print(hit_table(rows))
        if args.no_wrk or shutil.which("wrk") is None:
            return
        start_floor(f, "floor-json", upstream)
        each = [session(messages, "clean", seed=7000 + n) for n in range(sessions)]
        bodies = [one[k] for k in range(max(map(len, each))) for one in each if k < len(one)]
        payload = tmp / "clean.lines"
        payload.write_bytes(b"\n".join(bodies) + b"\n")
        for clients, lua in (("keep", LUA), ("reconnect", RECONNECT_LUA)):
            script = tmp / f"{clients}.lua"
            script.write_text(lua)
            targets = {"floor-json": f.urls["floor-json"], **urls}
            rounds = 2 if args.quick else 3
            before = {t: counters(urls[t]) for t in urls}
            measured = measure(
                targets, script, payload, args.concurrency, rounds=rounds, seconds=3.0
            )
            after = {t: counters(urls[t]) for t in urls}
            cells = ", ".join(
                f"{t} {measured.median(t).rps:,.0f} req/s ({measured.ratio(t, 'floor-json'):.2f}x)"
                for t in targets
            )
            for t in urls:
                hits = after[t]["hit"] - before[t]["hit"]
                misses = after[t]["miss"] - before[t]["miss"]
                relayed = after[t]["relayed"] - before[t]["relayed"]
                cells += (
                    f"; {t}: hit rate {hits / max(1, hits + misses):.0%}, relayed {relayed:.0f}"
                )
            print(f"{clients} clients, c={args.concurrency}: {cells}", file=sys.stderr)
            print(f"- {clients}: {cells}")


if __name__ == "__main__":
    main()
