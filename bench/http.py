"""HTTP benchmark on loopback, driven by ``wrk``: chatmend against the direct upstream and floors.

Targets, each a subprocess (see ``bench.servers``), all in front of the same fake upstream:

- ``direct``: wrk straight at the fake upstream (what any relay adds is measured against it);
- ``floor-raw``: minimal aiohttp relay, bytes only;
- ``floor-json``: the same plus one orjson parse and serialize;
- ``chatmend``: ``chatmend serve`` with its default config;
- peers, on request (``--peers litellm``, see ``bench.peers``).

``wrk`` (one thread, a Lua script) posts one payload file to ``/v1/chat/completions``. For each
payload and concurrency the targets are measured interleaved: a 1 s warm-up of each, then
round after round every target once. Figures are medians over rounds; ratios (chatmend /
floor-json, chatmend / peer) and added latency (target p50 - direct p50, same for p99) are
computed per round and their median reported, so slow drift of the machine cancels out.
Non-2xx answers and socket errors are counted per target, never fatal: a peer that rejects
the broken payloads is a finding. Skipped if ``wrk`` is missing.

Run alone: ``.venv/bin/python -m bench.http [--quick] [--peers litellm]``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import peers as peer_mod
from bench.procs import fleet, handle_sigterm, uvloop_available
from bench.servers import API_KEY, default_loop, start_chatmend, start_fake, start_floor
from tests.payloads import SIZES, VARIANTS, build_variant

CONCURRENCY: tuple[int, ...] = (1, 4, 16, 64)
QUICK_SIZES: tuple[int, ...] = (10, 500)
QUICK_CONCURRENCY: tuple[int, ...] = (1, 16)
TARGETS: tuple[str, ...] = ("direct", "floor-raw", "floor-json", "chatmend")
RELAYS: tuple[str, ...] = ("floor-raw", "floor-json", "chatmend")
LUA = f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {API_KEY}"
local f = assert(io.open(os.getenv("BENCH_PAYLOAD"), "rb"))
wrk.body = f:read("*a")
f:close()
"""
WRK_TIMEOUT = "10s"


