"""Render a benchmark run: the targets summary, ``latest.md`` and ``latest.png``.

Pure formatting of results measured elsewhere (``bench.run`` calls it); no measurement here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import http, loops, micro, streams
from tests.payloads import VARIANTS

CLEAN_TARGET = 1.0
BROKEN_TARGET = 0.80
SANITIZER_TARGET = 1.5
LITELLM_TARGET = 10.0
SEPARATE_TARGET = 0.99
#: Sanitizer µs per message at 2000 vs 500 messages: within this factor counts as linear.
LINEAR_TOLERANCE = 1.25


@dataclass(slots=True)
class Results:
    micro_rows: list[micro.MicroRow]
    http: http.HttpRun = field(default_factory=http.HttpRun)
    http_skipped: str | None = None
    streams: streams.StreamsReport | None = None
    streams_skipped: str | None = None
    loops: list[loops.LoopRow] = field(default_factory=list)
    loops_skipped: str | None = None
    peers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    measured: str
    #: True met, False missed, None not measured in this run.
    met: bool | None


def _where(row: http.HttpRow) -> str:
    return f"{row.messages} msgs, c={row.concurrency}"


def _min_ratio(rows: Sequence[http.HttpRow], variant: str, limit: float, name: str) -> Target:
    chosen = [r for r in rows if r.variant.startswith(variant) and not math.isnan(r.ratio)]
    if not chosen:
        return Target(name, "not measured", None)
    worst = min(chosen, key=lambda r: r.ratio)
    below = sum(1 for r in chosen if r.ratio < limit)
    text = f"min **{worst.ratio:.2f}** ({_where(worst)}); {below} of {len(chosen)} rows below"
    return Target(name, text, below == 0)


def targets(res: Results) -> list[Target]:
    out: list[Target] = []
    rows = res.http.rows
    for variant, limit in (("clean", CLEAN_TARGET), ("broken", BROKEN_TARGET)):
        name = f"{variant}: chatmend >= {limit:.2f} x floor-json, every size and concurrency"
        out.append(_min_ratio(rows, variant, limit, name))
    big = [r for r in res.micro_rows if r.variant == "broken" and r.messages in (500, 2000)]
    if big:
        worst = max(big, key=lambda r: r.ratio)
        out.append(
            Target(
                f"sanitizer alone <= {SANITIZER_TARGET} x orjson (broken 500, 2000 msgs)",
                f"max **{worst.ratio:.2f}** ({worst.messages} msgs)",
                worst.ratio <= SANITIZER_TARGET,
            )
        )
    per_msg = {
        r.messages: r.per_message(r.pipeline_us) for r in res.micro_rows if r.variant == "broken"
    }
    if 500 in per_msg and 2000 in per_msg:
        growth = per_msg[2000] / per_msg[500]
        out.append(
            Target(
                "sanitizer linear in size (broken, µs/msg at 2000 vs 500)",
                f"{per_msg[500]:.2f} -> {per_msg[2000]:.2f} µs/msg (x{growth:.2f})",
                growth <= LINEAR_TOLERANCE,
            )
        )
    if res.streams is not None:
        direct = res.streams.targets["direct"]
        mend = res.streams.targets["chatmend"]
        added = mend.added(direct, "ttfb_p50_ms")
        out.append(
            Target(
                f"streams: added TTFB <= {streams.TTFB_TARGET_MS:g} ms p50 at c=1",
                f"**{added:+.3f} ms** (p99 {mend.added(direct, 'ttfb_p99_ms'):+.3f} ms)",
                added <= streams.TTFB_TARGET_MS,
            )
        )
        share = mend.separate / mend.chunks if mend.chunks else 0.0
        direct_share = direct.separate / direct.chunks if direct.chunks else 0.0
        out.append(
            Target(
                "streams: chunks relayed one by one (no coalescing)",
                f"**{100 * share:.1f} %** separate (direct {100 * direct_share:.1f} %)",
                share >= SEPARATE_TARGET,
            )
        )
        out.extend(
            Target(
                f"streams: {m.streams} concurrent under {streams.MEMORY_LIMIT_MB:.0f} MB RSS",
                f"peak **{m.peak_mb:.1f} MB** (baseline {m.baseline_mb:.1f} MB, "
                f"{m.completed}/{m.streams} completed)",
                m.met,
            )
            for m in res.streams.memory
            if m.target == "chatmend"
        )
    else:
        out.append(Target("streams (TTFB, coalescing, memory)", "not measured", None))
    if "litellm" in res.peers and rows:
        c16 = [r for r in rows if r.concurrency == 16]
        ratios = [(r.measured.ratio("chatmend", "litellm"), r) for r in c16]
        valid = [(v, r) for v, r in ratios if not math.isnan(v)]
        refused = len(ratios) - len(valid)
        note = f"; {refused} row(s) with litellm non-2xx/errors, no ratio" if refused else ""
        if valid:
            lowest, row = min(valid, key=lambda vr: vr[0])
            out.append(
                Target(
                    f"chatmend >= {LITELLM_TARGET:g} x LiteLLM at c=16",
                    f"min **{lowest:.1f}** ({row.messages} msgs {row.variant}){note}",
                    lowest >= LITELLM_TARGET,
                )
            )
        else:
            out.append(Target("chatmend >= 10 x LiteLLM at c=16", "no 2xx rows" + note, None))
    else:
        out.append(
            Target(
                f"chatmend >= {LITELLM_TARGET:g} x LiteLLM at c=16",
                "not measured (`make bench PEERS=litellm`)",
                None,
            )
        )
    return out


def targets_table(items: Sequence[Target]) -> str:
    lines = ["| target | measured | status |", "|---|---|---|"]
    for t in items:
        status = "not measured" if t.met is None else ("met" if t.met else "**missed**")
        lines.append(f"| {t.name} | {t.measured} | {status} |")
    return "\n".join(lines)


# --- figure --------------------------------------------------------------------------------


def plot(res: Results, path: Path) -> bool:
    """Ratio vs payload size (sanitizer, HTTP) and added latency vs concurrency.

    False if matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = res.http.rows
    panels = 3 if rows else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.8), squeeze=False)
    ax = axes[0][0]
    for variant in VARIANTS:
        mrows = [r for r in res.micro_rows if r.variant == variant]
        ax.plot([r.messages for r in mrows], [r.ratio for r in mrows], marker="o", label=variant)
    ax.axhline(SANITIZER_TARGET, color="grey", linestyle="--", label="target (broken) 1.5x")
    ax.set(
        xscale="log",
        xlabel="messages",
        ylabel="sanitize_body / orjson loads+dumps",
        title="Sanitizer alone vs orjson round trip",
    )
    ax.legend()
    if rows:
        ax = axes[0][1]
        for variant in VARIANTS:
            for conc in sorted({r.concurrency for r in rows}):
                sel = [r for r in rows if r.variant == variant and r.concurrency == conc]
                ax.plot(
                    [r.messages for r in sel],
                    [r.ratio for r in sel],
                    marker="o",
                    linestyle=":" if variant == "broken" else "-",
                    label=f"{variant}, c={conc}",
                )
        ax.axhline(CLEAN_TARGET, color="grey", linestyle="--", label=f"target clean {CLEAN_TARGET}")
        ax.axhline(
            BROKEN_TARGET, color="grey", linestyle=":", label=f"target broken {BROKEN_TARGET}"
        )
        ax.set(
            xscale="log",
            xlabel="messages",
            ylabel="chatmend req/s / floor-json req/s",
            title="HTTP throughput vs floor-json (wrk)",
        )
        ax.legend(fontsize="x-small", ncol=2)

        ax = axes[0][2]
        sizes = [s for s in (10, 500) if any(r.messages == s for r in rows)]
        colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"])
        for size in sizes:
            for variant in ("clean", "broken"):
                sel = sorted(
                    (r for r in rows if r.messages == size and r.variant == variant),
                    key=lambda r: r.concurrency,
                )
                color = next(colors)
                xs = [r.concurrency for r in sel]
                added = [r.measured.added("chatmend") for r in sel]
                for i, (marker, style, pct) in enumerate((("o", "-", "p50"), ("^", "--", "p99"))):
                    ax.plot(
                        xs,
                        [a[i] for a in added],
                        color=color,
                        marker=marker,
                        linestyle=style,
                        label=f"{size} {variant} {pct}",
                    )
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        concurrencies = sorted({r.concurrency for r in rows})
        ax.set_xticks(concurrencies, [str(c) for c in concurrencies])
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set(
            xlabel="concurrency (wrk connections)",
            ylabel="chatmend - direct latency, ms (symlog)",
            title="Added p50 / p99 latency vs concurrency",
        )
        ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --- markdown ------------------------------------------------------------------------------


