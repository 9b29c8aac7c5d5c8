"""SSE streaming benchmark: time to first byte, per-chunk delay, coalescing, memory.

The fake upstream (``bench.servers``) answers ``"stream": true`` with ``X-Bench-Chunks`` SSE
chunks spaced ``X-Bench-Interval-Ms`` apart, each stamped with its ``time.monotonic_ns()`` at
send time (system-wide on Linux, so comparable with the client's clock). chatmend forwards
these unknown headers unchanged (only hop-by-hop headers are dropped).

The client is Python (asyncio), which is fine here: it measures latency of single chunks at
concurrency 1, not throughput. It opens one connection per request, sends the request with
``Connection: close`` and records every ``data_received`` call (= one socket read by the event
loop) with its ``monotonic_ns`` time; the response is decoded afterwards (HTTP/1.1 chunked
framing, SSE events), so timing costs the client nothing during the stream.

- **TTFB**: request written -> the read holding the first body byte (a 2-chunk stream);
  ``requests`` per target per round, targets interleaved, p50/p99 per round, medians over
  rounds; added = median of per-round (target - direct).
- **Chunk delay**: for each SSE chunk, the time of the read that completes it minus its
  upstream send stamp (one long stream per target per round; p50/p99 over its chunks).
- **Coalescing**: a chunk is "separate" when no other chunk completes in the same read.
  With the upstream spacing chunks ~1 ms apart, a relay that keeps chunking intact delivers
  ~100 % separately.
- **Memory**: a fresh process of each relay, ``streams`` concurrent long streams through it
  (aiohttp client, reading only), its ``VmRSS`` sampled every 100 ms; baseline = VmRSS after
  one warm-up stream, peak = ``VmHWM`` from ``/proc/PID/status`` at the end.

Run alone: ``.venv/bin/python -m bench.streams [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import orjson
from aiohttp import ClientSession, ClientTimeout, TCPConnector

from bench.procs import fleet, handle_sigterm, rss_kb
from bench.servers import (
    API_KEY,
    CHUNKS_HEADER,
    INTERVAL_HEADER,
    start_chatmend,
    start_fake,
    start_floor,
)
from tests.payloads import build

TARGETS: tuple[str, ...] = ("direct", "floor-raw", "chatmend", "chatmend-no-replies")
MEMORY_TARGETS: tuple[str, ...] = ("chatmend", "floor-raw")
MEMORY_LIMIT_MB = 150.0
TTFB_TARGET_MS = 1.0


@dataclass(frozen=True, slots=True)
class Params:
    rounds: int = 3
    ttfb_requests: int = 200
    chunks: int = 1000
    interval_ms: float = 1.0
    streams: int = 200
    stream_chunks: int = 200
    stream_interval_ms: float = 50.0

    @classmethod
    def quick(cls) -> Params:
        return cls(rounds=1, ttfb_requests=30, chunks=200, stream_chunks=40)


#: The tool every streamed request declares: the reply rules arm for it (under the default
#: profile, ``response-text-tool-calls`` reads DeepSeek's markups), so ``chatmend`` relays each
#: event through them; ``chatmend-no-replies`` runs with them switched off (``REPLIES_OFF``).
TOOL = {
    "type": "function",
    "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}},
}
REPLIES_OFF = (
    "rules:\n"
    "  response-text-tool-calls: false\n"
    "  response-tool-call-shape: false\n"
    "  response-finish-reason: false\n"
)


def stream_body() -> bytes:
    body = orjson.loads(build(10))
    body["stream"] = True
    body["tools"] = [TOOL]
    return orjson.dumps(body)


# --- one request, recorded read by read ----------------------------------------------------


class _Recorder(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]) -> None:
        self.reads: list[tuple[int, bytes]] = []
        self.done = done

    def data_received(self, data: bytes) -> None:
        self.reads.append((time.monotonic_ns(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


@dataclass(frozen=True, slots=True)
class Capture:
    sent_ns: int
    reads: list[tuple[int, bytes]]


def request_bytes(host: str, port: int, body: bytes, chunks: int, interval_ms: float) -> bytes:
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
        f"Authorization: Bearer {API_KEY}\r\n"
        f"{CHUNKS_HEADER}: {chunks}\r\n{INTERVAL_HEADER}: {interval_ms}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def fetch(url: str, request: bytes, timeout: float = 120.0) -> Capture:
    """Connect, then time from writing ``request`` to every read until the server closes."""
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    transport, protocol = await loop.create_connection(
        lambda: _Recorder(done), parts.hostname or "127.0.0.1", parts.port or 80
    )
    try:
        sent = time.monotonic_ns()
        transport.write(request)
        await asyncio.wait_for(done, timeout)
    finally:
        transport.close()
    return Capture(sent, protocol.reads)


# --- decoding a capture --------------------------------------------------------------------


@dataclass(slots=True)
class Decoded:
    status: int
    #: ns from writing the request to the read holding the first body byte (-1: no body).
    ttfb_ns: int
    #: (index of the read completing the chunk, upstream send stamp, receive time) per chunk.
    chunks: list[tuple[int, int, int]] = field(default_factory=list)
    done: bool = False

    def delays_us(self) -> list[float]:
        return [(recv - sent) / 1000 for _, sent, recv in self.chunks]

    def separate(self) -> int:
        per_read = Counter(read for read, _, _ in self.chunks)
        return sum(1 for read, _, _ in self.chunks if per_read[read] == 1)

    def spacing_ms(self) -> float:
        stamps = [sent for _, sent, _ in self.chunks]
        gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(stamps)]
        return statistics.median(gaps) if gaps else math.nan


def decode(capture: Capture) -> Decoded:
    """Undo HTTP/1.1 framing, keeping for each body byte the read that delivered it."""
    raw = b"".join(data for _, data in capture.reads)
    ends = list(itertools.accumulate(len(data) for _, data in capture.reads))
    head_end = raw.find(b"\r\n\r\n")
    if head_end < 0:
        raise RuntimeError(f"no HTTP response head in {raw[:200]!r}")
    head = raw[:head_end].decode("latin-1")
    status = int(head.split(" ", 2)[1])
    pos = head_end + 4
    # (body offset, raw offset, length) of each run of body bytes.
    segments: list[tuple[int, int, int]] = []
    if "transfer-encoding: chunked" in head.lower():
        body_len = 0
        while pos < len(raw):
            line_end = raw.find(b"\r\n", pos)
            size = int(raw[pos:line_end].split(b";")[0], 16)
            pos = line_end + 2
            if size == 0:
                break
            segments.append((body_len, pos, size))
            body_len += size
            pos += size + 2
    elif pos < len(raw):
        segments.append((0, pos, len(raw) - pos))
    body = b"".join(raw[r : r + n] for _, r, n in segments)
    starts = [b for b, _, _ in segments]

    def read_of(body_offset: int) -> int:
        b, r, _ = segments[bisect.bisect_right(starts, body_offset) - 1]
        return bisect.bisect_right(ends, r + body_offset - b)

    ttfb = capture.reads[read_of(0)][0] - capture.sent_ns if segments else -1
    out = Decoded(status, ttfb)
    start = 0
    while (end := body.find(b"\n\n", start)) >= 0:
        event, start = body[start:end], end + 2
        if not event.startswith(b"data:"):
            continue
        data = event[5:].strip()
        if data == b"[DONE]":
            out.done = True
            continue
        read = read_of(end + 1)
        sent = orjson.loads(data).get("bench_sent_ns")
        if isinstance(sent, int):
            out.chunks.append((read, sent, capture.reads[read][0]))
    return out


# --- the workloads -------------------------------------------------------------------------


def _p(values: Sequence[float], q: int) -> float:
    if not values:
        return math.nan
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclass(frozen=True, slots=True)
class RoundStats:
    ttfb_p50_ms: float
    ttfb_p99_ms: float
    delay_p50_ms: float
    delay_p99_ms: float
    separate: int
    chunks: int
    spacing_ms: float
    failures: int


@dataclass(frozen=True, slots=True)
class TargetStreams:
    rounds: list[RoundStats]

    def median(self, name: str) -> float:
        values = [getattr(r, name) for r in self.rounds]
        return float(statistics.median(values))

    def added(self, base: TargetStreams, name: str) -> float:
        """Median of per-round (self - base) for one statistic."""
        pairs = zip(self.rounds, base.rounds, strict=True)
        diffs = [getattr(a, name) - getattr(b, name) for a, b in pairs]
        return float(statistics.median(diffs))

    @property
    def separate(self) -> int:
        return sum(r.separate for r in self.rounds)

    @property
    def chunks(self) -> int:
        return sum(r.chunks for r in self.rounds)

    @property
    def failures(self) -> int:
        return sum(r.failures for r in self.rounds)


async def _one_round(url: str, body: bytes, p: Params) -> RoundStats:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    failures = 0
    ttfbs: list[float] = []
    short = request_bytes(host, port, body, 2, 0)
    for _ in range(p.ttfb_requests):
        got = decode(await fetch(url, short))
        if got.status != 200 or not got.done:
            failures += 1
        ttfbs.append(got.ttfb_ns / 1e6)
    long = decode(await fetch(url, request_bytes(host, port, body, p.chunks, p.interval_ms)))
    if long.status != 200 or not long.done or len(long.chunks) != p.chunks:
        failures += 1
    delays = [d / 1000 for d in long.delays_us()]
    return RoundStats(
        statistics.median(ttfbs),
        _p(ttfbs, 99),
        statistics.median(delays) if delays else math.nan,
        _p(delays, 99),
        long.separate(),
        len(long.chunks),
        long.spacing_ms(),
        failures,
    )


async def latency(urls: dict[str, str], p: Params) -> dict[str, TargetStreams]:
    body = stream_body()
    for url in urls.values():  # warm-up: upstream pools, caches
        parts = urlsplit(url)
        warm = request_bytes(parts.hostname or "127.0.0.1", parts.port or 80, body, 2, 0)
        for _ in range(5):
            await fetch(url, warm)
    rounds: dict[str, list[RoundStats]] = {t: [] for t in urls}
    for _ in range(p.rounds):
        for target, url in urls.items():
            rounds[target].append(await _one_round(url, body, p))
    return {t: TargetStreams(r) for t, r in rounds.items()}


@dataclass(frozen=True, slots=True)
class MemoryResult:
    target: str
    streams: int
    completed: int
    baseline_mb: float
    sampled_peak_mb: float
    peak_mb: float
    seconds: float

    @property
    def met(self) -> bool:
        return self.peak_mb < MEMORY_LIMIT_MB and self.completed == self.streams


def _mb(kb: int | None) -> float:
    return math.nan if kb is None else kb * 1024 / 1e6


async def _hold(url: str, body: bytes, p: Params) -> tuple[int, float]:
    """``p.streams`` concurrent long streams; (how many ended with [DONE], seconds)."""
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {API_KEY}",
        CHUNKS_HEADER: str(p.stream_chunks),
        INTERVAL_HEADER: str(p.stream_interval_ms),
    }

    async def one(session: ClientSession) -> bool:
        tail = b""
        async with session.post(url + "/v1/chat/completions", data=body, headers=headers) as r:
            async for data in r.content.iter_any():
                tail = (tail + data)[-32:]
            return r.status == 200 and tail.endswith(b"data: [DONE]\n\n")

    started = time.monotonic()
    async with ClientSession(
        connector=TCPConnector(limit=0), timeout=ClientTimeout(total=None, sock_read=60)
    ) as session:
        results = await asyncio.gather(
            *(one(session) for _ in range(p.streams)), return_exceptions=True
        )
    return sum(1 for r in results if r is True), time.monotonic() - started


async def _memory_one(target: str, url: str, pid: int, p: Params) -> MemoryResult:
    body = stream_body()
    await _hold(url, body, Params(streams=1, stream_chunks=5, stream_interval_ms=1))  # warm-up
    baseline = _mb(rss_kb(pid))
    peak_seen = baseline
    holding = asyncio.ensure_future(_hold(url, body, p))
    while not holding.done():
        peak_seen = max(peak_seen, _mb(rss_kb(pid)))
        await asyncio.wait({holding}, timeout=0.1)
    completed, seconds = holding.result()
    return MemoryResult(
        target, p.streams, completed, baseline, peak_seen, _mb(rss_kb(pid, "VmHWM")), seconds
    )


def memory(p: Params) -> list[MemoryResult]:
    """Each relay fresh (so VmHWM is this workload's peak), one at a time."""
    results = []
    for target in MEMORY_TARGETS:
        with fleet() as servers:
            upstream = start_fake(servers)
            if target == "chatmend":
                url = start_chatmend(servers, upstream)
            else:
                url = start_floor(servers, target, upstream)
            results.append(asyncio.run(_memory_one(target, url, servers.pid(target), p)))
        r = results[-1]
        print(
            f"  memory {target}: {r.completed}/{r.streams} streams, baseline "
            f"{r.baseline_mb:.1f} MB, peak {r.peak_mb:.1f} MB",
            file=sys.stderr,
        )
    return results


@dataclass(frozen=True, slots=True)
class StreamsReport:
    params: Params
    targets: dict[str, TargetStreams]
    memory: list[MemoryResult]


def run(p: Params | None = None) -> StreamsReport:
    p = p or Params()
    with fleet() as servers:
        upstream = start_fake(servers, "direct")
        start_floor(servers, "floor-raw", upstream)
        start_chatmend(servers, upstream)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as off:
            off.write(REPLIES_OFF)
            off.flush()
            start_chatmend(servers, upstream, "chatmend-no-replies", extra=["--config", off.name])
            targets = asyncio.run(latency(dict(servers.urls), p))
    for name, t in targets.items():
        print(
            f"  streams {name}: ttfb p50 {t.median('ttfb_p50_ms'):.3f} ms, delay p50 "
            f"{t.median('delay_p50_ms'):.3f} ms, separate {t.separate}/{t.chunks}",
            file=sys.stderr,
        )
    return StreamsReport(p, targets, memory(p))


# --- tables --------------------------------------------------------------------------------


def _pct(part: int, whole: int) -> str:
    return f"{part:,} / {whole:,} ({100 * part / whole:.1f} %)" if whole else "-"


def tables(report: StreamsReport) -> str:
    p, direct = report.params, report.targets["direct"]
    lines = [
        f"Time to first byte: {p.ttfb_requests} requests per target per round (2-chunk "
        f"stream, c=1, a new connection each); chunk delay and coalescing: one stream of "
        f"{p.chunks} chunks spaced {p.interval_ms:g} ms per target per round; {p.rounds} "
        "interleaved round(s), medians over rounds. Added = vs `direct`, paired per round.",
        "",
        "| target | TTFB p50 / p99 ms | added TTFB p50 / p99 ms | chunk delay p50 / p99 ms "
        "| added delay p50 / p99 ms | chunks delivered separately | upstream spacing ms "
        "| failed requests |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in report.targets.items():
        added_ttfb = added_delay = "-"
        if name != "direct":
            added_ttfb = (
                f"**{t.added(direct, 'ttfb_p50_ms'):+.3f}** / {t.added(direct, 'ttfb_p99_ms'):+.3f}"
            )
            added_delay = (
                f"{t.added(direct, 'delay_p50_ms'):+.3f} / {t.added(direct, 'delay_p99_ms'):+.3f}"
            )
        lines.append(
            f"| {name} | {t.median('ttfb_p50_ms'):.3f} / {t.median('ttfb_p99_ms'):.3f} "
            f"| {added_ttfb} | {t.median('delay_p50_ms'):.3f} / {t.median('delay_p99_ms'):.3f} "
            f"| {added_delay} | {_pct(t.separate, t.chunks)} | {t.median('spacing_ms'):.3f} "
            f"| {t.failures} |"
        )
    lines += [
        "",
        f"Memory: {p.streams} concurrent streams of {p.stream_chunks} chunks every "
        f"{p.stream_interval_ms:g} ms (~{p.stream_chunks * p.stream_interval_ms / 1000:.0f} s) "
        "through a fresh process of each relay; MB = 10^6 bytes; peak = VmHWM.",
        "",
        "| relay | streams completed | baseline RSS MB | peak RSS (sampled) MB | peak RSS "
        f"(VmHWM) MB | under {MEMORY_LIMIT_MB:.0f} MB | wall s |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for m in report.memory:
        lines.append(
            f"| {m.target} | {m.completed} / {m.streams} | {m.baseline_mb:.1f} "
            f"| {m.sampled_peak_mb:.1f} | **{m.peak_mb:.1f}** | {'yes' if m.met else 'no'} "
            f"| {m.seconds:.1f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="SSE streaming benchmark.")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    handle_sigterm()
    params = Params.quick() if args.quick else Params(rounds=args.rounds)
    print(tables(run(params)))


if __name__ == "__main__":
    main()