@dataclass(frozen=True, slots=True)
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int = 0
    non2xx: int = 0
    #: Socket errors: connect + read + write + timeout.
    errors: int = 0

    @property
    def clean(self) -> bool:
        return self.non2xx == 0 and self.errors == 0


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _latency_ms(output: str, percentile: str) -> float:
    match = re.search(rf"^\s+{percentile}%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
    return float(match.group(1)) * _UNITS[match.group(2)] if match else math.nan


def parse_wrk(output: str) -> WrkResult:
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if not match:
        raise RuntimeError(f"cannot read wrk output:\n{output}")
    requests = re.search(r"(\d+) requests in", output)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    socket = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    return WrkResult(
        float(match.group(1)),
        _latency_ms(output, "50"),
        _latency_ms(output, "99"),
        int(requests.group(1)) if requests else 0,
        int(non2xx.group(1)) if non2xx else 0,
        sum(int(g) for g in socket.groups()) if socket else 0,
    )


def wrk(url: str, script: Path, payload: Path, concurrency: int, seconds: float) -> WrkResult:
    command = [
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{max(1, round(seconds))}s",
        f"--timeout={WRK_TIMEOUT}",
        "--latency",
        "-s",
        str(script),
        url + "/v1/chat/completions",
    ]
    env = {**os.environ, "BENCH_PAYLOAD": str(payload)}
    return parse_wrk(
        subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    )


@dataclass(frozen=True, slots=True)
class Measured:
    """One workload, every target, every round."""

    rounds: dict[str, list[WrkResult]]

    def median(self, target: str) -> WrkResult:
        s = self.rounds[target]
        return WrkResult(
            statistics.median(r.rps for r in s),
            statistics.median(r.p50_ms for r in s),
            statistics.median(r.p99_ms for r in s),
            sum(r.requests for r in s),
            sum(r.non2xx for r in s),
            sum(r.errors for r in s),
        )

    def ratio(self, num: str, den: str) -> float:
        """Median of per-round req/s ratios, over the rounds where both answered only 2xx."""
        pairs = zip(self.rounds[num], self.rounds[den], strict=True)
        ratios = [a.rps / b.rps for a, b in pairs if a.clean and b.clean and b.rps > 0]
        return statistics.median(ratios) if ratios else math.nan

    def added(self, target: str, base: str = "direct") -> tuple[float, float]:
        """Median of per-round (target - base) p50 and p99 latency, in ms."""
        pairs = list(zip(self.rounds[target], self.rounds[base], strict=True))
        return (
            statistics.median(a.p50_ms - b.p50_ms for a, b in pairs),
            statistics.median(a.p99_ms - b.p99_ms for a, b in pairs),
        )


def measure(
    urls: Mapping[str, str],
    script: Path,
    payload: Path,
    concurrency: int,
    *,
    rounds: int,
    seconds: float,
) -> Measured:
    """A 1 s warm-up of each target, then ``rounds`` rounds, targets interleaved."""
    for url in urls.values():
        wrk(url, script, payload, concurrency, 1)
    samples: dict[str, list[WrkResult]] = {t: [] for t in urls}
    for _ in range(rounds):
        for target, url in urls.items():
            samples[target].append(wrk(url, script, payload, concurrency, seconds))
    return Measured(samples)


@dataclass(frozen=True, slots=True)
class HttpRow:
    messages: int
    variant: str
    concurrency: int
    measured: Measured

    @property
    def targets(self) -> list[str]:
        return list(self.measured.rounds)

    @property
    def ratio(self) -> float:
        """chatmend / floor-json throughput (median of per-round ratios)."""
        return self.measured.ratio("chatmend", "floor-json")


def write_payloads(
    tmp: Path, sizes: Sequence[int], variants: Sequence[str] = VARIANTS
) -> dict[tuple[int, str], Path]:
    """Payload files for wrk's Lua script, one per size and variant."""
    paths: dict[tuple[int, str], Path] = {}
    for size in sizes:
        for variant in variants:
            paths[size, variant] = tmp / f"{size}-{variant}.json"
            paths[size, variant].write_bytes(build_variant(size, variant))
    return paths


def write_script(tmp: Path) -> Path:
    script = tmp / "post.lua"
    script.write_text(LUA)
    return script


@dataclass(slots=True)
class HttpRun:
    rows: list[HttpRow] = field(default_factory=list)
    #: What the peers are (versions, settings) and what they answered when they refused.
    notes: list[str] = field(default_factory=list)


def run(
    sizes: Sequence[int] = SIZES,
    concurrency: Sequence[int] = CONCURRENCY,
    *,
    rounds: int = 3,
    seconds: float = 2.0,
    peers: Sequence[str] = (),
    variants: Sequence[str] = VARIANTS,
) -> HttpRun:
    """Measure every payload x concurrency, targets interleaved in each round."""
    out = HttpRun()
    if shutil.which("wrk") is None:
        return out
    with tempfile.TemporaryDirectory(prefix="chatmend-bench-") as tmp_name, fleet() as servers:
        tmp = Path(tmp_name)
        upstream = start_fake(servers, "direct")
        start_floor(servers, "floor-raw", upstream)
        start_floor(servers, "floor-json", upstream)
        start_chatmend(servers, upstream)
        for peer in peers:
            peer_mod.start(peer, servers, upstream, tmp)
            out.notes.append(peer_mod.describe(peer))
        urls = dict(servers.urls)
        script = write_script(tmp)
        refused: set[tuple[str, int, str]] = set()
        payloads = write_payloads(tmp, sizes, variants)
        for (size, variant), payload in payloads.items():
            for conc in concurrency:
                measured = measure(urls, script, payload, conc, rounds=rounds, seconds=seconds)
                row = HttpRow(size, variant, conc, measured)
                out.rows.append(row)
                refused.update((p, size, variant) for p in peers if measured.median(p).non2xx)
                added = measured.added("chatmend")
                extra = "".join(
                    f", chatmend/{p} {measured.ratio('chatmend', p):.1f}" for p in peers
                )
                print(
                    f"  http {size} {row.variant} c={conc}: chatmend/floor-json {row.ratio:.2f}, "
                    f"added p50 {added[0]:+.2f} ms p99 {added[1]:+.2f} ms{extra}",
                    file=sys.stderr,
                )
        for peer, size, variant in sorted(refused):
            status, text = peer_mod.probe(urls[peer], payloads[size, variant].read_bytes())
            out.notes.append(
                f"`{peer}` answered non-2xx to the {size}-message "
                f"{variant} payload; one probe: HTTP {status}, "
                f"`{' '.join(text.split())[:200]}`"
            )
    return out


# --- tables --------------------------------------------------------------------------------


def _fmt_ratio(value: float) -> str:
    return "n/a" if math.isnan(value) else f"**{value:.2f}**"


def _failures(row: HttpRow) -> str:
    notes = []
    for target in row.targets:
        m = row.measured.median(target)
        if m.non2xx:
            notes.append(f"{target}: {m.non2xx:,}/{m.requests:,} non-2xx")
        if m.errors:
            notes.append(f"{target}: {m.errors:,} socket errors")
    return "; ".join(notes) or "-"


def throughput_table(rows: Sequence[HttpRow]) -> str:
    if not rows:
        return "_No rows._"
    targets = rows[0].targets
    peers = [t for t in targets if t not in TARGETS]
    head = ["messages", "payload", "conc.", *(f"{t} req/s" for t in targets)]
    head += ["chatmend / floor-json", *(f"chatmend / {p}" for p in peers), "non-2xx / errors"]
    lines = ["| " + " | ".join(head) + " |", "|---:|---|" + "---:|" * (len(head) - 3) + "---|"]
    for r in rows:
        cells = [str(r.messages), r.variant, str(r.concurrency)]
        cells += [f"{r.measured.median(t).rps:,.0f}" for t in targets]
        cells.append(_fmt_ratio(r.ratio))
        cells += [_fmt_ratio(r.measured.ratio("chatmend", p)) for p in peers]
        cells.append(_failures(r))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def latency_table(rows: Sequence[HttpRow]) -> str:
    if not rows:
        return "_No rows._"
    relays = [t for t in rows[0].targets if t != "direct"]
    head = ["messages", "payload", "conc.", "direct p50 / p99 ms", "chatmend p50 / p99 ms"]
    head += [f"{t} added p50 / p99 ms" for t in relays]
    lines = ["| " + " | ".join(head) + " |", "|---:|---|" + "---:|" * (len(head) - 2)]
    for r in rows:
        direct, mend = r.measured.median("direct"), r.measured.median("chatmend")
        cells = [
            str(r.messages),
            r.variant,
            str(r.concurrency),
            f"{direct.p50_ms:.2f} / {direct.p99_ms:.2f}",
            f"{mend.p50_ms:.2f} / {mend.p99_ms:.2f}",
        ]
        for t in relays:
            p50, p99 = r.measured.added(t)
            text = f"{p50:+.2f} / {p99:+.2f}"
            cells.append(f"**{text}**" if t == "chatmend" else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def floors_loop_note() -> str:
    fake = "uvloop" if uvloop_available() else "asyncio"
    return f"The floors run on {default_loop()} (chatmend's default loop), the fake on {fake}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="wrk benchmark of chatmend vs floors.")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--peers", default="", help="comma-separated: litellm")
    args = parser.parse_args(argv)
    handle_sigterm()
    result = run(
        QUICK_SIZES if args.quick else SIZES,
        QUICK_CONCURRENCY if args.quick else CONCURRENCY,
        rounds=1 if args.quick else args.rounds,
        seconds=1 if args.quick else args.seconds,
        peers=peer_mod.parse(args.peers),
    )
    print(throughput_table(result.rows))
    print()
    print(latency_table(result.rows))
    print("\n".join(result.notes))


if __name__ == "__main__":
    main()