def markdown(res: Results, *, header: str, rounds: int, seconds: int, has_png: bool) -> str:
    micro_md = micro.table(res.micro_rows)
    if res.http_skipped:
        http_md = f"_Skipped: {res.http_skipped}._"
    else:
        http_md = (
            "Throughput (median req/s over rounds):\n\n"
            + http.throughput_table(res.http.rows)
            + "\n\nLatency: direct's and chatmend's own, then what each relay adds to direct "
            "(median of per-round differences; p99 at c=1 is a handful of requests):\n\n"
            + http.latency_table(res.http.rows)
        )
        if res.http.notes:
            http_md += "\n\nPeers:\n\n" + "\n".join(f"- {n}" for n in res.http.notes)
    loops_md = f"_Skipped: {res.loops_skipped}._" if res.loops_skipped else loops.table(res.loops)
    if res.streams is not None:
        streams_md = streams.tables(res.streams)
    else:
        streams_md = f"_Skipped: {res.streams_skipped or 'not run'}._"
    text = f"""{header}

## Targets

From issues 7 and 14 (ratios within this one run on this machine):

{targets_table(targets(res))}

## Sanitizer alone (in process)

`sanitize_body(body, default steps)` against `orjson.dumps(orjson.loads(body))` on the same
payload, interleaved round by round; ratio = median of the per-round ratios (target for broken
500/2000-message payloads: at most {SANITIZER_TARGET}). A clean payload is parsed and checked but
not re-serialized (the original bytes are forwarded).

{micro_md}

## HTTP on loopback (wrk)

Targets, all in front of the same fake upstream (a fixed JSON completion): `direct` (wrk at the
fake itself), `floor-raw` (aiohttp relay forwarding the bytes with one pooled ClientSession, no
JSON), `floor-json` (the same plus one orjson parse + serialize: the least a JSON-aware proxy
pays), `chatmend` (default config, logs to /dev/null){", and peers" if res.peers else ""}.
{http.floors_loop_note()}. One wrk thread posting one payload file; per payload and
concurrency a 1 s warm-up of each target, then {rounds} round(s) of {seconds} s with the targets
interleaved. Ratios (chatmend / floor-json, chatmend / peer) and added latency (target - direct,
p50 and p99) are computed per round, medians reported. Targets: clean at least
{CLEAN_TARGET:.2f}, broken at least {BROKEN_TARGET:.2f} x floor-json; chatmend at least
{LITELLM_TARGET:g} x LiteLLM at c=16. Non-2xx answers and socket errors are counted, not fatal.

{http_md}

## Event loop (`chatmend serve --loop`)

Two chatmend processes, `--loop asyncio` and `--loop uvloop`, in front of the same fake
upstream, measured with wrk as above (interleaved rounds); ratio = median of per-round
uvloop/asyncio req/s.

{loops_md}

## Streams (SSE)

The fake upstream answers `"stream": true` with SSE chunks paced by two headers only it reads
(`X-Bench-Chunks`, `X-Bench-Interval-Ms`; relays forward them as unknown headers), each chunk
stamped with the upstream's `time.monotonic_ns()` at send time. The client is Python (asyncio,
one new connection per request, Connection: close), acceptable here because it measures the
latency of single chunks at c=1, not throughput; it records each socket read with its time and
decodes afterwards. TTFB = request written -> first body byte read. Chunk delay = read time of
the chunk - its upstream stamp. A chunk counts as delivered separately when no other chunk
arrives in the same read. Targets: added TTFB at most {streams.TTFB_TARGET_MS:g} ms p50 at c=1;
chunks relayed one by one (at least {100 * SEPARATE_TARGET:.0f} % separate); 200 concurrent
streams under {streams.MEMORY_LIMIT_MB:.0f} MB RSS.

{streams_md}
"""
    if has_png:
        text += "\n![ratios vs payload size; added latency vs concurrency](latest.png)\n"
    return text
